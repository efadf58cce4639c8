import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startTestNode, type TestNode } from "../helpers/node";

/**
 * The gateway in front of every service (as `npm start` runs them), over real
 * HTTP and a real PostgreSQL: readiness with everything up, and the gateway's
 * part of real answers — validation details from the services' own
 * fastest-validator schemas, 201/200 relayed from orders, the partner taken
 * from the key and never from the body, foreign ids answered like unknown ones.
 */

let db: TestDatabase;
let node: TestNode;
let base: string;
let keyA: string;
let keyB: string;

interface Answer {
	status: number;
	headers: Headers;
	json: Record<string, unknown>;
	text: string;
}

async function post(path: string, key: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
	const res = await fetch(`${base}${path}`, {
		method: "POST",
		headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
		body: JSON.stringify(body),
	});
	const text = await res.text();
	return { status: res.status, headers: res.headers, json: JSON.parse(text) as Record<string, unknown>, text };
}

const BENGALURU = { pickup: { lat: 12.9716, lng: 77.5946, address: "MG Road" }, drop: { lat: 12.9352, lng: 77.6245 } };

function orderBody(phone: string, extra: Record<string, unknown> = {}) {
	return {
		user: { name: "Asha Rao", phone },
		serviceType: "cab",
		...BENGALURU,
		webhookURL: "http://127.0.0.1:9/hooks/rides",
		metadata: { partnerRef: "booking-8812" },
		...extra,
	};
}

beforeAll(async () => {
	db = await createTestDatabase("gatewayready");
	node = await startTestNode({ databaseUrl: db.url });
	base = node.baseUrl!;
	keyA = (await node.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Partner A" })).apiKey;
	keyB = (await node.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Partner B" })).apiKey;
});

afterAll(async () => {
	await node?.stop();
	await db?.drop();
});

it("is ready when the database and every service it needs answer", async () => {
	const res = await fetch(`${base}/health/ready`);
	expect(res.status).toBe(200);
	expect(await res.json()).toEqual({ status: "ready", checks: { partners: "ok", pricing: "ok", riders: "ok", orders: "ok" } });
});

it("relays a service's answer with the rate-limit and request-id headers", async () => {
	const r = await post("/ride/fare-estimate", keyA, BENGALURU, { "x-request-id": "estimate-1" });
	expect(r.status).toBe(200);
	expect((r.json.quotes as unknown[]).length).toBe(2);
	expect(r.headers.get("x-request-id")).toBe("estimate-1");
	expect(Number(r.headers.get("x-ratelimit-limit"))).toBeGreaterThan(0);
	expect(r.headers.get("x-ratelimit-remaining")).not.toBeNull();
});

it("turns the services' own validation into 400 VALIDATION_ERROR with body field names", async () => {
	const r = await post("/ride/fare-estimate", keyA, { pickup: { lat: 100, lng: 77.59 }, serviceType: "bike" });
	expect(r.status).toBe(400);
	expect(r.json.code).toBe("VALIDATION_ERROR");
	expect(r.json.retryable).toBe(false);
	const fields = (r.json.details as Array<{ field: string; message: string }>).map((d) => d.field);
	expect(fields).toEqual(expect.arrayContaining(["pickup.lat", "drop", "serviceType"]));
	for (const f of fields) expect(f).not.toMatch(/^params\./);
	expect(r.text).not.toMatch(/\n\s+at\s|"stack"|nodeID|"action"/);

	const order = await post("/ride/create-order", keyA, orderBody("+919800000001", { user: { name: "Asha" } }));
	expect(order.status).toBe(400);
	expect((order.json.details as Array<{ field: string }>).map((d) => d.field)).toContain("user.phone");
});

it("relays 201 for a new order and 200 USER_HAVE_ACTIVE_RIDE for the rider's existing one", async () => {
	const created = await post("/ride/create-order", keyA, orderBody("+919800000002"));
	expect(created.status).toBe(201);
	expect(created.json).toMatchObject({ orderId: expect.stringMatching(/^ord_/), status: "searching", metadata: { partnerRef: "booking-8812" } });

	const again = await post("/ride/create-order", keyA, orderBody("+919800000002"));
	expect(again.status).toBe(200);
	expect(again.json).toMatchObject({ code: "USER_HAVE_ACTIVE_RIDE", orderId: created.json.orderId });
});

it("passes Idempotency-Key on: a repeat returns the first answer, status included", async () => {
	const body = orderBody("+919800000003");
	const first = await post("/ride/create-order", keyA, body, { "idempotency-key": "booking-3" });
	const repeat = await post("/ride/create-order", keyA, body, { "idempotency-key": "booking-3" });
	expect(first.status).toBe(201);
	expect(repeat.status).toBe(201);
	expect(repeat.json.orderId).toBe(first.json.orderId);
});

it("takes the partner from the key, never from the body, and answers foreign ids like unknown ones", async () => {
	const created = await post("/ride/create-order", keyA, orderBody("+919800000004", { partnerId: "ptn_someone_else" }));
	expect(created.status).toBe(201);
	const orderId = created.json.orderId as string;

	const mine = await post("/ride/status", keyA, { orderId, partnerId: "ptn_someone_else" });
	expect(mine.status).toBe(200);
	expect(mine.json.orderId).toBe(orderId);

	const theirs = await post("/ride/status", keyB, { orderId });
	const unknown = await post("/ride/status", keyB, { orderId: "ord_doesnotexist000000000" });
	expect([theirs.status, theirs.json.code]).toEqual([404, "ORDER_NOT_FOUND"]);
	expect(theirs.json).toEqual(unknown.json);
});

it("stops being ready while draining", async () => {
	await node.broker.call("gateway.drain");
	const res = await fetch(`${base}/health/ready`);
	expect(res.status).toBe(503);
	expect(await res.json()).toMatchObject({ status: "draining" });
	await node.broker.call("gateway.drain", { draining: false });
	expect((await fetch(`${base}/health/ready`)).status).toBe(200);
});
