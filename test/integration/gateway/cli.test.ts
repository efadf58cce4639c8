import { connect, createTestDatabase, TEST_NATS_URL, type TestDatabase } from "../../helpers/db";
import { PartnerApi } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { runScript } from "../../helpers/processes";

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
	expect(first.stdout).toMatch(
		/^partners: applied partners\/001-partners, partners\/002-api-keys-and-webhook-secrets, partners\/003-api-key-modes, partners\/004-webhook-secrets-per-mode, partners\/005-audit, partners\/006-api-versions$/m,
	);
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
	expect(Object.keys(partner).sort()).toEqual(["apiKey", "partnerId", "webhookSecret", "webhookSecrets"]);
	// A secret per mode; webhookSecret is the first key's mode's (test).
	const secrets = partner.webhookSecrets as unknown as { test: string; live: string };
	expect(secrets.test).toBe(partner.webhookSecret);
	expect(secrets.live).toMatch(/^whsec_/);
	expect(secrets.live).not.toBe(secrets.test);
	expect(partner.partnerId).toMatch(/^ptn_/);
	// Test mode by default, visible in the key.
	expect(partner.apiKey).toMatch(/^ride_test_[A-Za-z0-9_-]{43}$/);
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

it("--mode live makes live keys (ride_live_…), on create and rotate-key; a partner may hold both modes", async () => {
	const created = await run("bin/partner.ts", ["create", "--name", "Live Co", "--mode", "live"], { DATABASE_URL: db.url });
	expect(created.code).toBe(0);
	const partner = JSON.parse(created.stdout) as { partnerId: string; apiKey: string };
	expect(partner.apiKey).toMatch(/^ride_live_[A-Za-z0-9_-]{43}$/);

	const testKey = await run("bin/partner.ts", ["rotate-key", "--partner", partner.partnerId, "--label", "sandbox", "--mode", "test"], {
		DATABASE_URL: db.url,
	});
	expect(testKey.code).toBe(0);
	expect(JSON.parse(testKey.stdout)).toMatchObject({ apiKey: expect.stringMatching(/^ride_test_/) });
	const liveKey = await run("bin/partner.ts", ["rotate-key", "--partner", partner.partnerId, "--label", "live-2", "--mode", "live"], {
		DATABASE_URL: db.url,
	});
	expect(JSON.parse(liveKey.stdout)).toMatchObject({ apiKey: expect.stringMatching(/^ride_live_/) });

	const listed = await run("bin/partner.ts", ["list-keys", "--partner", partner.partnerId], { DATABASE_URL: db.url });
	const keys = JSON.parse(listed.stdout) as Array<{ label: string; mode: string }>;
	expect(keys.map((k) => [k.label, k.mode])).toEqual([
		["initial", "live"],
		["sandbox", "test"],
		["live-2", "live"],
	]);

	// A given key that names the other mode is refused.
	const mismatched = await run("bin/partner.ts", ["create", "--name", "Odd", "--mode", "test", "--api-key", `rk_live_${"a".repeat(40)}`], {
		DATABASE_URL: db.url,
	});
	expect(mismatched.code).toBe(1);
	expect(mismatched.stderr).toMatch(/apiKey/);
});

it("holds create --api-key to rotate-key's rules: length, characters, prefix, uniqueness", async () => {
	const create = (apiKey: string, mode = "test") =>
		run("bin/partner.ts", ["create", "--name", "Given", "--mode", mode, "--api-key", apiKey], { DATABASE_URL: db.url });
	const rotate = (partnerId: string, apiKey: string) =>
		run("bin/partner.ts", ["rotate-key", "--partner", partnerId, "--label", "given", "--api-key", apiKey], { DATABASE_URL: db.url });
	const good = `ride_test_${"g".repeat(40)}`;
	const made = await create(good);
	expect(made.code).toBe(0);
	const { partnerId } = JSON.parse(made.stdout) as { partnerId: string };
	const refused: Record<string, string> = {
		"too short (24 characters)": "ride_test_abcdefghijklmn",
		"a character outside A-Za-z0-9_-": `ride_test_${"a".repeat(30)}.~+/`,
		"the other mode's prefix": `ride_live_${"a".repeat(40)}`,
		"Stripe's rk_ prefix": `rk_${"a".repeat(40)}`,
		"already in use": good,
	};
	for (const [why, apiKey] of Object.entries(refused)) {
		// The same answer from create and from rotate-key.
		for (const answer of [await create(apiKey), await rotate(partnerId, apiKey)]) {
			expect({ why, code: answer.code, stdout: answer.stdout }).toEqual({ why, code: 1, stdout: "" });
			expect(answer.stderr).toMatch(why === "already in use" ? /already in use/ : /apiKey/);
			expect(answer.stderr).not.toContain(apiKey);
		}
	}
	// Nothing was written by the refusals: one partner "Given", one key.
	const keys = JSON.parse((await run("bin/partner.ts", ["list-keys", "--partner", partnerId], { DATABASE_URL: db.url })).stdout) as unknown[];
	expect(keys).toHaveLength(1);
	const partners = JSON.parse((await run("bin/partner.ts", ["list"], { DATABASE_URL: db.url })).stdout) as Array<{ name: string }>;
	expect(partners.filter((p) => p.name === "Given")).toHaveLength(1);
}, 120_000);

it("refuses bad usage with a message on stderr and exit code 2", async () => {
	// Each key-management verb's own usage rules: test/unit/partners/cli.test.ts.
	for (const args of [
		[],
		["frobnicate"],
		["create"],
		["create", "--name"],
		["create", "--nmae", "Acme"],
		["list", "--all"],
		["revoke-key"],
		["create", "--name", "Acme", "--mode", "prod"],
	]) {
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

it("rotate-key, list-keys, revoke-key and rotate-webhook-secret; with TRANSPORTER a running gateway refuses a revoked key at once", async () => {
	const namespace = uniqueNamespace("cli");
	const onBus = { DATABASE_URL: db.url, TRANSPORTER: TEST_NATS_URL, NAMESPACE: namespace };
	const running = await startTestNode({ databaseUrl: db.url, services: ["partners", "gateway"], nats: { namespace } });
	try {
		const json = async (args: string[], env: Record<string, string> = { DATABASE_URL: db.url }) => {
			const r = await run("bin/partner.ts", args, env);
			expect({ args, code: r.code, stderr: r.code === 0 ? "" : r.stderr }).toEqual({ args, code: 0, stderr: "" });
			return JSON.parse(r.stdout) as unknown;
		};
		const call = (key: string) => new PartnerApi(running.baseUrl!, key).post("/ride/status", { orderId: "ord_x" });
		const partner = (await json(["create", "--name", "Rotator"])) as { partnerId: string; apiKey: string };
		expect((await call(partner.apiKey)).status).not.toBe(401);

		const fresh = (await json(["rotate-key", "--partner", partner.partnerId, "--label", "second"], onBus)) as Record<string, string>;
		expect(Object.keys(fresh).sort()).toEqual(["apiKey", "keyId", "label", "partnerId"]);
		expect(fresh.apiKey).toMatch(/^ride_test_/);
		expect((await call(fresh.apiKey)).status).not.toBe(401);

		const listed = await run("bin/partner.ts", ["list-keys", "--partner", partner.partnerId], { DATABASE_URL: db.url });
		const keys = JSON.parse(listed.stdout) as Array<{ keyId: string; label: string; revokedAt: string | null }>;
		expect(keys.map((k) => k.label)).toEqual(["initial", "second"]);
		expect(listed.stdout).not.toContain(partner.apiKey);
		expect(listed.stdout).not.toContain(fresh.apiKey);

		// The gateway's partners instance had the key cached; the CLI's announcement drops it before it answers.
		const revoked = (await json(["revoke-key", "--key", keys[0].keyId], onBus)) as { revokedKeyIds: string[] };
		expect(revoked.revokedKeyIds).toEqual([keys[0].keyId]);
		expect((await call(partner.apiKey)).status).toBe(401);
		expect((await call(fresh.apiKey)).status).not.toBe(401);

		const rotated = (await json(["rotate-webhook-secret", "--partner", partner.partnerId, "--mode", "test", "--grace", "1h"], onBus)) as {
			webhookSecret: string;
			previousValidUntil: string;
		};
		expect(rotated.webhookSecret).toMatch(/^whsec_/);
		expect(Date.parse(rotated.previousValidUntil)).toBeGreaterThan(Date.now() + 3_000_000);
		const signing = await running.broker.call<
			{ webhookSecrets: Array<{ secret: string; validUntil: string | null }> },
			{ partnerId: string; mode: string }
		>("partners.signingSecret", { partnerId: partner.partnerId, mode: "test" });
		expect(signing.webhookSecrets.map((s) => s.validUntil === null)).toEqual([true, false]);
		expect(signing.webhookSecrets[0].secret).toBe(rotated.webhookSecret);

		// The whole partner: every key refused.
		await json(["revoke-key", "--partner", partner.partnerId], onBus);
		expect((await call(fresh.apiKey)).status).toBe(401);
		const again = await run("bin/partner.ts", ["rotate-key", "--partner", partner.partnerId, "--label", "third"], { DATABASE_URL: db.url });
		expect(again.code).toBe(1);
		expect(again.stderr).toMatch(/revoked/);
	} finally {
		await running.stop();
	}
});
