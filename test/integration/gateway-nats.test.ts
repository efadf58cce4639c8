import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startTestNode, uniqueNamespace, type TestNode } from "../helpers/node";

/**
 * The gateway alone in its broker, the services in another, joined over the
 * real NATS (as in production): errors raised on the other node keep their
 * envelope after crossing the wire, and when that node leaves, partners get
 * 503 SERVICE_UNAVAILABLE and the gateway stops being ready.
 */

let db: TestDatabase;
let services: TestNode | undefined;
let front: TestNode;
let apiKey: string;

async function until<T>(probe: () => Promise<T>, ok: (v: T) => boolean, what: string, timeoutMs = 30_000): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await probe();
		if (ok(value)) return value;
		if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}; last: ${JSON.stringify(value)}`);
		await new Promise((r) => setTimeout(r, 200));
	}
}

async function post(path: string, key: string, body: unknown): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
	const res = await fetch(`${front.baseUrl}${path}`, {
		method: "POST",
		headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
		body: JSON.stringify(body),
	});
	return { status: res.status, headers: res.headers, json: (await res.json()) as Record<string, unknown> };
}

const readyStatus = async () => (await fetch(`${front.baseUrl}/health/ready`)).status;

beforeAll(async () => {
	db = await createTestDatabase("gatewaynats");
	const namespace = uniqueNamespace("gw");
	// Two brokers in one process: each needs its own node id on the shared namespace.
	services = await startTestNode({ databaseUrl: db.url, services: ["partners", "pricing", "riders", "orders"], nats: { namespace }, env: { NODE_ID: `${namespace}-services` } });
	front = await startTestNode({ databaseUrl: db.url, services: ["gateway"], nats: { namespace }, env: { NODE_ID: `${namespace}-gateway` } });
	apiKey = (await services.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Acme" })).apiKey;
	await until(readyStatus, (s) => s === 200, "the gateway to see every service over NATS");
});

afterAll(async () => {
	await front?.stop();
	await services?.stop();
	await db?.drop();
	delete process.env.TRANSPORTER;
	delete process.env.NODE_ID;
});

it("authenticates through the partners service on the other node", async () => {
	expect((await post("/ride/status", "rk_unknown-key-0123456789012345678901", { orderId: "ord_x" })).status).toBe(401);
	const known = await post("/ride/status", apiKey, { orderId: "ord_doesnotexist000000000" });
	expect([known.status, known.json.code]).toEqual([404, "ORDER_NOT_FOUND"]);
	expect(known.json).toEqual({ code: "ORDER_NOT_FOUND", message: expect.any(String), retryable: false });
});

it("keeps validation details when the ValidationError crossed NATS", async () => {
	const r = await post("/ride/fare-estimate", apiKey, { pickup: { lat: 12.97, lng: 200 }, drop: { lat: 12.93, lng: 77.62 } });
	expect(r.status).toBe(400);
	expect(r.json).toEqual({
		code: "VALIDATION_ERROR",
		message: "pickup.lng must be less than or equal to 180",
		details: [{ field: "pickup.lng", message: "pickup.lng must be less than or equal to 180" }],
		retryable: false,
	});
});

it("answers 503 SERVICE_UNAVAILABLE and is not ready once the services' node is gone", async () => {
	await services!.stop();
	services = undefined;
	const r = await until(() => post("/ride/fare-estimate", apiKey, { pickup: { lat: 12.97, lng: 77.59 }, drop: { lat: 12.93, lng: 77.62 } }), (a) => a.status !== 200 && a.status !== 401, "the node to leave");
	// Authentication itself needs partners: with it gone the whole request is unavailable, not unauthorized.
	expect(r.status).toBe(503);
	expect(r.json).toMatchObject({ code: "SERVICE_UNAVAILABLE", retryable: true });
	expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
	expect(await readyStatus()).toBe(503);
});
