import { randomBytes } from "node:crypto";
import { Client } from "pg";

/** The server PostgreSQL the integration tests run against (CI and dev machines have it). */
export const SERVER_DATABASE_URL = process.env.TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
export const TEST_NATS_URL = process.env.TEST_NATS_URL || "nats://127.0.0.1:4222";

export interface TestDatabase {
	url: string;
	name: string;
	drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
	const u = new URL(url);
	u.pathname = `/${database}`;
	return u.toString();
}

/**
 * A fresh, empty database on the server PostgreSQL for one test file, so
 * suites never see each other's rows. Dropped (with its connections) after.
 */
export async function createTestDatabase(label = "t"): Promise<TestDatabase> {
	const name = `ride_${label
		.replace(/[^a-z0-9]/gi, "")
		.toLowerCase()
		.slice(0, 20)}_${randomBytes(4).toString("hex")}`;
	const admin = new Client({ connectionString: SERVER_DATABASE_URL });
	await admin.connect();
	try {
		await admin.query(`CREATE DATABASE "${name}"`);
	} finally {
		await admin.end();
	}
	return {
		name,
		url: withDatabase(SERVER_DATABASE_URL, name),
		async drop() {
			const c = new Client({ connectionString: SERVER_DATABASE_URL });
			await c.connect();
			try {
				await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
			} finally {
				await c.end();
			}
		},
	};
}

/** A plain pg client on a test database, for asserting what the services wrote. */
export async function connect(url: string): Promise<Client> {
	const c = new Client({ connectionString: url });
	await c.connect();
	return c;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Autovacuum on for a test or bench run: the platform expects it (it warns
 * at start when it is off), and without it long runs measure bloat. When
 * the server PostgreSQL has it off, it is turned on with ALTER SYSTEM and a
 * reload (superuser only); `restore` puts the previous setting back. `note`
 * says which it was.
 */
export async function autovacuumOnForRun(url = SERVER_DATABASE_URL): Promise<{ note: string; restore: () => Promise<void> }> {
	const nothing = async () => undefined;
	const pg = new Client({ connectionString: url });
	await pg.connect();
	try {
		// sourcefile is null for a role that may not read it: then a reset is the restore.
		const { rows } = await pg.query<{ setting: string; sourcefile: string | null }>(
			"SELECT setting, sourcefile FROM pg_settings WHERE name = 'autovacuum'",
		);
		if (rows[0]?.setting === "on") return { note: "autovacuum on", restore: nothing };
		const setByAlterSystem = rows[0]?.sourcefile?.endsWith("postgresql.auto.conf") ?? false;
		try {
			await pg.query("ALTER SYSTEM SET autovacuum = on");
			await pg.query("SELECT pg_reload_conf()");
		} catch (err) {
			return { note: `autovacuum OFF (could not turn it on: ${(err as Error).message})`, restore: nothing };
		}
		// The reload reaches the server's processes asynchronously.
		for (let i = 0; i < 50; i++) {
			const c = new Client({ connectionString: url });
			await c.connect();
			const on = (await c.query<{ autovacuum: string }>("SHOW autovacuum")).rows[0]?.autovacuum === "on";
			await c.end();
			if (on) break;
			await sleep(100);
		}
		const restore = async () => {
			const c = new Client({ connectionString: url });
			await c.connect();
			try {
				await c.query(setByAlterSystem ? "ALTER SYSTEM SET autovacuum = off" : "ALTER SYSTEM RESET autovacuum");
				await c.query("SELECT pg_reload_conf()");
			} finally {
				await c.end();
			}
		};
		return { note: "autovacuum turned on for this run (it was off; put back after)", restore };
	} finally {
		await pg.end();
	}
}
