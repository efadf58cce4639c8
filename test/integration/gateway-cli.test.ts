import { connect, createTestDatabase, type TestDatabase } from "../helpers/db";
import { PartnerApi } from "../helpers/http";
import { startTestNode, type TestNode } from "../helpers/node";
import { runScript } from "../helpers/processes";

/**
 * The operators' entry points as operators run them: separate Node processes
 * (`npm run partner`, `npm run migrate`) against a real PostgreSQL, then the
 * key they printed used over real HTTP.
 */

/** With LOGLEVEL=info in the environment, to show a tool's stdout stays its answer alone. */
const run = (script: string, args: string[], env: Record<string, string>) => runScript(script, args, { LOGLEVEL: "info", ...env });

let db: TestDatabase;
let node: TestNode | undefined;

beforeAll(async () => {
	db = await createTestDatabase("gatewaycli");
});

afterAll(async () => {
	await node?.stop();
	await db?.drop();
});

it("npm run migrate applies every service's migrations and exits 0, and again finds nothing to do", async () => {
	const first = await run("bin/migrate.ts", [], { DATABASE_URL: db.url });
	expect(first.stderr).not.toMatch(/failed/);
	expect(first.code).toBe(0);
	expect(first.stdout).toMatch(/^partners: applied partners\/001-partners, partners\/002-api-keys-and-webhook-secrets$/m);
	const client = await connect(db.url);
	try {
		const { rows } = await client.query<{ name: string }>("SELECT name FROM schema_migrations ORDER BY name");
		const names = rows.map((r) => r.name);
		for (const service of ["partners", "pricing", "riders", "orders", "dispatch", "notifications"]) {
			expect(names.some((n) => n.startsWith(`${service}/`))).toBe(true);
		}
	} finally {
		await client.end();
	}
	const again = await run("bin/migrate.ts", [], { DATABASE_URL: db.url });
	expect(again.code).toBe(0);
	expect(again.stdout).toMatch(/^partners: up to date$/m);
	expect(again.stdout).not.toMatch(/applied/);
});

it("npm run partner -- create prints one JSON object whose key then works over HTTP", async () => {
	const created = await run("bin/partner.ts", ["create", "--name", "Acme"], { DATABASE_URL: db.url });
	expect(created.code).toBe(0);
	// stdout carries exactly the answer, even with LOGLEVEL=info in the environment.
	const lines = created.stdout.trim().split("\n");
	expect(lines).toHaveLength(1);
	const partner = JSON.parse(lines[0]) as Record<string, string>;
	expect(Object.keys(partner).sort()).toEqual(["apiKey", "partnerId", "webhookSecret"]);
	expect(partner.partnerId).toMatch(/^ptn_/);
	expect(partner.webhookSecret).toMatch(/^whsec_/);
	expect(created.stderr).not.toContain(partner.apiKey);

	const listed = await run("bin/partner.ts", ["list"], { DATABASE_URL: db.url });
	expect(listed.code).toBe(0);
	const list = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
	expect(list).toContainEqual(expect.objectContaining({ partnerId: partner.partnerId, name: "Acme" }));
	expect(listed.stdout).not.toContain(partner.apiKey);

	node = await startTestNode({ databaseUrl: db.url, services: ["partners", "gateway"] });
	const call = (key: string) => new PartnerApi(node!.baseUrl!, key).post("/ride/status", { orderId: "ord_x" });
	const withKey = await call(partner.apiKey);
	// Authenticated (orders is not running here, so the answer is 503, not 401).
	expect(withKey.status).toBe(503);
	expect(withKey.headers.get("x-ratelimit-remaining")).not.toBeNull();
	const wrongKey = await call(`${partner.apiKey}x`);
	expect(wrongKey.status).toBe(401);
});

it("refuses bad usage with a message on stderr and exit code 2", async () => {
	for (const args of [[], ["frobnicate"], ["create"], ["create", "--name"], ["create", "--nmae", "Acme"], ["list", "--all"]]) {
		const r = await run("bin/partner.ts", args, { DATABASE_URL: db.url });
		expect({ args, code: r.code }).toEqual({ args, code: 2 });
		expect(r.stdout).toBe("");
		expect(r.stderr).toMatch(/Usage:/);
	}
});

it("exits 1 with a message when the partner cannot be made", async () => {
	const r = await run("bin/partner.ts", ["create", "--name", "Bad", "--webhook-secret", "not-a-secret"], { DATABASE_URL: db.url });
	expect(r.code).toBe(1);
	expect(r.stdout).toBe("");
	expect(r.stderr).toMatch(/webhookSecret/);
});
