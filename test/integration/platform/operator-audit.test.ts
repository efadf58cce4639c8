import type { ServiceBroker } from "moleculer";
import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { startTestNode, type TestNode } from "../../helpers/node";
import { runScript } from "../../helpers/processes";
import { callAction } from "../../helpers/broker";
import type { CreatedKey, CreatedPartner, RotatedWebhookSecret } from "../../../contracts/partners";
import type { DriverTokenCreated } from "../../../contracts/driver";
import type { AuditPage } from "../../../contracts/audit";

/**
 * The operator audit trail (lib/audit.ts): every change to partners, keys,
 * signing secrets, drivers and driver tokens is recorded in the owning
 * service's table (partners_audit, dispatch_audit) with who (meta.operator,
 * or `unattributed`), what, when and on what, in the change's own
 * transaction, never with a secret value; listable by action and by CLI.
 */

let db: TestDatabase;
let node: TestNode;
let broker: ServiceBroker;
let sql: Client;

beforeAll(async () => {
	db = await createTestDatabase("audit");
	node = await startTestNode({ databaseUrl: db.url, services: ["partners", "dispatch"], env: { FLEET_MODE: "live", DISPATCH_SWEEP_MS: "3600000" } });
	broker = node.broker;
	sql = await connect(db.url);
}, 60_000);

afterAll(async () => {
	await sql?.end();
	await node?.stop();
	await db?.drop();
});

const as = (operator: string) => ({ meta: { operator } });
const allRows = async (table: string) => JSON.stringify((await sql.query(`SELECT * FROM ${table}`)).rows);

it("partners: create, createKey, revokeKey and rotateWebhookSecret are recorded with who, what and on what, never a secret", async () => {
	const created = await broker.call<CreatedPartner, unknown>("partners.create", { name: "Acme", mode: "live" }, as("alice"));
	const key = await broker.call<CreatedKey, unknown>("partners.createKey", { partnerId: created.partnerId, label: "ci", mode: "test" }, as("bob"));
	const rotated = await broker.call<RotatedWebhookSecret, unknown>(
		"partners.rotateWebhookSecret",
		{ partnerId: created.partnerId, mode: "test", graceSeconds: 60 },
		as("alice"),
	);
	await broker.call("partners.revokeKey", { keyId: key.keyId }, as("carol"));
	// No operator named: recorded as unattributed, with the calling node.
	await broker.call("partners.revokeKey", { partnerId: created.partnerId });

	const page = await broker.call<AuditPage, unknown>("partners.audit", { partnerId: created.partnerId });
	expect(page.entries.map((e) => [e.operator, e.action, e.target])).toEqual([
		["unattributed", "partners.revokeKey", null],
		["carol", "partners.revokeKey", key.keyId],
		["alice", "partners.rotateWebhookSecret", null],
		["bob", "partners.createKey", key.keyId],
		["alice", "partners.create", expect.stringMatching(/^key_/)],
	]);
	expect(page.entries.every((e) => e.subject === created.partnerId && typeof e.at === "string")).toBe(true);
	expect(page.entries[0]).toMatchObject({ via: broker.nodeID, detail: { partnerRevoked: true } });
	expect(page.entries[3].detail).toMatchObject({ label: "ci", mode: "test" });
	// Whose secret was rotated: the mode is recorded.
	expect(page.entries[2].detail).toMatchObject({ mode: "test", graceSeconds: 60 });

	const everything = await allRows("partners_audit");
	for (const secret of [created.apiKey, created.webhookSecret, key.apiKey, rotated.webhookSecret]) expect(everything).not.toContain(secret);

	// Paging: newest first, `before` continues.
	const first = await broker.call<AuditPage, unknown>("partners.audit", { limit: 2 });
	expect(first.entries).toHaveLength(2);
	const second = await broker.call<AuditPage, unknown>("partners.audit", { limit: 2, before: first.nextBefore });
	expect(second.entries[0].id).toBeLessThan(first.entries[1].id);
});

it("a malformed operator is a 400 and changes nothing", async () => {
	const before = (await sql.query("SELECT count(*)::int AS n FROM partners")).rows[0].n;
	const answer = await callAction(broker, "partners.create", { name: "Evil" }, { meta: { operator: "x\u0000y" } });
	expect(answer).toMatchObject({ status: 400, code: "VALIDATION_ERROR" });
	expect((await callAction(broker, "partners.create", { name: "Evil" }, { meta: { operator: 42 } })).status).toBe(400);
	expect((await sql.query("SELECT count(*)::int AS n FROM partners")).rows[0].n).toBe(before);
});

it("the entry is in the change's transaction: when it cannot be written, the change is not made either", async () => {
	const created = await broker.call<CreatedPartner, unknown>("partners.create", { name: "Atomic" }, as("alice"));
	await sql.query("ALTER TABLE partners_audit ADD CONSTRAINT audit_refuses CHECK (false) NOT VALID");
	try {
		const answer = await callAction(broker, "partners.createKey", { partnerId: created.partnerId, label: "x" }, as("alice"));
		expect(answer.status).toBe(500);
		expect((await sql.query("SELECT count(*)::int AS n FROM api_keys WHERE partner_id = $1", [created.partnerId])).rows[0].n).toBe(1);
		const rev = await callAction(broker, "partners.revokeKey", { partnerId: created.partnerId }, as("alice"));
		expect(rev.status).toBe(500);
		expect((await sql.query("SELECT disabled_at FROM partners WHERE id = $1", [created.partnerId])).rows[0].disabled_at).toBeNull();
	} finally {
		await sql.query("ALTER TABLE partners_audit DROP CONSTRAINT audit_refuses");
	}
});

it("dispatch: register, createDriverToken, revokeDriverToken and revokeDriverTokens are recorded, never the token; simulated registrations are not", async () => {
	const registered = await broker.call<{ driverId: string }, unknown>(
		"dispatch.register",
		{ name: "Asha", phone: "+919800000901", vehicleNumber: "KA01AA0001", serviceType: "cab" },
		as("dana"),
	);
	await broker.call(
		"dispatch.register",
		{ name: "Sim", phone: "+919800000902", vehicleNumber: "KA01AA0002", serviceType: "cab", simulated: true, mode: "test" },
		as("fleet"),
	);
	const token = await broker.call<DriverTokenCreated, unknown>(
		"dispatch.createDriverToken",
		{ name: "Asha", phone: "+919800000901", vehicleNumber: "KA01AA0001", serviceType: "cab" },
		as("erin"),
	);
	expect(token.driverId).toBe(registered.driverId);
	const second = await broker.call<DriverTokenCreated, unknown>(
		"dispatch.createDriverToken",
		{ name: "Asha", phone: "+919800000901", vehicleNumber: "KA01AA0001", serviceType: "cab" },
		as("erin"),
	);
	// One token by prefix, then (already revoked) again by id: both recorded, the repeat as revoked: false.
	await broker.call("dispatch.revokeDriverToken", { prefix: second.tokenPrefix }, as("gus"));
	await broker.call("dispatch.revokeDriverToken", { tokenId: second.tokenId }, as("gus"));
	await broker.call("dispatch.revokeDriverTokens", { driverId: token.driverId }, as("dana"));

	const page = await broker.call<AuditPage, unknown>("dispatch.audit", {});
	expect(page.entries.map((e) => [e.operator, e.action, e.subject, e.target])).toEqual([
		["dana", "dispatch.revokeDriverTokens", token.driverId, null],
		["gus", "dispatch.revokeDriverToken", token.driverId, second.tokenId],
		["gus", "dispatch.revokeDriverToken", token.driverId, second.tokenId],
		["erin", "dispatch.createDriverToken", token.driverId, second.tokenId],
		["erin", "dispatch.createDriverToken", token.driverId, token.tokenId],
		["dana", "dispatch.register", registered.driverId, null],
	]);
	expect(page.entries[0].detail).toEqual({ revoked: 1 });
	expect(page.entries[1].detail).toEqual({ revoked: false });
	expect(page.entries[2].detail).toEqual({ revoked: true });
	const everything = await allRows("dispatch_audit");
	for (const secret of [token.token, second.token]) expect(everything).not.toContain(secret);
	expect((await broker.call<AuditPage, unknown>("dispatch.audit", { driverId: "drv_nobody" })).entries).toEqual([]);
});

it("revoking one driver token is audited in its own transaction: when the entry cannot be written, the token keeps working", async () => {
	const token = await broker.call<DriverTokenCreated, unknown>(
		"dispatch.createDriverToken",
		{ name: "Bala", phone: "+919800000904", vehicleNumber: "KA01AA0004", serviceType: "cab" },
		as("erin"),
	);
	await sql.query("ALTER TABLE dispatch_audit ADD CONSTRAINT audit_refuses CHECK (false) NOT VALID");
	try {
		const answer = await callAction(broker, "dispatch.revokeDriverToken", { tokenId: token.tokenId }, as("gus"));
		expect(answer.status).toBe(500);
		expect((await sql.query("SELECT revoked_at FROM driver_tokens WHERE id = $1", [token.tokenId])).rows[0].revoked_at).toBeNull();
	} finally {
		await sql.query("ALTER TABLE dispatch_audit DROP CONSTRAINT audit_refuses");
	}
	// Nothing matched: an error, and no entry.
	const before = (await sql.query("SELECT count(*)::int AS n FROM dispatch_audit")).rows[0].n;
	expect((await callAction(broker, "dispatch.revokeDriverToken", { tokenId: "dtk_nosuchtoken" }, as("gus"))).status).toBe(404);
	expect((await sql.query("SELECT count(*)::int AS n FROM dispatch_audit")).rows[0].n).toBe(before);
});

it("the CLIs record --operator (else OPERATOR) and list the trail with `audit`", async () => {
	const created = await runScript("bin/partner.ts", ["create", "--name", "Cli Co", "--operator", "frank"], { DATABASE_URL: db.url });
	expect(created.code).toBe(0);
	const { partnerId } = JSON.parse(created.stdout) as CreatedPartner;
	const rotated = await runScript("bin/partner.ts", ["rotate-key", "--partner", partnerId, "--label", "two"], { DATABASE_URL: db.url, OPERATOR: "grace" });
	expect(rotated.code).toBe(0);
	const listed = await runScript("bin/partner.ts", ["audit", "--partner", partnerId], { DATABASE_URL: db.url });
	expect(listed.code).toBe(0);
	const page = JSON.parse(listed.stdout) as AuditPage;
	expect(page.entries.map((e) => [e.operator, e.action])).toEqual([
		["grace", "partners.createKey"],
		["frank", "partners.create"],
	]);

	const driver = await runScript(
		"bin/driver.ts",
		["create", "--name", "Ravi", "--phone", "+919800000903", "--vehicle", "KA01AA0003", "--service-type", "cab", "--operator=heidi"],
		{ DATABASE_URL: db.url },
	);
	expect(driver.code).toBe(0);
	const { driverId } = JSON.parse(driver.stdout) as DriverTokenCreated;
	const trail = await runScript("bin/driver.ts", ["audit", "--driver", driverId, "--limit", "5"], { DATABASE_URL: db.url });
	expect(trail.code).toBe(0);
	expect((JSON.parse(trail.stdout) as AuditPage).entries.map((e) => [e.operator, e.action])).toEqual([["heidi", "dispatch.createDriverToken"]]);

	const bad = await runScript("bin/partner.ts", ["list", "--operator", ""], { DATABASE_URL: db.url, OPERATOR: "", USER: "" });
	expect(bad.code).toBe(2);
}, 120_000);
