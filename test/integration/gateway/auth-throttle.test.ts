import { request } from "node:http";
import { randomBytes } from "node:crypto";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import type { Db } from "../../../mixins/db.mixin";

/**
 * The failed-authentication throttle of one gateway without Redis, over real
 * HTTP from distinct loopback addresses (127.0.0.2, .3, …): the client is the
 * socket's peer, X-Forwarded-For is not believed unless TRUST_PROXY says so,
 * and once an address is throttled its unknown keys cost the partners service
 * no database lookup: the gateway asks with `onlyKnown: true` (counted on the
 * broker, which still runs the real partners service, whose key lookups are
 * counted on its database connection). Many gateways, Redis and new keys:
 * auth-lockout.test.ts.
 */

const LIMIT = 3;
let bed: Testbed;
let base: URL;
let goodKey: string;
let authenticateCalls = 0;
let onlyKnownCalls = 0;
let keyLookups = 0;

interface Answer {
	status: number;
	headers: Record<string, string | string[] | undefined>;
	body: Record<string, unknown>;
}

/** POST /ride/status from local address `from`. */
function statusFrom(from: string, key: string, headers: Record<string, string> = {}): Promise<Answer> {
	const body = JSON.stringify({ orderId: "ord_doesnotexist000000000" });
	return new Promise((done, fail) => {
		const req = request(
			{
				host: "127.0.0.1",
				port: base.port,
				path: "/ride/status",
				method: "POST",
				localAddress: from,
				headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), ...headers },
			},
			(res) => {
				let text = "";
				res.on("data", (c: Buffer) => (text += c.toString()));
				res.on("end", () => done({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) as Record<string, unknown> }));
			},
		);
		req.on("error", fail);
		req.end(body);
	});
}

const guess = () => `rk_guess_${randomBytes(12).toString("hex")}`;

beforeAll(async () => {
	bed = await startTestbed("gwauththrottle", { services: ["gateway", "partners"], env: { AUTH_FAILURE_LIMIT_PER_MINUTE: String(LIMIT), LOGLEVEL: "error" } });
	base = new URL(bed.node.baseUrl!);
	goodKey = (await bed.node.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Acme" })).apiKey;
	const broker = bed.node.broker;
	const call = broker.call.bind(broker);
	// Counts, and passes every call on unchanged to the real service.
	jest.spyOn(broker, "call").mockImplementation(((action: string, ...rest: unknown[]) => {
		if (action === "partners.authenticate") {
			authenticateCalls += 1;
			if ((rest[0] as { onlyKnown?: boolean } | undefined)?.onlyKnown) onlyKnownCalls += 1;
		}
		return (call as (...args: unknown[]) => unknown)(action, ...rest);
	}) as typeof broker.call);
	const db = (broker.getLocalService("partners") as unknown as { db: Db }).db;
	const rows = db.rows.bind(db);
	jest.spyOn(db, "rows").mockImplementation(((sql: string, ...rest: unknown[]) => {
		if (sql.includes("key_hash = $1")) keyLookups += 1;
		return (rows as (...args: unknown[]) => unknown)(sql, ...rest);
	}) as typeof db.rows);
});

afterAll(async () => {
	jest.restoreAllMocks();
	await bed?.stop();
});

it("answers 429 after N unknown keys from one address, and those cost no key lookup any more", async () => {
	const before = authenticateCalls;
	const lookupsBefore = keyLookups;
	const first = [];
	for (let i = 0; i < LIMIT; i++) first.push(await statusFrom("127.0.0.2", guess()));
	expect(first.map((a) => a.status)).toEqual(Array(LIMIT).fill(401));
	expect(authenticateCalls - before).toBe(LIMIT);

	for (let i = 0; i < 20; i++) {
		const r = await statusFrom("127.0.0.2", guess());
		expect(r.status).toBe(429);
		expect(r.body).toMatchObject({ code: "RATE_LIMITED", retryable: true });
		expect(Number(r.headers["retry-after"])).toBeGreaterThanOrEqual(1);
	}
	expect(keyLookups - lookupsBefore).toBe(LIMIT);
	// 20 more guesses: asked with onlyKnown, answered from the known-keys set, no database lookup.
	expect({ calls: authenticateCalls - before, onlyKnown: onlyKnownCalls, lookups: keyLookups - lookupsBefore }).toEqual({
		calls: LIMIT + 20,
		onlyKnown: 20,
		lookups: LIMIT,
	});
});

it("does not believe X-Forwarded-For without TRUST_PROXY", async () => {
	const r = await statusFrom("127.0.0.2", guess(), { "X-Forwarded-For": "198.51.100.77" });
	expect(r.status).toBe(429);
});

it("does not slow a good key: from another address, and from the throttled one", async () => {
	// Authenticated: past the throttle and the key (orders is not running here, so the call answers 503).
	const elsewhere = await statusFrom("127.0.0.3", goodKey);
	expect(elsewhere.status).toBe(503);
	expect(elsewhere.headers["x-ratelimit-limit"]).toBeDefined();
	expect((await statusFrom("127.0.0.2", goodKey)).status).toBe(503);
	// The other address's own unknown keys still get their 401 (its count is its own).
	expect((await statusFrom("127.0.0.3", guess())).status).toBe(401);
});
