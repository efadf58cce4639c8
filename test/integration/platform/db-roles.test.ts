import { randomBytes } from "node:crypto";
import { Client } from "pg";
import { DB_ROLES, DB_SERVICES, MIGRATIONS_TABLE, serviceUrlVariable, type DbService } from "../../../lib/db-roles";
import { connect, createTestDatabase, SERVER_DATABASE_URL, type TestDatabase } from "../../helpers/db";
import { PartnerApi } from "../../helpers/http";
import { startTestNode, TELEPORTING_DRIVERS, uniqueNamespace, type TestNode } from "../../helpers/node";
import { runScript } from "../../helpers/processes";
import { offerFor, onlineDriver, randomPhone } from "../../helpers/rides";
import { waitFor } from "../../helpers/wait";
import { createPartner, startPartnerEndpoint, type PartnerEndpoint, type TestPartner } from "../../helpers/webhooks";

/**
 * Least privilege in PostgreSQL (issue 25, point 3), on the server
 * PostgreSQL: `npm run migrate` with DATABASE_ADMIN_URL gives each service
 * its own role from its own DATABASE_URL (lib/db-roles.ts). Each role owns
 * its tables only; as the orders role, partners' tables (API keys, webhook
 * secrets) are refused, and so are changing the migrations table and
 * creating tables. Then every service runs on its own role (one node per
 * service over NATS, MIGRATE_ON_START=false) and a ride goes from quote to
 * feedback with its webhooks delivered: each service's own queries work.
 */

const PASSWORD = "test-only-role-password";
const INSUFFICIENT_PRIVILEGE = "42501";

let db: TestDatabase;
/** Role names unique to this run (roles are server-wide). */
const prefix = `rt${randomBytes(3).toString("hex")}`;
const roleOf = (s: DbService) => `${prefix}_${s}`;
const urlAs = (role: string) => {
	const u = new URL(db.url);
	u.username = role;
	u.password = PASSWORD;
	return u.toString();
};
const serviceUrls = (): Record<string, string> => Object.fromEntries(DB_SERVICES.map((s) => [serviceUrlVariable(s), urlAs(roleOf(s))]));
const migrate = (extra: Record<string, string> = {}) =>
	runScript("bin/migrate.ts", [], { DATABASE_URL: "", DATABASE_ADMIN_URL: db.url, ...serviceUrls(), ...extra });

const clients: Client[] = [];
async function as(service: DbService): Promise<Client> {
	const c = await connect(urlAs(roleOf(service)));
	clients.push(c);
	return c;
}
/** The SQLSTATE a statement fails with, or "ok". */
async function outcome(c: Client, sql: string): Promise<string> {
	try {
		await c.query(sql);
		return "ok";
	} catch (err) {
		return (err as { code?: string }).code ?? String(err);
	}
}

beforeAll(async () => {
	db = await createTestDatabase("dbroles");
}, 30_000);

afterAll(async () => {
	for (const c of clients) await c.end().catch(() => undefined);
	await db?.drop();
	const admin = new Client({ connectionString: SERVER_DATABASE_URL });
	await admin.connect();
	try {
		for (const s of DB_SERVICES) await admin.query(`DROP ROLE IF EXISTS "${roleOf(s)}"`);
	} finally {
		await admin.end();
	}
}, 30_000);

describe("the migrate Job with DATABASE_ADMIN_URL", () => {
	test("refuses to start without every service's DATABASE_URL, or with two services on one role", async () => {
		const missing = await migrate({ [serviceUrlVariable("orders")]: "" });
		expect(missing.code).toBe(1);
		expect(missing.stderr).toMatch(/ORDERS_DATABASE_URL is not set/);
		const shared = await migrate({ [serviceUrlVariable("orders")]: urlAs(roleOf("partners")) });
		expect(shared.code).toBe(1);
		expect(shared.stderr).toMatch(/already partners's; each service needs its own role/);
		// Nothing happened: no migrations table yet.
		const admin = await connect(db.url);
		clients.push(admin);
		expect((await admin.query("SELECT to_regclass($1) AS t", [MIGRATIONS_TABLE])).rows[0].t).toBeNull();
	}, 60_000);

	test("creates a login role per service, no superuser, owning exactly its tables and functions", async () => {
		const first = await migrate();
		expect([first.code, first.stderr]).toEqual([0, ""]);
		expect(first.stdout).toMatch(new RegExp(`orders: role ${roleOf("orders")} owns its tables`));
		// Idempotent: a second run (the next release) changes nothing and succeeds.
		const again = await migrate();
		expect([again.code, again.stderr]).toEqual([0, ""]);

		const admin = await connect(db.url);
		clients.push(admin);
		const roles = await admin.query<{
			rolname: string;
			rolsuper: boolean;
			rolcreatedb: boolean;
			rolcreaterole: boolean;
			rolbypassrls: boolean;
			rolcanlogin: boolean;
		}>("SELECT rolname, rolsuper, rolcreatedb, rolcreaterole, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname LIKE $1 ORDER BY rolname", [
			`${prefix}\\_%`,
		]);
		expect(roles.rows).toHaveLength(DB_SERVICES.length);
		for (const r of roles.rows)
			expect(r).toEqual({ rolname: r.rolname, rolsuper: false, rolcreatedb: false, rolcreaterole: false, rolbypassrls: false, rolcanlogin: true });

		const owners = await admin.query<{ name: string; owner: string }>(
			"SELECT c.relname AS name, pg_get_userbyid(c.relowner) AS owner FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r','p','v','m','S')",
		);
		const functions = await admin.query<{ name: string; owner: string }>(
			"SELECT proname AS name, pg_get_userbyid(proowner) AS owner FROM pg_proc WHERE pronamespace = 'public'::regnamespace",
		);
		for (const s of DB_SERVICES) {
			const tables = owners.rows.filter((r) => r.owner === roleOf(s) && !/_seq$/.test(r.name)).map((r) => r.name);
			expect([s, tables.sort()]).toEqual([s, [...DB_ROLES[s].tables].sort()]);
			const fns = functions.rows.filter((r) => r.owner === roleOf(s)).map((r) => r.name);
			expect([s, fns.sort()]).toEqual([s, [...DB_ROLES[s].functions].sort()]);
		}
		// What no service owns: only the migrations table (the admin's).
		const adminOwned = owners.rows.filter((r) => !r.owner.startsWith(`${prefix}_`)).map((r) => r.name);
		expect(adminOwned).toEqual([MIGRATIONS_TABLE]);
	}, 120_000);

	test("as the orders role: partners' API keys and webhook secrets, other services' tables, the migrations table and new tables are refused", async () => {
		const orders = await as("orders");
		expect(await outcome(orders, "SELECT * FROM api_keys")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, "SELECT * FROM webhook_secrets")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, "INSERT INTO api_keys (id, partner_id, key_hash) VALUES ('k', 'p', 'h')")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, "UPDATE api_keys SET revoked_at = now()")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, "DELETE FROM webhook_secrets")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, "ALTER TABLE api_keys ADD COLUMN x int")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, "SELECT * FROM webhook_deliveries")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, "SELECT * FROM drivers")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, "SELECT webhook_claim_v2(1, 1, gen_random_uuid(), 'x', 1, 1, 1, 1)")).toBe(INSUFFICIENT_PRIVILEGE);
		// The migrations table: read its own rows, write nothing.
		expect(await outcome(orders, `SELECT name FROM ${MIGRATIONS_TABLE}`)).toBe("ok");
		expect(await outcome(orders, `DELETE FROM ${MIGRATIONS_TABLE} WHERE name LIKE 'orders/%'`)).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, `INSERT INTO ${MIGRATIONS_TABLE} (name) VALUES ('partners/999-rogue')`)).toBe(INSUFFICIENT_PRIVILEGE);
		// No new objects in the schema, no role changes.
		expect(await outcome(orders, "CREATE TABLE rogue (id int)")).toBe(INSUFFICIENT_PRIVILEGE);
		expect(await outcome(orders, `ALTER ROLE "${roleOf("orders")}" SUPERUSER`)).toBe(INSUFFICIENT_PRIVILEGE);
		// Its own tables work.
		expect(await outcome(orders, "SELECT count(*) FROM orders")).toBe("ok");
		expect(await outcome(orders, "SELECT count(*) FROM idempotency_keys")).toBe("ok");
	});

	test("every role reads only its own tables and what DB_ROLES lets it read", async () => {
		const everyTable = DB_SERVICES.flatMap((s) => DB_ROLES[s].tables.map((t) => ({ owner: s, table: t })));
		for (const s of DB_SERVICES) {
			const c = await as(s);
			const reads: readonly string[] = DB_ROLES[s].reads;
			for (const { owner, table } of everyTable) {
				const expected = owner === s || reads.includes(table) ? "ok" : INSUFFICIENT_PRIVILEGE;
				expect([s, table, await outcome(c, `SELECT 1 FROM ${table} LIMIT 1`)]).toEqual([s, table, expected]);
				if (owner !== s) {
					// Reading is all another service's table ever allows.
					expect([s, table, await outcome(c, `DELETE FROM ${table}`)]).toEqual([s, table, INSUFFICIENT_PRIVILEGE]);
				}
			}
		}
	}, 60_000);

	test("a table no service owns in lib/db-roles.ts stops the Job, and nothing is handed over", async () => {
		const admin = await connect(db.url);
		clients.push(admin);
		await admin.query("CREATE TABLE rogue_audit (id int)");
		await admin.query("CREATE FUNCTION rogue_fn() RETURNS int LANGUAGE sql AS 'SELECT 1'");
		try {
			const r = await migrate();
			expect(r.code).toBe(1);
			expect(r.stderr).toMatch(/not in lib\/db-roles\.ts \(no service would own them\): table rogue_audit, function rogue_fn/);
		} finally {
			await admin.query("DROP TABLE rogue_audit");
			await admin.query("DROP FUNCTION rogue_fn()");
		}
	}, 60_000);
});

describe("every service on its own role", () => {
	const nodes: TestNode[] = [];
	let gateway: TestNode;
	let partner: TestPartner;
	let endpoint: PartnerEndpoint;

	beforeAll(async () => {
		// Idempotent: the Job as a release runs it (and this block does not depend on the one above).
		const migrated = await migrate();
		expect([migrated.code, migrated.stderr]).toEqual([0, ""]);
		const namespace = uniqueNamespace("dbroles");
		const start = (services: Parameters<typeof startTestNode>[0]["services"], role: DbService, env: Record<string, string> = {}) =>
			startTestNode({
				databaseUrl: urlAs(roleOf(role)),
				services,
				nats: { namespace },
				env: {
					...TELEPORTING_DRIVERS,
					NODE_ID: `${namespace}-${role}`,
					MIGRATE_ON_START: "false",
					FLEET_MODE: "live",
					DISPATCH_OFFER_TIMEOUT_MS: "10000",
					...env,
				},
			});
		gateway = await start(["gateway", "partners"], "partners", { RATE_LIMIT_PER_MINUTE: "0", AUTH_FAILURE_LIMIT_PER_MINUTE: "0" });
		nodes.push(gateway);
		for (const s of ["pricing", "riders", "orders", "dispatch", "notifications"] as const) nodes.push(await start([s], s));
		await gateway.broker.waitForServices(["partners", "pricing", "riders", "orders", "dispatch", "notifications"], 30_000);
		partner = await createPartner(gateway.broker, "Roles partner");
		endpoint = await startPartnerEndpoint(partner.webhookSecret);
	}, 120_000);

	afterAll(async () => {
		await endpoint?.close();
		for (const n of nodes.reverse()) await n.stop();
	}, 60_000);

	test("a service whose migrations the Job has not applied refuses to start", async () => {
		const admin = await connect(db.url);
		clients.push(admin);
		await admin.query(`DELETE FROM ${MIGRATIONS_TABLE} WHERE name = 'riders/001-riders'`);
		try {
			await expect(startTestNode({ databaseUrl: urlAs(roleOf("riders")), services: ["riders"], env: { MIGRATE_ON_START: "false" } })).rejects.toThrow(
				/Migrations not applied: riders\/001-riders\. Run the migrate Job/,
			);
		} finally {
			await admin.query(`INSERT INTO ${MIGRATIONS_TABLE} (name) VALUES ('riders/001-riders')`);
		}
	}, 60_000);

	test("a ride from quote to feedback, with its webhooks delivered: each service's own queries work on its role", async () => {
		const api = new PartnerApi(gateway.baseUrl!, partner.apiKey);
		const pickup = { lat: 12.9716, lng: 77.5946 };
		const drop = { lat: 12.9616, lng: 77.6046 };
		const driver = await onlineDriver(gateway.broker, pickup, 300);
		// Driver tokens are dispatch's table too.
		const withToken = await gateway.broker.call<{ driverId: string; token: string }, unknown>("dispatch.createDriverToken", {
			name: "Token Driver",
			phone: randomPhone("+9196"),
			vehicleNumber: "KA01AB1234",
			serviceType: "scooty",
			mode: "test",
		});
		expect(typeof withToken.token).toBe("string");

		const quote = await api.post<{ quotes: Array<{ quoteId: string }> }>("/ride/fare-estimate", { pickup, drop, serviceType: "cab" });
		expect(quote.status).toBe(200);
		const created = await api.post<{ orderId: string; otp: string }>(
			"/ride/create-order",
			{
				user: { name: "Role Rider", phone: randomPhone() },
				serviceType: "cab",
				pickup,
				drop,
				webhookURL: `${endpoint.url}/hooks`,
				quoteId: quote.body.quotes[0].quoteId,
			},
			{ "Idempotency-Key": `roles-${prefix}` },
		);
		expect([created.status, created.body]).toEqual([201, expect.objectContaining({ orderId: expect.any(String) })]);
		const { orderId, otp } = created.body;
		await offerFor(gateway.broker, driver.driverId, orderId, 20_000);
		await gateway.broker.call("dispatch.acceptOffer", { driverId: driver.driverId, orderId });
		await gateway.broker.call("dispatch.arrive", { driverId: driver.driverId, orderId, location: { ...pickup, heading: 0 } });
		await gateway.broker.call("dispatch.startRide", { driverId: driver.driverId, orderId, otp });
		await gateway.broker.call("dispatch.dropRide", { driverId: driver.driverId, orderId });
		expect((await api.post<{ status: string }>("/ride/status", { orderId })).body.status).toBe("dropped");
		expect((await api.post("/ride/feedback", { orderId, rating: 5 })).status).toBe(200);

		// notifications read orders' ride events and delivered them, signed, with its own tables and claim function.
		await waitFor(
			"the four status webhooks delivered",
			() => {
				const statuses = new Set(
					endpoint
						.delivered()
						.filter((h) => h.orderId === orderId)
						.map((h) => h.status),
				);
				return ["accepted", "arrived", "started", "dropped"].every((s) => statuses.has(s));
			},
			30_000,
		);
		const events = await api.post<{ events: Array<{ status: string; delivery: { state: string } }> }>("/ride/events", { orderId });
		expect(events.status).toBe(200);
		expect(events.body.events.filter((e) => e.status !== "location_updated").every((e) => e.delivery.state === "delivered")).toBe(true);
	}, 120_000);
});
