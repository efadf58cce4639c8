import { randomInt } from "node:crypto";
import type { Client } from "pg";
import { callAction } from "../../helpers/broker";
import { httpRequest, PartnerApi } from "../../helpers/http";
import { startTestNode, type TestNode } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { createPartner, type TestPartner as Partner } from "../../helpers/webhooks";
import type { ServiceName } from "../../../services";

/**
 * The orders service against the server PostgreSQL with the real partners,
 * riders, pricing and gateway services (partner requests over HTTP):
 * create-order, idempotency, quotes, cancel, feedback, status, events, and the
 * internal transitions dispatch drives, with their event rows.
 */

const SERVICES: ServiceName[] = ["partners", "riders", "pricing", "orders", "gateway"];

interface Answer<T = any> {
	status: number;
	body: T;
}

let bed: Testbed;
let node: TestNode;
let pg: Client;
let partnerA: Partner;
let partnerB: Partner;

/** A partner request over HTTP through the gateway of `on` (this file's node unless told). */
async function post<T = any>(path: string, body: unknown, partner: Partner, idempotencyKey?: string, on: TestNode = node): Promise<Answer<T>> {
	const res = await new PartnerApi(on.baseUrl!, partner.apiKey).post<T>(
		path,
		body,
		idempotencyKey !== undefined ? { "Idempotency-Key": idempotencyKey } : {},
	);
	return { status: res.status, body: res.body };
}

/** An internal call (dispatch's side); errors come back as { status, code }. */
const internal = <T = any>(action: string, params: unknown) => callAction<T>(node.broker, action, params);

const PICKUP = { lat: 12.9716, lng: 77.5946, address: "MG Road" };
const DROP = { lat: 12.9352, lng: 77.6245 };

function orderBody(overrides: Record<string, unknown> = {}) {
	return {
		user: { name: "Asha Rao", phone: randomPhone("+9198"), email: "asha@example.com" },
		serviceType: "cab",
		pickup: PICKUP,
		drop: DROP,
		webhookURL: "https://partner.example.com/hooks/rides",
		metadata: { partnerRef: `booking-${randomInt(0, 1e9)}` },
		...overrides,
	};
}

async function createOrder(partner: Partner = partnerA, overrides: Record<string, unknown> = {}): Promise<any> {
	const res = await post("/ride/create-order", orderBody(overrides), partner);
	expect(res.status).toBe(201);
	return res.body;
}

const DRIVER = { id: "drv_test1", name: "Ravi Kumar", phone: "+919800000001", vehicleNumber: "KA01AB1234" };

/** Drives an order forward along the happy path until it reaches `target`. */
async function driveTo(order: { orderId: string; otp: string }, target: "accepted" | "arrived" | "started" | "dropped"): Promise<void> {
	const path = ["accepted", "arrived", "started", "dropped"] as const;
	for (const to of path) {
		const params: Record<string, unknown> = { orderId: order.orderId, to };
		if (to === "accepted") Object.assign(params, { driver: { ...DRIVER, location: { lat: 12.975, lng: 77.59, heading: 45 } }, eta: 240 });
		if (to === "arrived") Object.assign(params, { location: { lat: 12.9716, lng: 77.5946, heading: 0 }, eta: 0 });
		if (to === "started") Object.assign(params, { otp: order.otp, eta: 960 });
		if (to === "dropped") Object.assign(params, { location: DROP });
		const res = await internal("orders.transition", params);
		expect(res).toMatchObject({ status: 200, body: { status: to } });
		if (to === target) return;
	}
}

/** Every row the orders service owns (and the riders it touches), to prove an error changed nothing. */
/** Every table's rows; `withoutOtpTries` leaves out the orders' OTP try counters (a wrong OTP counts a try and changes nothing else). */
async function snapshot({ withoutOtpTries = false } = {}): Promise<string> {
	const parts: unknown[] = [];
	for (const [table, order] of [
		["orders", "id"],
		["ride_events", "id"],
		["feedback", "order_id"],
		["idempotency_keys", "partner_id, key"],
		["riders", "id"],
	]) {
		const rows = (await pg.query(`SELECT * FROM ${table} ORDER BY ${order}`)).rows;
		if (withoutOtpTries && table === "orders") for (const r of rows) delete r.otp_tries;
		parts.push(rows);
	}
	return JSON.stringify(parts);
}

async function expectError(res: Answer, status: number, code: string): Promise<void> {
	expect({ status: res.status, code: res.body?.code }).toEqual({ status, code });
	expect(typeof res.body.message).toBe("string");
	expect(JSON.stringify(res.body)).not.toMatch(/SELECT|INSERT|UPDATE|at .*\.ts:\d+/);
}

async function eventsOf(orderId: string) {
	return (
		await pg.query("SELECT id, sequence, kind, status, webhook_url, payload, partner_id FROM ride_events WHERE order_id = $1 ORDER BY sequence", [orderId])
	).rows;
}

async function orderRow(orderId: string) {
	return (await pg.query("SELECT * FROM orders WHERE id = $1", [orderId])).rows[0];
}

beforeAll(async () => {
	bed = await startTestbed("orders", { services: SERVICES });
	({ node, pg } = bed);
	partnerA = await createPartner(node.broker, "Partner A");
	partnerB = await createPartner(node.broker, "Partner B");
});

afterAll(async () => {
	await bed?.stop();
});

describe("create-order", () => {
	it("creates a searching order: 201 with the contract's Order, the fare priced, metadata echoed", async () => {
		const body = orderBody();
		const res = await post("/ride/create-order", body, partnerA);
		expect(res.status).toBe(201);
		const order = res.body;
		expect(Object.keys(order).sort()).toEqual(
			[
				"orderId",
				"otp",
				"status",
				"serviceType",
				"pickup",
				"drop",
				"fare",
				"distance",
				"duration",
				"driver",
				"metadata",
				"createdAt",
				"updatedAt",
			].sort(),
		);
		expect(order.orderId).toMatch(/^ord_[0-9a-z]{20}$/);
		expect(order.otp).toMatch(/^[0-9]{4}$/);
		expect(order).toMatchObject({ status: "searching", serviceType: "cab", pickup: PICKUP, drop: DROP, driver: null, metadata: body.metadata });
		expect(order.fare.currency).toBe("INR");
		expect(order.fare.totalAmount).toBeGreaterThan(0);
		expect(Math.round(order.fare.totalAmount * 100)).toBe(order.fare.totalAmount * 100);
		expect(Number.isInteger(order.distance) && order.distance > 0).toBe(true);
		expect(Number.isInteger(order.duration) && order.duration > 0).toBe(true);
		expect(new Date(order.createdAt).toISOString()).toBe(order.createdAt);

		// The same trip priced now (no surge without dispatch) is the order's fare.
		const estimate = await post("/ride/fare-estimate", { pickup: PICKUP, drop: DROP, serviceType: "cab" }, partnerA);
		expect(estimate.status).toBe(200);
		expect(order.fare.totalAmount).toBe(estimate.body.quotes[0].totalAmount);
		expect(order.distance).toBe(estimate.body.distance);

		const row = await orderRow(order.orderId);
		expect(row).toMatchObject({
			partner_id: partnerA.partnerId,
			status: "searching",
			version: 0,
			otp: order.otp,
			webhook_url: body.webhookURL,
			fare_paise: Math.round(order.fare.totalAmount * 100),
		});
		const rider = (await pg.query("SELECT * FROM riders WHERE id = $1", [row.rider_id])).rows[0];
		expect(rider).toMatchObject({ partner_id: partnerA.partnerId, phone: body.user.phone, name: "Asha Rao" });
		// No event for searching: the contract has no such webhook.
		expect(await eventsOf(order.orderId)).toEqual([]);
	});

	it("answers the rider's existing active ride with 200 USER_HAVE_ACTIVE_RIDE, and makes no second ride", async () => {
		const body = orderBody();
		const first = await post("/ride/create-order", body, partnerA);
		expect(first.status).toBe(201);
		const again = await post(
			"/ride/create-order",
			{ ...body, user: { ...body.user, name: "Asha R." }, serviceType: "scooty", metadata: { other: true } },
			partnerA,
		);
		expect(again.status).toBe(200);
		expect(again.body).toEqual({ code: "USER_HAVE_ACTIVE_RIDE", ...first.body });
		const rows = (await pg.query("SELECT o.id FROM orders o JOIN riders r ON r.id = o.rider_id WHERE r.phone = $1", [body.user.phone])).rows;
		expect(rows).toEqual([{ id: first.body.orderId }]);
		// The rider is still updated on every call.
		expect((await pg.query("SELECT name FROM riders WHERE phone = $1 AND partner_id = $2", [body.user.phone, partnerA.partnerId])).rows[0].name).toBe(
			"Asha R.",
		);

		// The same phone at another partner is another rider.
		const other = await post("/ride/create-order", body, partnerB);
		expect(other.status).toBe(201);
		expect(other.body.orderId).not.toBe(first.body.orderId);

		// Once the ride has ended, the rider can book again.
		expect((await post("/ride/cancel", { orderId: first.body.orderId }, partnerA)).status).toBe(200);
		const next = await post("/ride/create-order", body, partnerA);
		expect(next.status).toBe(201);
		expect(next.body.orderId).not.toBe(first.body.orderId);
	});

	it("keeps metadata up to 4 KB serialised and refuses more, changing nothing", async () => {
		const fits = { k: "x".repeat(4096 - 8) };
		const ok = await post("/ride/create-order", orderBody({ metadata: fits }), partnerA);
		expect(ok.status).toBe(201);
		expect(ok.body.metadata).toEqual(fits);

		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody({ metadata: { k: "x".repeat(4096 - 7) } }), partnerA);
		await expectError(res, 400, "VALIDATION_ERROR");
		expect(res.body.details?.[0]?.field).toBe("metadata");
		expect(await snapshot()).toBe(before);
	});

	it("works without optional fields: no email, no address, no metadata", async () => {
		const body = orderBody({ user: { name: "B", phone: randomPhone() }, pickup: { lat: 12.97, lng: 77.59 } });
		delete (body as Record<string, unknown>).metadata;
		const res = await post("/ride/create-order", body, partnerA);
		expect(res.status).toBe(201);
		expect(res.body.metadata).toBeNull();
		expect(res.body.pickup).toEqual({ lat: 12.97, lng: 77.59 });
	});

	const invalid: Array<[string, Record<string, unknown>, string]> = [
		["missing user.name", { user: { phone: "+919812345678" } }, "user.name"],
		["phone not E.164", { user: { name: "A", phone: "98123 45678" } }, "user.phone"],
		["bad email", { user: { name: "A", phone: "+919812345678", email: "not-an-email" } }, "user.email"],
		["unknown serviceType", { serviceType: "bike" }, "serviceType"],
		["pickup.lat out of range", { pickup: { lat: 91, lng: 77.59 } }, "pickup.lat"],
		["drop.lng not a number", { drop: { lat: 12.9, lng: "77.6" } }, "drop.lng"],
		["address too long", { pickup: { ...PICKUP, address: "a".repeat(501) } }, "pickup.address"],
		["metadata not an object", { metadata: ["a"] }, "metadata"],
		["missing webhookURL", { webhookURL: undefined }, "webhookURL"],
		["pickup equal to drop", { pickup: PICKUP, drop: { lat: PICKUP.lat, lng: PICKUP.lng } }, ""],
	];
	it.each(invalid)("refuses %s with 400 VALIDATION_ERROR and changes nothing", async (_name, overrides, field) => {
		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody(overrides), partnerA);
		await expectError(res, 400, "VALIDATION_ERROR");
		if (field) expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
		expect(await snapshot()).toBe(before);
	});

	it.each([
		["not a URL", "partner.example.com/hooks"],
		["not http(s)", "ftp://partner.example.com/hooks"],
		["credentials in it", "https://user:pw@partner.example.com/"],
	])("refuses a webhookURL that is %s with 400 INVALID_WEBHOOK_URL and changes nothing", async (_name, webhookURL) => {
		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody({ webhookURL }), partnerA);
		await expectError(res, 400, "INVALID_WEBHOOK_URL");
		expect(await snapshot()).toBe(before);
	});
});

describe("the rider's OTP", () => {
	it("is never readable through orders.riderOtp outside simulated fleet mode (this node runs live)", async () => {
		const order = await createOrder();
		const res = await internal("orders.riderOtp", { orderId: order.orderId });
		expect(res.status).toBe(403);
		expect(res.code).toBe("FORBIDDEN");
	});
});

describe("create-order with a quote", () => {
	async function quote(partner: Partner, serviceType = "cab", pickup: object = PICKUP, drop: object = DROP) {
		const res = await post("/ride/fare-estimate", { pickup: { lat: (pickup as any).lat, lng: (pickup as any).lng }, drop, serviceType }, partner);
		expect(res.status).toBe(200);
		return res.body.quotes[0];
	}

	it("honours a valid quote: the quoted fare, distance and duration", async () => {
		const q = await quote(partnerA);
		const res = await post("/ride/create-order", orderBody({ quoteId: q.quoteId }), partnerA);
		expect(res.status).toBe(201);
		expect(res.body.fare).toEqual({ totalAmount: q.totalAmount, currency: q.currency });
		const row = await orderRow(res.body.orderId);
		expect(row.quote_id).toBe(q.quoteId);
		expect(row.fare_breakdown).toEqual(q.fareBreakdown);
	});

	it("accepts endpoints within 200 m of the quoted ones", async () => {
		const q = await quote(partnerA);
		const res = await post("/ride/create-order", orderBody({ quoteId: q.quoteId, pickup: { lat: PICKUP.lat + 0.0005, lng: PICKUP.lng } }), partnerA);
		expect(res.status).toBe(201);
		expect(res.body.fare.totalAmount).toBe(q.totalAmount);
	});

	it.each([
		["another partner's quote", "foreign"],
		["another service type", "type"],
		["a pickup more than 200 m away", "pickup"],
		["a drop more than 200 m away", "drop"],
		["an unknown quote", "garbage"],
	])("refuses %s with 422 QUOTE_INVALID and changes nothing", async (_name, kind) => {
		const q = await quote(kind === "foreign" ? partnerB : partnerA);
		const overrides: Record<string, unknown> = { quoteId: q.quoteId };
		if (kind === "type") overrides.serviceType = "scooty";
		if (kind === "pickup") overrides.pickup = { lat: PICKUP.lat + 0.01, lng: PICKUP.lng };
		if (kind === "drop") overrides.drop = { lat: DROP.lat, lng: DROP.lng + 0.01 };
		if (kind === "garbage") overrides.quoteId = "qt_garbage";
		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody(overrides), partnerA);
		await expectError(res, 422, "QUOTE_INVALID");
		expect(await snapshot()).toBe(before);
	});
});

describe("gateway-level errors on create-order (HTTP)", () => {
	const url = () => `${node.baseUrl}/ride/create-order`;

	it("answers 401 UNAUTHORIZED without or with an unknown API key, changing nothing", async () => {
		const before = await snapshot();
		for (const headers of [{}, { Authorization: "Bearer rk_unknown_key_000000000000000000000" }, { Authorization: "Basic abc" }] as Array<
			Record<string, string>
		>) {
			await expectError(await httpRequest(url(), { headers, body: orderBody() }), 401, "UNAUTHORIZED");
		}
		expect(await snapshot()).toBe(before);
	});

	it("answers 400 INVALID_JSON for a body that is not JSON, changing nothing", async () => {
		const before = await snapshot();
		const res = await httpRequest(url(), {
			headers: { Authorization: `Bearer ${partnerA.apiKey}`, "Content-Type": "application/json" },
			body: '{"user": {"name": "A",',
		});
		await expectError(res, 400, "INVALID_JSON");
		expect(await snapshot()).toBe(before);
	});

	it("answers 413 PAYLOAD_TOO_LARGE for a body over 64 KB, changing nothing", async () => {
		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody({ metadata: { blob: "x".repeat(70 * 1024) } }), partnerA);
		await expectError(res, 413, "PAYLOAD_TOO_LARGE");
		expect(await snapshot()).toBe(before);
	});
});

describe("Idempotency-Key", () => {
	it("replays the first response (same status, same body) for the same key and body, making one order", async () => {
		const body = orderBody();
		const key = `key-${randomInt(0, 1e9)}`;
		const first = await post("/ride/create-order", body, partnerA, key);
		expect(first.status).toBe(201);
		const again = await post("/ride/create-order", JSON.parse(JSON.stringify(body)), partnerA, key);
		expect(again).toEqual(first);
		const count = await pg.query("SELECT count(*)::int AS n FROM orders o JOIN riders r ON r.id = o.rider_id WHERE r.phone = $1", [body.user.phone]);
		expect(count.rows[0].n).toBe(1);
		// A different key for the same body is a new call: the rider's active ride answers.
		const other = await post("/ride/create-order", body, partnerA, `${key}-2`);
		expect(other.status).toBe(200);
		expect(other.body).toMatchObject({ code: "USER_HAVE_ACTIVE_RIDE", orderId: first.body.orderId });
		// …and that 200 is itself replayed as a 200.
		expect(await post("/ride/create-order", body, partnerA, `${key}-2`)).toEqual(other);
	});

	it("refuses the same key with another body: 422 IDEMPOTENCY_KEY_REUSED, nothing changed", async () => {
		const key = `key-${randomInt(0, 1e9)}`;
		expect((await post("/ride/create-order", orderBody(), partnerA, key)).status).toBe(201);
		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody(), partnerA, key);
		await expectError(res, 422, "IDEMPOTENCY_KEY_REUSED");
		expect(await snapshot()).toBe(before);
	});

	it("scopes keys to the partner", async () => {
		const key = `key-${randomInt(0, 1e9)}`;
		const a = await post("/ride/create-order", orderBody(), partnerA, key);
		const b = await post("/ride/create-order", orderBody(), partnerB, key);
		expect([a.status, b.status]).toEqual([201, 201]);
		expect(a.body.orderId).not.toBe(b.body.orderId);
	});

	it("answers 409 IDEMPOTENCY_KEY_IN_USE while the first call still runs, changing nothing", async () => {
		const body = orderBody();
		const key = `key-${randomInt(0, 1e9)}`;
		expect((await post("/ride/create-order", body, partnerA, key)).status).toBe(201);
		// Put the claim back in its running state, as it is while the first call works.
		await pg.query("UPDATE idempotency_keys SET state = 'running', response_status = NULL, response_body = NULL WHERE partner_id = $1 AND key = $2", [
			partnerA.partnerId,
			key,
		]);
		const before = await snapshot();
		const res = await post("/ride/create-order", body, partnerA, key);
		await expectError(res, 409, "IDEMPOTENCY_KEY_IN_USE");
		expect(await snapshot()).toBe(before);
	});

	it("frees a running claim left by a crashed call after the bounded time", async () => {
		const body = orderBody();
		const key = `key-${randomInt(0, 1e9)}`;
		const first = await post("/ride/create-order", body, partnerA, key);
		expect(first.status).toBe(201);
		expect((await post("/ride/cancel", { orderId: first.body.orderId }, partnerA)).status).toBe(200);
		// A claim that has been "running" for 5 minutes belongs to a dead process.
		await pg.query(
			"UPDATE idempotency_keys SET state = 'running', response_status = NULL, response_body = NULL, created_at = now() - interval '5 minutes' WHERE partner_id = $1 AND key = $2",
			[partnerA.partnerId, key],
		);
		const retry = await post("/ride/create-order", body, partnerA, key);
		expect(retry.status).toBe(201);
		expect(retry.body.orderId).not.toBe(first.body.orderId);
		expect(await post("/ride/create-order", body, partnerA, key)).toEqual(retry);
	});

	it("forgets a response after 24 hours", async () => {
		const key = `key-${randomInt(0, 1e9)}`;
		const first = await post("/ride/create-order", orderBody(), partnerA, key);
		expect(first.status).toBe(201);
		await pg.query("UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE partner_id = $1 AND key = $2", [partnerA.partnerId, key]);
		const res = await post("/ride/create-order", orderBody(), partnerA, key);
		expect(res.status).toBe(201);
		expect(res.body.orderId).not.toBe(first.body.orderId);
	});

	it("releases the key when the first call failed, so a corrected retry goes through", async () => {
		const key = `key-${randomInt(0, 1e9)}`;
		const body = orderBody();
		const before = await snapshot();
		const failed = await post("/ride/create-order", { ...body, quoteId: "qt_nope" }, partnerA, key);
		await expectError(failed, 422, "QUOTE_INVALID");
		expect(await snapshot()).toBe(before);
		const ok = await post("/ride/create-order", body, partnerA, key);
		expect(ok.status).toBe(201);
	});

	it("refuses a key longer than 255 characters with 400 VALIDATION_ERROR", async () => {
		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody(), partnerA, "k".repeat(256));
		await expectError(res, 400, "VALIDATION_ERROR");
		expect(await snapshot()).toBe(before);
		expect((await post("/ride/create-order", orderBody(), partnerA, "k".repeat(255))).status).toBe(201);
	});
});

describe("cancel", () => {
	it.each(["searching", "accepted", "arrived", "started"] as const)(
		"cancels a %s ride once: one customer_cancelled event, retries answer the same",
		async (state) => {
			const order = await createOrder();
			if (state !== "searching") await driveTo(order, state);
			const versionBefore = (await orderRow(order.orderId)).version;

			const res = await post("/ride/cancel", { orderId: order.orderId, reason: "changed plans" }, partnerA);
			// Today's answer plus the fee the policy charged (API.md, "Cancellation policy").
			const rule = { searching: "searching", accepted: "grace_period", arrived: "driver_arrived", started: "ride_started" }[state];
			expect(res).toEqual({
				status: 200,
				body: { code: "RIDE_CANCELLED", orderId: order.orderId, status: "customer_cancelled", cancellationFee: expect.objectContaining({ rule }) },
			});

			const row = await orderRow(order.orderId);
			expect(row).toMatchObject({ status: "customer_cancelled", cancel_reason: "changed plans", version: versionBefore + 1 });
			const events = await eventsOf(order.orderId);
			const cancelled = events.filter((e) => e.status === "customer_cancelled");
			expect(cancelled).toHaveLength(1);
			expect(cancelled[0]).toMatchObject({ sequence: versionBefore + 1, kind: "status", partner_id: partnerA.partnerId });
			expect(cancelled[0].payload).toMatchObject({
				eventId: cancelled[0].id,
				orderId: order.orderId,
				status: "customer_cancelled",
				sequence: versionBefore + 1,
				metadata: order.metadata,
			});
			if (state === "searching") expect(cancelled[0].payload.driver).toBeUndefined();
			else expect(cancelled[0].payload.driver).toMatchObject({ id: DRIVER.id });

			// Safe retries: the same answer, no second event, nothing changed.
			const before = await snapshot();
			expect(await post("/ride/cancel", { orderId: order.orderId }, partnerA)).toEqual(res);
			expect(await snapshot()).toBe(before);
		},
	);

	it.each(["dropped", "no_driver_found"] as const)("refuses a %s ride with 409 RIDE_NOT_ACTIVE, changing nothing", async (state) => {
		const order = await createOrder();
		if (state === "dropped") await driveTo(order, "dropped");
		else expect((await internal("orders.transition", { orderId: order.orderId, to: "no_driver_found" })).status).toBe(200);
		const before = await snapshot();
		await expectError(await post("/ride/cancel", { orderId: order.orderId }, partnerA), 409, "RIDE_NOT_ACTIVE");
		expect(await snapshot()).toBe(before);
	});

	it("answers 404 ORDER_NOT_FOUND for an unknown or another partner's order, changing nothing", async () => {
		const order = await createOrder(partnerB);
		const before = await snapshot();
		await expectError(await post("/ride/cancel", { orderId: "ord_doesnotexist000000" }, partnerA), 404, "ORDER_NOT_FOUND");
		await expectError(await post("/ride/cancel", { orderId: order.orderId }, partnerA), 404, "ORDER_NOT_FOUND");
		expect(await snapshot()).toBe(before);
		expect((await orderRow(order.orderId)).status).toBe("searching");
	});

	it("refuses a reason over 200 characters or a missing orderId with 400 VALIDATION_ERROR", async () => {
		const order = await createOrder();
		const before = await snapshot();
		await expectError(await post("/ride/cancel", { orderId: order.orderId, reason: "r".repeat(201) }, partnerA), 400, "VALIDATION_ERROR");
		await expectError(await post("/ride/cancel", {}, partnerA), 400, "VALIDATION_ERROR");
		expect(await snapshot()).toBe(before);
	});
});

describe("feedback", () => {
	it("takes feedback once for a dropped ride", async () => {
		const order = await createOrder();
		await driveTo(order, "dropped");
		const res = await post("/ride/feedback", { orderId: order.orderId, rating: 5, comment: "Great ride", tags: ["clean", "polite"] }, partnerA);
		expect(res).toEqual({ status: 200, body: { code: "FEEDBACK_SUBMITTED", orderId: order.orderId } });
		const row = (await pg.query("SELECT * FROM feedback WHERE order_id = $1", [order.orderId])).rows[0];
		expect(row).toMatchObject({ partner_id: partnerA.partnerId, rating: 5, comment: "Great ride", tags: ["clean", "polite"] });

		const before = await snapshot();
		await expectError(await post("/ride/feedback", { orderId: order.orderId, rating: 1 }, partnerA), 409, "FEEDBACK_ALREADY_SUBMITTED");
		expect(await snapshot()).toBe(before);
	});

	it.each(["searching", "accepted", "started", "customer_cancelled"] as const)(
		"refuses feedback for a %s ride with 409 RIDE_NOT_COMPLETED, changing nothing",
		async (state) => {
			const order = await createOrder();
			if (state === "customer_cancelled") await post("/ride/cancel", { orderId: order.orderId }, partnerA);
			else if (state !== "searching") await driveTo(order, state);
			const before = await snapshot();
			await expectError(await post("/ride/feedback", { orderId: order.orderId, rating: 4 }, partnerA), 409, "RIDE_NOT_COMPLETED");
			expect(await snapshot()).toBe(before);
		},
	);

	it("answers 404 for an unknown or another partner's ride, and 400 for a bad rating, changing nothing", async () => {
		const order = await createOrder(partnerB);
		await driveTo(order, "dropped");
		const before = await snapshot();
		await expectError(await post("/ride/feedback", { orderId: order.orderId, rating: 4 }, partnerA), 404, "ORDER_NOT_FOUND");
		await expectError(await post("/ride/feedback", { orderId: "ord_unknown", rating: 4 }, partnerA), 404, "ORDER_NOT_FOUND");
		for (const rating of [0, 6, 3.5, "5"]) {
			await expectError(await post("/ride/feedback", { orderId: order.orderId, rating }, partnerB), 400, "VALIDATION_ERROR");
		}
		await expectError(await post("/ride/feedback", { orderId: order.orderId, rating: 4, comment: "c".repeat(1001) }, partnerB), 400, "VALIDATION_ERROR");
		await expectError(await post("/ride/feedback", { orderId: order.orderId, rating: 4, tags: "clean" }, partnerB), 400, "VALIDATION_ERROR");
		expect(await snapshot()).toBe(before);
	});
});

describe("status", () => {
	it("answers the current Order, with the driver and its last known location once assigned", async () => {
		const order = await createOrder();
		const searching = await post("/ride/status", { orderId: order.orderId }, partnerA);
		expect(searching).toEqual({ status: 200, body: order });

		await driveTo(order, "accepted");
		const moved = await internal("orders.recordLocation", { orderId: order.orderId, location: { lat: 12.973, lng: 77.593, heading: 180 }, eta: 120 });
		expect(moved.status).toBe(200);
		const accepted = await post("/ride/status", { orderId: order.orderId }, partnerA);
		expect(accepted.status).toBe(200);
		expect(accepted.body).toMatchObject({ orderId: order.orderId, otp: order.otp, status: "accepted", metadata: order.metadata });
		expect(accepted.body.driver).toEqual({ ...DRIVER, location: { lat: 12.973, lng: 77.593, heading: 180 } });
		expect(Date.parse(accepted.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(order.updatedAt));
	});

	it("answers 404 ORDER_NOT_FOUND for an unknown or another partner's order", async () => {
		const order = await createOrder(partnerB);
		await expectError(await post("/ride/status", { orderId: order.orderId }, partnerA), 404, "ORDER_NOT_FOUND");
		await expectError(await post("/ride/status", { orderId: "ord_x" }, partnerA), 404, "ORDER_NOT_FOUND");
		await expectError(await post("/ride/status", {}, partnerA), 400, "VALIDATION_ERROR");
	});
});

describe("events", () => {
	it("answers an empty list for a ride without events", async () => {
		const order = await createOrder();
		expect(await post("/ride/events", { orderId: order.orderId }, partnerA)).toEqual({ status: 200, body: { events: [], nextCursor: null } });
	});

	it("answers 503 SERVICE_UNAVAILABLE (retryable) while notifications cannot be reached", async () => {
		const order = await createOrder();
		await driveTo(order, "accepted");
		const res = await post("/ride/events", { orderId: order.orderId }, partnerA);
		await expectError(res, 503, "SERVICE_UNAVAILABLE");
		expect(res.body.retryable).toBe(true);
	});

	it("answers 404 ORDER_NOT_FOUND for another partner's order", async () => {
		const order = await createOrder(partnerB);
		await expectError(await post("/ride/events", { orderId: order.orderId }, partnerA), 404, "ORDER_NOT_FOUND");
	});
});

describe("transitions (dispatch's internal actions)", () => {
	it("walks the happy path with one event per status, sequences 1..4 from the order's version", async () => {
		const order = await createOrder();
		await driveTo(order, "dropped");
		const events = await eventsOf(order.orderId);
		expect(events.map((e) => [e.sequence, e.kind, e.status])).toEqual([
			[1, "status", "accepted"],
			[2, "status", "arrived"],
			[3, "status", "started"],
			[4, "status", "dropped"],
		]);
		for (const e of events) {
			expect(e.id).toMatch(/^evt_/);
			expect(e.webhook_url).toBe("https://partner.example.com/hooks/rides");
			expect(e.payload).toMatchObject({ eventId: e.id, orderId: order.orderId, status: e.status, sequence: e.sequence, metadata: order.metadata });
			expect(e.payload.driver).toMatchObject(DRIVER);
			expect(new Date(e.payload.occurredAt).toISOString()).toBe(e.payload.occurredAt);
		}
		expect(events[0].payload).toMatchObject({ eta: 240, location: { lat: 12.975, lng: 77.59, heading: 45 } });
		expect(events[1].payload).toMatchObject({ eta: 0, location: { lat: 12.9716, lng: 77.5946, heading: 0 } });
		expect(events[2].payload.eta).toBe(960);
		expect(events[3].payload.eta).toBeUndefined();
		expect(events[3].payload.location).toEqual(DROP);
		expect(await orderRow(order.orderId)).toMatchObject({ status: "dropped", version: 4 });
	});

	it("goes back to searching when the driver drops out: no event, no version bump, the next accepted carries the new driver", async () => {
		const order = await createOrder();
		await driveTo(order, "arrived");
		const back = await internal("orders.transition", { orderId: order.orderId, to: "searching", from: "arrived", driver: { id: DRIVER.id } });
		expect(back.status).toBe(200);
		expect(back.body).toMatchObject({ status: "searching", driver: null, location: null, eta: null, version: 2 });
		expect(await eventsOf(order.orderId)).toHaveLength(2);

		const newDriver = { id: "drv_test2", name: "Sunil", phone: "+919800000002", vehicleNumber: "KA02CD5678" };
		const again = await internal("orders.transition", {
			orderId: order.orderId,
			to: "accepted",
			driver: newDriver,
			location: { lat: 12.98, lng: 77.6 },
			eta: 300,
		});
		expect(again.body).toMatchObject({ status: "accepted", version: 3, driver: { ...newDriver, location: { lat: 12.98, lng: 77.6 } } });
		const events = await eventsOf(order.orderId);
		expect(events.map((e) => [e.sequence, e.status])).toEqual([
			[1, "accepted"],
			[2, "arrived"],
			[3, "accepted"],
		]);
		expect(events[2].payload.driver).toEqual({ ...newDriver, location: { lat: 12.98, lng: 77.6 } });
	});

	it("lets dispatch (the platform) send an accepted ride back to searching when its driver vanishes", async () => {
		const order = await createOrder();
		await driveTo(order, "accepted");
		const back = await internal("orders.transition", { orderId: order.orderId, to: "searching", actor: "system" });
		expect(back.body).toMatchObject({ status: "searching", driver: null, version: 1 });
		expect((await eventsOf(order.orderId)).map((e) => e.status)).toEqual(["accepted"]);
		// A searching ride can still end without a driver.
		expect((await internal("orders.transition", { orderId: order.orderId, to: "no_driver_found" })).body).toMatchObject({
			status: "no_driver_found",
			version: 2,
		});
		expect((await eventsOf(order.orderId)).map((e) => [e.sequence, e.status])).toEqual([
			[1, "accepted"],
			[2, "no_driver_found"],
		]);
	});

	it("takes a drop-out only from the driver it names", async () => {
		const order = await createOrder();
		await driveTo(order, "accepted");
		const before = await snapshot();
		expect((await internal("orders.transition", { orderId: order.orderId, to: "searching", driver: { id: "drv_someoneelse" } })).code).toBe("CONFLICT");
		expect(await snapshot()).toBe(before);
	});

	it("records no_driver_found from searching (the platform's move)", async () => {
		const order = await createOrder();
		const res = await internal("orders.transition", { orderId: order.orderId, to: "no_driver_found", from: "searching" });
		expect(res.body).toMatchObject({ status: "no_driver_found", version: 1 });
		expect(res.body).not.toHaveProperty("otp");
		expect((await eventsOf(order.orderId)).map((e) => [e.sequence, e.status])).toEqual([[1, "no_driver_found"]]);
	});

	it("starts a ride only with its OTP: 422 INVALID_OTP otherwise, changing nothing but the try count", async () => {
		const order = await createOrder();
		await driveTo(order, "arrived");
		const wrong = order.otp === "0000" ? "0001" : "0000";
		const before = await snapshot({ withoutOtpTries: true });
		expect(await internal("orders.transition", { orderId: order.orderId, to: "started", otp: wrong })).toEqual({ status: 422, code: "INVALID_OTP" });
		expect(await internal("orders.transition", { orderId: order.orderId, to: "started" })).toEqual({ status: 422, code: "INVALID_OTP" });
		expect(await snapshot({ withoutOtpTries: true })).toBe(before);
		expect((await pg.query("SELECT otp_tries FROM orders WHERE id = $1", [order.orderId])).rows[0].otp_tries).toBe(2);
		expect((await internal("orders.transition", { orderId: order.orderId, to: "started", otp: order.otp })).body.status).toBe("started");
	});

	it("gives the next driver fresh OTP tries when the ride goes back to searching (a driver who burned them cannot lock the next one)", async () => {
		const order = await createOrder();
		await driveTo(order, "arrived");
		const wrong = order.otp === "0000" ? "0001" : "0000";
		for (let i = 0; i < 5; i++) {
			expect(await internal("orders.transition", { orderId: order.orderId, to: "started", otp: wrong })).toEqual({ status: 422, code: "INVALID_OTP" });
		}
		expect((await internal("orders.transition", { orderId: order.orderId, to: "started", otp: order.otp })).code).toBe("OTP_LOCKED");

		// That driver drops out; another one takes the ride to the pickup.
		expect((await internal("orders.transition", { orderId: order.orderId, to: "searching", driver: { id: DRIVER.id } })).status).toBe(200);
		expect((await pg.query("SELECT otp_tries FROM orders WHERE id = $1", [order.orderId])).rows[0].otp_tries).toBe(0);
		const next = { id: "drv_test_next", name: "Sunil", phone: "+919800000002", vehicleNumber: "KA02CD5678" };
		expect((await internal("orders.transition", { orderId: order.orderId, to: "accepted", driver: next, eta: 300 })).status).toBe(200);
		expect((await internal("orders.transition", { orderId: order.orderId, to: "arrived", eta: 0 })).status).toBe(200);
		expect((await internal("orders.transition", { orderId: order.orderId, to: "started", otp: order.otp })).body.status).toBe("started");
	});

	it("refuses illegal moves with 409 INVALID_TRANSITION and stale ones with 409 CONFLICT, changing nothing", async () => {
		const order = await createOrder();
		const before = await snapshot();
		for (const to of ["arrived", "started", "dropped", "customer_cancelled", "searching"]) {
			expect(await internal("orders.transition", { orderId: order.orderId, to, otp: order.otp })).toEqual({ status: 409, code: "INVALID_TRANSITION" });
		}
		// Drivers do not decide no_driver_found.
		expect((await internal("orders.transition", { orderId: order.orderId, to: "no_driver_found", actor: "driver" })).code).toBe("INVALID_TRANSITION");
		// The caller believes the ride is accepted; it is searching.
		expect(await internal("orders.transition", { orderId: order.orderId, to: "arrived", from: "accepted" })).toEqual({ status: 409, code: "CONFLICT" });
		expect(await internal("orders.transition", { orderId: "ord_unknown", to: "accepted", driver: DRIVER })).toEqual({
			status: 404,
			code: "ORDER_NOT_FOUND",
		});
		// accepted needs the whole driver.
		expect((await internal("orders.transition", { orderId: order.orderId, to: "accepted", driver: { id: "drv_x" } })).status).toBe(400);
		expect((await internal("orders.transition", { orderId: order.orderId, to: "flying" })).status).toBe(400);
		expect(await snapshot()).toBe(before);

		await driveTo(order, "dropped");
		const done = await snapshot();
		for (const to of ["searching", "accepted", "arrived", "started", "no_driver_found"]) {
			expect((await internal("orders.transition", { orderId: order.orderId, to, driver: DRIVER, otp: order.otp })).code).toBe("INVALID_TRANSITION");
		}
		expect(await snapshot()).toBe(done);
	});

	it("records locations while the ride moves, each as the next sequence, and refuses them otherwise", async () => {
		const order = await createOrder();
		const before = await snapshot();
		expect(await internal("orders.recordLocation", { orderId: order.orderId, location: { lat: 1, lng: 2 }, eta: 10 })).toEqual({
			status: 409,
			code: "CONFLICT",
		});
		expect(await internal("orders.recordLocation", { orderId: "ord_unknown", location: { lat: 1, lng: 2 }, eta: 10 })).toEqual({
			status: 404,
			code: "ORDER_NOT_FOUND",
		});
		expect((await internal("orders.recordLocation", { orderId: order.orderId, location: { lat: 100, lng: 2 } })).status).toBe(400);
		expect(await snapshot()).toBe(before);

		await driveTo(order, "accepted");
		const loc = await internal("orders.recordLocation", { orderId: order.orderId, location: { lat: 12.974, lng: 77.592, heading: 200 }, eta: 180 });
		expect(loc.body).toMatchObject({ version: 2, eta: 180, location: { lat: 12.974, lng: 77.592, heading: 200 } });
		await internal("orders.transition", { orderId: order.orderId, to: "arrived", eta: 0 });
		const events = await eventsOf(order.orderId);
		expect(events.map((e) => [e.sequence, e.kind, e.status])).toEqual([
			[1, "status", "accepted"],
			[2, "location", "location_updated"],
			[3, "status", "arrived"],
		]);
		expect(events[1].payload).toMatchObject({
			status: "location_updated",
			sequence: 2,
			location: { lat: 12.974, lng: 77.592, heading: 200 },
			eta: 180,
			driver: { id: DRIVER.id },
		});
		// The arrived event carries the latest location.
		expect(events[2].payload.location).toEqual({ lat: 12.974, lng: 77.592, heading: 200 });
	});

	it("gets an order and lists active ones for dispatch (never with the OTP)", async () => {
		const searching = await createOrder();
		const accepted = await createOrder();
		await driveTo(accepted, "accepted");
		const got = await internal("orders.get", { orderId: searching.orderId });
		expect(got.body).toMatchObject({
			orderId: searching.orderId,
			partnerId: partnerA.partnerId,
			status: "searching",
			version: 0,
			webhookURL: "https://partner.example.com/hooks/rides",
		});
		expect(got.body).not.toHaveProperty("otp");

		const all = (await internal("orders.listActive", { limit: 10_000 })).body.orders as any[];
		const ids = all.map((o) => o.orderId);
		expect(ids).toEqual(expect.arrayContaining([searching.orderId, accepted.orderId]));
		expect(all.every((o) => ["searching", "accepted", "arrived", "started"].includes(o.status) && !("otp" in o))).toBe(true);
		const onlySearching = (await internal("orders.listActive", { status: "searching", limit: 1000 })).body.orders as any[];
		expect(onlySearching.every((o) => o.status === "searching")).toBe(true);
		expect(onlySearching.map((o) => o.orderId)).toContain(searching.orderId);
		expect(onlySearching.map((o) => o.orderId)).not.toContain(accepted.orderId);
		expect((await internal("orders.listActive", { status: "dropped" })).status).toBe(400);
		expect((await internal("orders.listActive", { after: "not-a-cursor" })).status).toBe(400);

		// Pages of one, oldest first by (createdAt, id), chained by nextCursor: the same rides, none twice, none missed.
		const paged: string[] = [];
		let after: string | undefined;
		do {
			const page = (await internal("orders.listActive", after ? { limit: 1, after } : { limit: 1 })).body as { orders: any[]; nextCursor: string | null };
			expect(page.orders.length).toBeLessThanOrEqual(1);
			paged.push(...page.orders.map((o) => o.orderId));
			after = page.nextCursor ?? undefined;
		} while (after);
		expect(paged).toEqual(ids);

		// The sweep's pages: the same rides in the same order and the same cursors, each with its state only.
		const states: Array<{ orderId: string; status: string; driverId: string | null }> = [];
		after = undefined;
		do {
			const page = (await internal("orders.listActiveStates", after ? { limit: 1, after } : { limit: 1 })).body as {
				rides: typeof states;
				nextCursor: string | null;
			};
			expect(page.rides.length).toBeLessThanOrEqual(1);
			states.push(...page.rides);
			after = page.nextCursor ?? undefined;
		} while (after);
		expect(states.map((r) => r.orderId)).toEqual(ids);
		expect(states.find((r) => r.orderId === searching.orderId)).toEqual({ orderId: searching.orderId, status: "searching", driverId: null });
		expect(states.find((r) => r.orderId === accepted.orderId)).toEqual({ orderId: accepted.orderId, status: "accepted", driverId: DRIVER.id });
		const searchingStates = (await internal("orders.listActiveStates", { status: "searching", limit: 1000 })).body.rides as typeof states;
		expect(searchingStates.map((r) => r.orderId)).toEqual(onlySearching.map((o) => o.orderId));
		expect((await internal("orders.listActiveStates", { after: "not-a-cursor" })).status).toBe(400);
	});

	it("leaves no event row and no change when the transaction rolls back", async () => {
		const order = await createOrder();
		// An event row already holding the next sequence makes the event insert fail inside the move's transaction.
		await pg.query(
			`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
			 VALUES ('evt_planted', $1, $2, 1, 'status', 'accepted', 'https://x.test/', '{}'::jsonb, now())`,
			[order.orderId, partnerA.partnerId],
		);
		const before = await snapshot();
		const res = await internal("orders.transition", { orderId: order.orderId, to: "accepted", driver: DRIVER });
		expect(res.status).toBeGreaterThanOrEqual(500);
		expect(await snapshot()).toBe(before);
		expect(await orderRow(order.orderId)).toMatchObject({ status: "searching", version: 0, driver: null });
		expect((await eventsOf(order.orderId)).map((e) => e.id)).toEqual(["evt_planted"]);

		const cancel = await post("/ride/cancel", { orderId: order.orderId }, partnerA);
		await expectError(cancel, 500, "INTERNAL_ERROR");
		expect(await snapshot()).toBe(before);
	});
});

// The suites below start extra nodes with settings of their own; they come last so that no node
// started after them (in this file) can see those settings.

describe("a production-mode node without pricing and riders", () => {
	let partial: TestNode;
	beforeAll(async () => {
		partial = await startTestNode({
			databaseUrl: bed.db.url,
			services: ["partners", "orders", "gateway"],
			// As in production (WEBHOOK_PORTS' production default, set here because tests do not run with NODE_ENV=production).
			env: { WEBHOOK_ALLOW_PRIVATE: "false", WEBHOOK_PORTS: "80,443,8443" },
		});
	});
	afterAll(async () => {
		await partial?.stop();
	});

	it.each([
		"http://127.0.0.1:8080/hooks",
		"http://10.1.2.3/hooks",
		"http://[::1]/hooks",
		"http://169.254.169.254/latest/meta-data",
		"http://localhost/hooks",
	])("refuses the private webhookURL %s with 400 INVALID_WEBHOOK_URL, changing nothing", async (webhookURL) => {
		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody({ webhookURL }), partnerA, `key-${randomInt(0, 1e9)}`, partial);
		await expectError(res, 400, "INVALID_WEBHOOK_URL");
		expect(await snapshot()).toBe(before);
	});

	it.each([
		"https://partner.example.com:5432/hooks",
		"http://partner.example.com:22/",
		"https://partner.example.com:8080/hooks",
		"http://[2606:4700::1111]:6379/",
	])("refuses the webhookURL %s (a port outside WEBHOOK_PORTS) with 400 INVALID_WEBHOOK_URL, changing nothing", async (webhookURL) => {
		const before = await snapshot();
		const res = await post("/ride/create-order", orderBody({ webhookURL }), partnerA, `key-${randomInt(0, 1e9)}`, partial);
		await expectError(res, 400, "INVALID_WEBHOOK_URL");
		expect(await snapshot()).toBe(before);
	});

	it("answers 503 SERVICE_UNAVAILABLE (retryable) and changes nothing", async () => {
		const before = await snapshot();
		const key = `key-${randomInt(0, 1e9)}`;
		const res = await post("/ride/create-order", orderBody(), partnerA, key, partial);
		await expectError(res, 503, "SERVICE_UNAVAILABLE");
		expect(res.body.retryable).toBe(true);
		// …and the key was released with it.
		expect(await snapshot()).toBe(before);
	});
});

describe("create-order with an expired quote", () => {
	// A second node on the same database whose pricing makes 1-second quotes.
	let shortQuotes: TestNode;
	const post2 = (path: string, body: unknown, partner: Partner): Promise<Answer> => post(path, body, partner, undefined, shortQuotes);

	beforeAll(async () => {
		// Also a tight rate limit: two requests at once, then one a minute.
		shortQuotes = await startTestNode({
			databaseUrl: bed.db.url,
			services: SERVICES,
			env: { QUOTE_TTL_SECONDS: "1", RATE_LIMIT_PER_MINUTE: "1", RATE_LIMIT_BURST: "2" },
		});
	});
	afterAll(async () => {
		await shortQuotes?.stop();
	});

	it("refuses it with 422 QUOTE_EXPIRED and changes nothing", async () => {
		const estimate = await post2("/ride/fare-estimate", { pickup: { lat: PICKUP.lat, lng: PICKUP.lng }, drop: DROP, serviceType: "cab" }, partnerA);
		expect(estimate.status).toBe(200);
		const { quoteId, expiresAt } = estimate.body.quotes[0];
		// Wait (bounded) until the quote's expiry has passed.
		await waitFor("the quote to expire", () => Date.now() > Date.parse(expiresAt) + 50, 10_000, 100);
		const before = await snapshot();
		const res = await post2("/ride/create-order", orderBody({ quoteId }), partnerA);
		await expectError(res, 422, "QUOTE_EXPIRED");
		expect(await snapshot()).toBe(before);

		// The partner has spent its burst: the next create-order is refused before anything happens.
		const limited = await post2("/ride/create-order", orderBody(), partnerA);
		await expectError(limited, 429, "RATE_LIMITED");
		expect(await snapshot()).toBe(before);
	});
});
