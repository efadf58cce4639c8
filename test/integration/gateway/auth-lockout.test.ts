import { randomBytes } from "node:crypto";
import { createTestDatabase, TEST_NATS_URL, type TestDatabase } from "../../helpers/db";
import { httpRequest, type HttpAnswer } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { runScript } from "../../helpers/processes";
import { waitFor } from "../../helpers/wait";
import type { Db } from "../../../mixins/db.mixin";

/**
 * One laptop cannot lock partners or drivers out. Behind an Ingress
 * (TRUST_PROXY=1, the client in X-Forwarded-For), one address sends 35 bad
 * keys; the failed-authentication counter is shared through the real Redis
 * by two gateways. Then, from that same address, a key created after the
 * flood (by `npm run partner`, as an operator would), a rotated key, and a
 * driver token first used on a freshly started gateway all get 200; random
 * keys and tokens from it get 429 and cost no database lookup (every
 * statement of the partners and dispatch services that looks a credential up
 * by its hash is counted on their real database connection).
 *
 * The owning services, each gateway: separate brokers on the real NATS.
 */

const REDIS_URL = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";
const LIMIT = 10;
const FLOOD = 35;
const ATTACKER = "203.0.113.66";
const namespace = uniqueNamespace("lockout");

let db: TestDatabase;
let owners: TestNode;
const gateways: TestNode[] = [];
/** Statements that looked a key or a driver token up by its hash. */
let lookups = 0;

const gatewayEnv = { REDIS_URL, TRUST_PROXY: "1", AUTH_FAILURE_LIMIT_PER_MINUTE: String(LIMIT), LOGLEVEL: "error" };
const fare = { pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } };

function startGateway(): Promise<TestNode> {
	const env = { ...gatewayEnv, NODE_ID: `${namespace}-gateway-${gateways.length + 1}` };
	return startTestNode({ databaseUrl: db.url, services: ["gateway"], env, nats: { namespace } });
}

/** A fare estimate through gateway `g`, as if from `from` (the Ingress appends the client to X-Forwarded-For). */
function quote(g: TestNode, key: string, from = ATTACKER): Promise<HttpAnswer> {
	return httpRequest(`${g.baseUrl}/ride/fare-estimate`, {
		method: "POST",
		headers: { Authorization: `Bearer ${key}`, "X-Forwarded-For": `10.1.2.3, ${from}` },
		body: fare,
	});
}

function goOffline(g: TestNode, token: string, from = ATTACKER): Promise<HttpAnswer> {
	return httpRequest(`${g.baseUrl}/driver/offline`, {
		method: "POST",
		headers: { Authorization: `Bearer ${token}`, "X-Forwarded-For": from },
		body: {},
	});
}

/** Counts, and passes on unchanged, every statement of a service that looks a credential up by its hash. */
function countLookups(service: string): void {
	const svc = owners.broker.getLocalService(service) as unknown as { db: Db };
	const rows = svc.db.rows.bind(svc.db);
	jest.spyOn(svc.db, "rows").mockImplementation(((sql: string, ...rest: unknown[]) => {
		if (/(key_hash|token_hash) = \$1/.test(sql)) lookups += 1;
		return (rows as (...args: unknown[]) => unknown)(sql, ...rest);
	}) as typeof svc.db.rows);
}

const randomKey = () => `ride_test_${randomBytes(32).toString("base64url")}`;
const randomToken = () => `rdt_${randomBytes(32).toString("base64url")}`;

let rotatedPartner: string;
let driverToken: string;

beforeAll(async () => {
	db = await createTestDatabase("gwlockout");
	owners = await startTestNode({
		databaseUrl: db.url,
		services: ["partners", "pricing", "dispatch"],
		env: { LOGLEVEL: "error", NODE_ID: `${namespace}-owners` },
		nats: { namespace },
	});
	gateways.push(await startGateway());
	rotatedPartner = (await owners.broker.call<{ partnerId: string }, unknown>("partners.create", { name: "Rotates" })).partnerId;
	driverToken = (
		await owners.broker.call<{ token: string }, unknown>("dispatch.createDriverToken", {
			name: "Ravi K",
			phone: "+919800000101",
			vehicleNumber: "KA01AB0101",
			serviceType: "cab",
			mode: "test",
		})
	).token;
	await waitFor("the gateway sees partners", async () => (await quote(gateways[0], "not_a_key", "192.0.2.1")).status === 401, 30_000, 100);
	countLookups("partners");
	countLookups("dispatch");
}, 60_000);

afterAll(async () => {
	jest.restoreAllMocks();
	for (const g of gateways) await g.stop();
	await owners?.stop();
	await db?.drop();
});

it("a flood of bad keys from one address throttles that address's unknown keys", async () => {
	const statuses: number[] = [];
	for (let i = 0; i < FLOOD; i++) statuses.push((await quote(gateways[0], randomKey())).status);
	expect(statuses.slice(0, LIMIT)).toEqual(Array(LIMIT).fill(401));
	expect(statuses.slice(LIMIT)).toEqual(Array(FLOOD - LIMIT).fill(429));
});

it("serves a key created after the flood, from the flooding address", async () => {
	const created = await runScript("bin/partner.ts", ["create", "--name", "Newcomer"], {
		DATABASE_URL: db.url,
		TRANSPORTER: TEST_NATS_URL,
		NAMESPACE: namespace,
		LOGLEVEL: "warn",
	});
	expect(created.code).toBe(0);
	const { apiKey } = JSON.parse(created.stdout) as { apiKey: string };
	const r = await quote(gateways[0], apiKey);
	expect({ status: r.status, code: r.body.code }).toEqual({ status: 200, code: undefined });
}, 60_000);

it("serves a rotated key, from the flooding address", async () => {
	const { apiKey } = await owners.broker.call<{ apiKey: string }, unknown>("partners.createKey", { partnerId: rotatedPartner, label: "rotated" });
	expect((await quote(gateways[0], apiKey)).status).toBe(200);
});

it("serves a driver token and a new key on a gateway started after the flood (the count is shared through Redis)", async () => {
	const fresh = await startGateway();
	gateways.push(fresh);
	// The count is shared: a new gateway throttles the address too.
	expect((await quote(fresh, randomKey())).status).toBe(429);
	expect((await goOffline(fresh, driverToken)).status).toBe(200);
	const { apiKey } = await owners.broker.call<{ apiKey: string }, unknown>("partners.createKey", { partnerId: rotatedPartner, label: "fresh pod" });
	expect((await quote(fresh, apiKey)).status).toBe(200);
}, 60_000);

it("answers random keys and tokens from the flooding address 429 without a database lookup", async () => {
	const before = lookups;
	for (let i = 0; i < 20; i++) {
		const g = gateways[i % gateways.length];
		const key = await quote(g, randomKey());
		expect({ status: key.status, code: key.body.code }).toEqual({ status: 429, code: "RATE_LIMITED" });
		expect(Number(key.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
		expect((await goOffline(g, randomToken())).status).toBe(429);
	}
	expect({ lookups: lookups - before }).toEqual({ lookups: 0 });
	// Another client behind the same Ingress is not throttled: its unknown key is looked up and refused.
	expect((await quote(gateways[0], randomKey(), "198.51.100.9")).status).toBe(401);
	expect(lookups - before).toBeGreaterThan(0);
});
