import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import type { Client } from "pg";
import { DB_ROLES, MIGRATIONS_TABLE, missingObjects, unlistedObjects, type SchemaCatalog, type ServiceLogin } from "./db-roles";

/**
 * The SQL that gives each service its own PostgreSQL role (lib/db-roles.ts
 * says what each owns), run by the migrate Job as the admin after every
 * service's migrations. Idempotent: every run brings roles, owners and
 * grants back to what DB_ROLES says, so it is also how a changed password
 * (a rotated Secret) reaches the database.
 */

const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/**
 * A SCRAM-SHA-256 verifier of `password` (RFC 5802/7677, the form
 * PostgreSQL stores): `ALTER ROLE … PASSWORD '<verifier>'` then never puts
 * the password itself in a statement, so no server log (log_statement = ddl)
 * or pg_stat_activity can show it.
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = 4096): string {
	const salted = pbkdf2Sync(password.normalize("NFKC"), salt, iterations, 32, "sha256");
	const clientKey = createHmac("sha256", salted).update("Client Key").digest();
	const storedKey = createHash("sha256").update(clientKey).digest();
	const serverKey = createHmac("sha256", salted).update("Server Key").digest();
	return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}

/**
 * The schema's tables (and views, and sequences no column owns) and
 * functions, leaving out what an extension brought (pg_depend 'e').
 */
export async function readCatalog(client: Client): Promise<SchemaCatalog> {
	const tables = await client.query<{ name: string }>(
		`SELECT c.relname AS name
		   FROM pg_class c
		  WHERE c.relnamespace = current_schema()::regnamespace
		    AND (c.relkind IN ('r','p','v','m','f')
		         OR (c.relkind = 'S' AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a','i'))))
		    AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
		  ORDER BY 1`,
	);
	const functions = await client.query<{ name: string }>(
		`SELECT DISTINCT p.proname AS name
		   FROM pg_proc p
		  WHERE p.pronamespace = current_schema()::regnamespace
		    AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
		  ORDER BY 1`,
	);
	return { tables: tables.rows.map((r) => r.name), functions: functions.rows.map((r) => r.name) };
}

/** Every signature (`webhook_claim_v2(integer, …)`) of the functions named, in the current schema. */
async function signatures(client: Client, names: readonly string[]): Promise<string[]> {
	if (names.length === 0) return [];
	const { rows } = await client.query<{ sig: string }>(
		"SELECT p.oid::regprocedure::text AS sig FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY($1::text[]) ORDER BY 1",
		[names],
	);
	return rows.map((r) => r.sig);
}

/**
 * Creates each service's login role when missing (no superuser, no
 * CREATEDB/CREATEROLE, no RLS bypass), sets its password from its URL, and
 * hands it its objects: owner of its tables and functions, SELECT on what
 * it `reads`, SELECT only on the migrations table, nothing on anyone
 * else's, no CREATE in the schema. Refuses, before changing anything, when
 * the schema holds an object DB_ROLES does not list (or the other way round).
 */
export async function applyServiceRoles(client: Client, logins: ServiceLogin[]): Promise<void> {
	const catalog = await readCatalog(client);
	const unlisted = unlistedObjects(catalog);
	if (unlisted.length > 0) throw new Error(`not in lib/db-roles.ts (no service would own them): ${unlisted.join(", ")}`);
	const missing = missingObjects(catalog);
	if (missing.length > 0) throw new Error(`lib/db-roles.ts lists what no migration created: ${missing.join(", ")}`);

	const { rows } = await client.query<{ superuser: boolean; schema: string }>(
		"SELECT rolsuper AS superuser, current_schema() AS schema FROM pg_roles WHERE rolname = current_user",
	);
	const adminIsSuperuser = rows[0]?.superuser === true;
	const schema = ident(rows[0]!.schema);

	for (const login of logins) {
		const role = ident(login.role);
		const exists = (await client.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [login.role])).rowCount! > 0;
		const attributes = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT";
		await client.query(`${exists ? "ALTER" : "CREATE"} ROLE ${role} ${attributes}`);
		if (login.password) await client.query(`ALTER ROLE ${role} PASSWORD ${client.escapeLiteral(scramVerifier(login.password))}`);
		// A non-superuser admin (a managed database's) must be a member to hand objects to the role.
		if (!adminIsSuperuser) await client.query(`GRANT ${role} TO CURRENT_USER`);
	}

	// Nobody but the admin creates objects in the schema; every service may look names up in it.
	await client.query(`REVOKE CREATE ON SCHEMA ${schema} FROM PUBLIC`);
	const everyRole = logins.map((l) => ident(l.role)).join(", ");
	await client.query(`GRANT USAGE ON SCHEMA ${schema} TO ${everyRole}`);
	await client.query(`REVOKE ALL ON TABLE ${ident(MIGRATIONS_TABLE)} FROM PUBLIC, ${everyRole}`);
	await client.query(`GRANT SELECT ON TABLE ${ident(MIGRATIONS_TABLE)} TO ${everyRole}`);

	for (const login of logins) {
		const owned = DB_ROLES[login.service];
		const role = ident(login.role);
		const others = ["PUBLIC", ...logins.filter((l) => l !== login).map((l) => ident(l.role))].join(", ");
		for (const table of owned.tables) await client.query(`ALTER TABLE ${ident(table)} OWNER TO ${role}`);
		if (owned.tables.length > 0) {
			// Grants another run (or an older DB_ROLES) left to other services go; `reads` below puts back the ones that stay.
			await client.query(`REVOKE ALL ON TABLE ${owned.tables.map(ident).join(", ")} FROM ${others}`);
		}
		for (const sig of await signatures(client, owned.functions)) {
			await client.query(`ALTER FUNCTION ${sig} OWNER TO ${role}`);
			// Functions are executable by PUBLIC by default.
			await client.query(`REVOKE ALL ON FUNCTION ${sig} FROM ${others}`);
		}
	}
	for (const login of logins) {
		const reads = DB_ROLES[login.service].reads;
		if (reads.length > 0) await client.query(`GRANT SELECT ON TABLE ${reads.map(ident).join(", ")} TO ${ident(login.role)}`);
	}
}
