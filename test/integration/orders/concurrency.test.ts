import { randomInt } from "node:crypto";
import type { Client } from "pg";
import { callAction, type CallAnswer } from "../../helpers/broker";
import { PartnerApi } from "../../helpers/http";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { createPartner } from "../../helpers/webhooks";

/**
 * The orders service under concurrency, on the server PostgreSQL: the
 * database (partial unique index, conditional updates, primary keys) judges
 * every race, so exactly one caller wins and nothing is written twice.
 * Partner races go through the real gateway over HTTP, as partners send them.
 */

interface Answer<T = any> {
	status: number;
	body: T;
}

let bed: Testbed;
let pg: Client;
let api: PartnerApi;

/** A partner request over HTTP through the gateway. */
async function post<T = any>(path: string, body: unknown, idempotencyKey?: string): Promise<Answer<T>> {
	const res = await api.post<T>(path, body, idempotencyKey !== undefined ? { "Idempotency-Key": idempotencyKey } : {});
	return { status: res.status, body: res.body };
}

const internal = <T = any>(action: string, params: unknown) => callAction<T>(bed.node.broker, action, params);

function orderBody(phone = randomPhone()) {
	return {
		user: { name: "Asha Rao", phone },
		serviceType: "scooty",
		pickup: { lat: 12.9716, lng: 77.5946 },
		drop: { lat: 12.9352, lng: 77.6245 },
		webhookURL: "https://partner.example.com/hooks/rides",
		metadata: { partnerRef: "race" },
	};
}

async function createOrder(): Promise<{ orderId: string; otp: string }> {
	const res = await post("/ride/create-order", orderBody());
	expect(res.status).toBe(201);
	return res.body;
}

function driver(n: number) {
	return { id: `drv_race${n}`, name: `Driver ${n}`, phone: `+9198000000${String(n).padStart(2, "0")}`, vehicleNumber: `KA01AB${1000 + n}` };
}

async function eventsOf(orderId: string) {
	return (await pg.query("SELECT sequence, kind, status FROM ride_events WHERE order_id = $1 ORDER BY sequence", [orderId])).rows;
}

/** Answers counted by status and code (an HTTP answer's body code, or an internal call's error type). */
function tally(answers: Array<Answer | CallAnswer>): Record<string, number> {
	const out: Record<string, number> = {};
	for (const a of answers) {
		const key = `${a.status} ${(a as CallAnswer).code ?? a.body?.code ?? ""}`.trim();
		out[key] = (out[key] ?? 0) + 1;
	}
	return out;
}

beforeAll(async () => {
	bed = await startTestbed("ordersrace", { services: ["partners", "riders", "pricing", "orders", "gateway"] });
	pg = bed.pg;
	api = new PartnerApi(bed.node.baseUrl!, (await createPartner(bed.node.broker, "Race partner")).apiKey);
});

afterAll(async () => {
	await bed?.stop();
});

it("makes exactly one ride from 50 simultaneous create-order calls for one rider", async () => {
	const body = orderBody();
	const answers = await Promise.all(Array.from({ length: 50 }, () => post("/ride/create-order", body)));
	expect(tally(answers)).toEqual({ "201": 1, "200 USER_HAVE_ACTIVE_RIDE": 49 });
	const winner = answers.find((a) => a.status === 201)!.body;
	for (const a of answers) {
		expect(a.body.orderId).toBe(winner.orderId);
		expect(a.body.otp).toBe(winner.otp);
	}
	const rows = (await pg.query("SELECT o.id FROM orders o JOIN riders r ON r.id = o.rider_id WHERE r.phone = $1", [body.user.phone])).rows;
	expect(rows).toEqual([{ id: winner.orderId }]);
	expect((await pg.query("SELECT count(*)::int AS n FROM riders WHERE phone = $1", [body.user.phone])).rows[0].n).toBe(1);
});

it("makes one ride from simultaneous calls with one Idempotency-Key: each answer is that ride or 409 IN_USE", async () => {
	const body = orderBody();
	const key = `race-${randomInt(0, 1e9)}`;
	const answers = await Promise.all(Array.from({ length: 20 }, () => post("/ride/create-order", body, key)));
	const created = answers.filter((a) => a.status === 201);
	expect(created.length).toBeGreaterThanOrEqual(1);
	for (const a of answers) {
		if (a.status === 201) expect(a.body).toEqual(created[0]!.body);
		else expect({ status: a.status, code: a.body.code }).toEqual({ status: 409, code: "IDEMPOTENCY_KEY_IN_USE" });
	}
	const rows = (await pg.query("SELECT o.id FROM orders o JOIN riders r ON r.id = o.rider_id WHERE r.phone = $1", [body.user.phone])).rows;
	expect(rows).toEqual([{ id: created[0]!.body.orderId }]);
	// Once the first call is done, every repeat is its replay.
	expect(await post("/ride/create-order", body, key)).toEqual(created[0]);
});

it("lets exactly one of 20 drivers accept a ride at once; the others get 409 CONFLICT", async () => {
	const order = await createOrder();
	const answers = await Promise.all(
		Array.from({ length: 20 }, (_, i) => internal("orders.transition", { orderId: order.orderId, to: "accepted", driver: driver(i), eta: 100 + i })),
	);
	expect(tally(answers)).toEqual({ "200": 1, "409 CONFLICT": 19 });
	const winner = answers.find((a) => a.status === 200)!.body;
	const row = (await pg.query("SELECT status, version, driver FROM orders WHERE id = $1", [order.orderId])).rows[0];
	expect(row).toMatchObject({ status: "accepted", version: 1, driver: { id: winner.driver.id } });
	expect(await eventsOf(order.orderId)).toEqual([{ sequence: 1, kind: "status", status: "accepted" }]);
});

it("cancels once under 20 simultaneous cancels: all answer RIDE_CANCELLED, one event", async () => {
	const order = await createOrder();
	await internal("orders.transition", { orderId: order.orderId, to: "accepted", driver: driver(1) });
	const answers = await Promise.all(Array.from({ length: 20 }, () => post("/ride/cancel", { orderId: order.orderId })));
	expect(tally(answers)).toEqual({ "200 RIDE_CANCELLED": 20 });
	expect(await eventsOf(order.orderId)).toEqual([
		{ sequence: 1, kind: "status", status: "accepted" },
		{ sequence: 2, kind: "status", status: "customer_cancelled" },
	]);
});

it("keeps sequences gap-free and in commit order when a cancel races driver moves and location updates", async () => {
	for (let round = 0; round < 5; round++) {
		const order = await createOrder();
		await internal("orders.transition", { orderId: order.orderId, to: "accepted", driver: driver(2) });
		const moves = [
			internal("orders.transition", { orderId: order.orderId, to: "arrived", from: "accepted" }),
			...Array.from({ length: 5 }, (_, i) =>
				internal("orders.recordLocation", { orderId: order.orderId, location: { lat: 12.97 + i / 1000, lng: 77.59 }, eta: 60 }),
			),
			post("/ride/cancel", { orderId: order.orderId }),
		];
		const answers = await Promise.all(moves);
		// The cancel always wins in the end (arrived is still active); the others either landed first or conflict.
		expect(answers[answers.length - 1]).toMatchObject({ status: 200, body: { code: "RIDE_CANCELLED" } });
		for (const a of answers) expect([200, 409]).toContain(a.status);

		const row = (await pg.query("SELECT status, version FROM orders WHERE id = $1", [order.orderId])).rows[0];
		const events = await eventsOf(order.orderId);
		expect(row.status).toBe("customer_cancelled");
		expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: row.version }, (_, i) => i + 1));
		expect(events[events.length - 1]!.status).toBe("customer_cancelled");
		expect(events.filter((e) => e.status === "customer_cancelled")).toHaveLength(1);
		// occurredAt follows the sequence too.
		const times = (await pg.query("SELECT payload->>'occurredAt' AS t FROM ride_events WHERE order_id = $1 ORDER BY sequence", [order.orderId])).rows.map(
			(r) => Date.parse(r.t),
		);
		expect(times).toEqual([...times].sort((a, b) => a - b));
		const succeeded = answers.filter((a) => a.status === 200).length;
		// One event per successful move (plus the initial accepted).
		expect(events).toHaveLength(succeeded + 1);
	}
});

it("takes feedback once under 10 simultaneous submissions", async () => {
	const order = await createOrder();
	await internal("orders.transition", { orderId: order.orderId, to: "accepted", driver: driver(3) });
	await internal("orders.transition", { orderId: order.orderId, to: "arrived" });
	await internal("orders.transition", { orderId: order.orderId, to: "started", otp: order.otp });
	await internal("orders.transition", { orderId: order.orderId, to: "dropped" });
	const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => post("/ride/feedback", { orderId: order.orderId, rating: 1 + (i % 5) })));
	expect(tally(answers)).toEqual({ "200 FEEDBACK_SUBMITTED": 1, "409 FEEDBACK_ALREADY_SUBMITTED": 9 });
	expect((await pg.query("SELECT count(*)::int AS n FROM feedback WHERE order_id = $1", [order.orderId])).rows[0].n).toBe(1);
});
