import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { startTestNode, type TestNode } from "../../helpers/node";

/**
 * The gateway in front of every service (as `npm start` runs them), over real
 * HTTP and a real PostgreSQL: readiness with everything up, and the gateway's
 * part of real answers — validation details from the services' own
 * fastest-validator schemas, 201/200 relayed from orders, the partner taken
 * from the key and never from the body, foreign ids answered like unknown ones.
 */

/**
 * A small validator for the JSON Schema subset our OpenAPI document uses
 * ($ref, type, required, properties, enum, const, pattern, min/max, items,
 * oneOf, allOf): real answers must match the published document.
 */
function schemaErrors(doc: Record<string, unknown>, schema: unknown, value: unknown, path = "$"): string[] {
	const s = schema as Record<string, unknown>;
	if (!s || typeof s !== "object") return [];
	if (typeof s.$ref === "string") {
		let target: unknown = doc;
		for (const part of s.$ref.replace(/^#\//, "").split("/")) target = (target as Record<string, unknown>)[part];
		return schemaErrors(doc, target, value, path);
	}
	const errors: string[] = [];
	if (Array.isArray(s.allOf)) for (const part of s.allOf) errors.push(...schemaErrors(doc, part, value, path));
	if (Array.isArray(s.oneOf)) {
		const matching = s.oneOf.filter((part) => schemaErrors(doc, part, value, path).length === 0).length;
		if (matching !== 1) errors.push(`${path}: matches ${matching} of oneOf`);
	}
	if (s.type !== undefined) {
		const types = Array.isArray(s.type) ? s.type : [s.type];
		const actual = value === null ? "null" : Array.isArray(value) ? "array" : Number.isInteger(value) ? "integer" : typeof value;
		const ok = types.some((t) => t === actual || (t === "number" && actual === "integer"));
		if (!ok) return [...errors, `${path}: ${JSON.stringify(value)} is not ${types.join("|")}`];
	}
	if ("const" in s && value !== s.const) errors.push(`${path}: not ${JSON.stringify(s.const)}`);
	if (Array.isArray(s.enum) && !s.enum.includes(value)) errors.push(`${path}: ${JSON.stringify(value)} not in enum`);
	if (typeof value === "string" && typeof s.pattern === "string" && !new RegExp(s.pattern).test(value)) errors.push(`${path}: does not match ${s.pattern}`);
	if (typeof value === "number") {
		if (typeof s.minimum === "number" && value < s.minimum) errors.push(`${path}: below minimum`);
		if (typeof s.maximum === "number" && value > s.maximum) errors.push(`${path}: above maximum`);
	}
	if (value && typeof value === "object" && !Array.isArray(value)) {
		const obj = value as Record<string, unknown>;
		for (const key of (s.required as string[] | undefined) ?? []) if (!(key in obj)) errors.push(`${path}.${key}: missing`);
		const props = (s.properties ?? {}) as Record<string, unknown>;
		for (const [key, sub] of Object.entries(props)) if (key in obj) errors.push(...schemaErrors(doc, sub, obj[key], `${path}.${key}`));
	}
	if (Array.isArray(value) && s.items) value.forEach((item, i) => errors.push(...schemaErrors(doc, s.items, item, `${path}[${i}]`)));
	return errors;
}

let openapi: Record<string, unknown>;

/** The answer matches what /openapi.json says this path answers with this status. */
function expectDocumented(path: string, r: Answer): void {
	const op = (openapi.paths as Record<string, Record<string, unknown>>)[path].post as {
		responses: Record<string, { content: Record<string, { schema: unknown }> }>;
	};
	const response = op.responses[String(r.status)];
	expect({ path, status: r.status, documented: response !== undefined }).toEqual({ path, status: r.status, documented: true });
	expect({ path, status: r.status, errors: schemaErrors(openapi, response.content["application/json"].schema, r.json) }).toEqual({
		path,
		status: r.status,
		errors: [],
	});
}

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
	// Readiness answers are reused for a minute here, so counting the checks below cannot depend on timing.
	node = await startTestNode({ databaseUrl: db.url, env: { READY_CACHE_MS: "60000" } });
	base = node.baseUrl!;
	keyA = (await node.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Partner A" })).apiKey;
	keyB = (await node.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Partner B" })).apiKey;
	openapi = (await (await fetch(`${base}/openapi.json`)).json()) as Record<string, unknown>;
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
	expectDocumented("/ride/fare-estimate", r);
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
	expectDocumented("/ride/fare-estimate", r);

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
	expectDocumented("/ride/create-order", created);
	expectDocumented("/ride/create-order", again);
});

it("answers every ride endpoint as the OpenAPI document says", async () => {
	const created = await post("/ride/create-order", keyA, orderBody("+919800000005"));
	const orderId = created.json.orderId as string;
	expectDocumented("/ride/status", await post("/ride/status", keyA, { orderId }));
	const feedbackTooEarly = await post("/ride/feedback", keyA, { orderId, rating: 5 });
	expect(feedbackTooEarly.json.code).toBe("RIDE_NOT_COMPLETED");
	expectDocumented("/ride/feedback", feedbackTooEarly);
	const cancelled = await post("/ride/cancel", keyA, { orderId, reason: "changed plans" });
	expect(cancelled.json).toEqual({ code: "RIDE_CANCELLED", orderId, status: "customer_cancelled", cancellationFee: expect.objectContaining({ amount: 0 }) });
	expectDocumented("/ride/cancel", cancelled);
	const events = await post("/ride/events", keyA, { orderId });
	expect(events.status).toBe(200);
	expect((events.json.events as Array<{ status: string }>).map((e) => e.status)).toEqual(["customer_cancelled"]);
	expectDocumented("/ride/events", events);
	expectDocumented("/ride/events", await post("/ride/events", keyB, { orderId }));
	expectDocumented("/ride/create-order", await post("/ride/create-order", keyA, { ...orderBody("+919800000006"), quoteId: "qt_forged" }));
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

it("keeps /health/ready cheap: a flood of probes costs each service at most one database check", async () => {
	// Counts the gateway's calls and passes each on unchanged to the real services.
	const call = node.broker.call.bind(node.broker);
	let dbHealth = 0;
	const spy = jest.spyOn(node.broker, "call").mockImplementation(((action: string, ...rest: unknown[]) => {
		if (typeof action === "string" && action.endsWith(".dbHealth")) dbHealth += 1;
		return (call as (...args: unknown[]) => unknown)(action, ...rest);
	}) as typeof node.broker.call);
	try {
		const answers = await Promise.all(Array.from({ length: 40 }, () => fetch(`${base}/health/ready`)));
		for (let i = 0; i < 40; i++) answers.push(await fetch(`${base}/health/ready`));
		expect(answers.map((r) => r.status)).toEqual(Array(80).fill(200));
		// Without the cache: 80 probes × 4 services.
		expect(dbHealth).toBeLessThanOrEqual(4);
	} finally {
		spy.mockRestore();
	}
});

it("stops being ready while draining", async () => {
	await node.broker.call("gateway.drain");
	const res = await fetch(`${base}/health/ready`);
	expect(res.status).toBe(503);
	expect(await res.json()).toMatchObject({ status: "draining" });
	await node.broker.call("gateway.drain", { draining: false });
	expect((await fetch(`${base}/health/ready`)).status).toBe(200);
});
