import { PartnerApi } from "../../helpers/http";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { createPartner, startPartnerEndpoint, type PartnerEndpoint } from "../../helpers/webhooks";

/**
 * POST /ride/events end to end: orders writes the outbox rows, the real
 * notifications service delivers them to a real HTTP receiver, and the
 * events endpoint reports each event in sequence order with its delivery
 * state from notifications.
 */

let bed: Testbed;
let api: PartnerApi;
/** The partner's receiver: answers 500 under /fail, 200 elsewhere. */
let receiver: PartnerEndpoint;

/** The ride's events from POST /ride/events once `done` holds for them; an answer other than 200 fails the test at once. */
async function eventsOnce(orderId: string, what: string, done: (events: any[]) => boolean): Promise<any[]> {
	const res = await waitFor(
		what,
		async () => {
			const r = await api.post<{ events: any[] }>("/ride/events", { orderId });
			return r.status !== 200 || done(r.body.events) ? r : null;
		},
		20_000,
		100,
	);
	expect(res.status).toBe(200);
	return res.body.events;
}

async function createOrder(path: string): Promise<{ orderId: string; otp: string }> {
	const res = await api.post<{ orderId: string; otp: string }>("/ride/create-order", {
		user: { name: "Asha Rao", phone: randomPhone("+9196") },
		serviceType: "cab",
		pickup: { lat: 12.9716, lng: 77.5946 },
		drop: { lat: 12.9352, lng: 77.6245 },
		webhookURL: `${receiver.url}${path}`,
		metadata: { partnerRef: path },
	});
	expect(res.status).toBe(201);
	return res.body;
}

const DRIVER = { id: "drv_evt1", name: "Ravi", phone: "+919800000001", vehicleNumber: "KA01AB1234" };

beforeAll(async () => {
	// A long retry schedule keeps a failed first try visibly pending.
	bed = await startTestbed("ordersevents", {
		services: ["partners", "riders", "pricing", "orders", "notifications", "gateway"],
		env: { WEBHOOK_RETRY_SCHEDULE_MS: "600000" },
	});
	const partner = await createPartner(bed.node.broker, "Events partner");
	api = new PartnerApi(bed.node.baseUrl!, partner.apiKey);
	receiver = await startPartnerEndpoint(partner.webhookSecret);
	receiver.behave((hook) => (hook.path.startsWith("/hooks/fail") ? { status: 500 } : undefined));
});

afterAll(async () => {
	await bed?.stop();
	await receiver?.close();
});

describe("events with notifications running", () => {
	it("lists every webhook event in sequence order with its delivery state", async () => {
		const order = await createOrder("/ok");
		const moves = [
			{ to: "accepted", driver: { ...DRIVER, location: { lat: 12.975, lng: 77.59 } }, eta: 240 },
			{ to: "arrived", eta: 0 },
			{ to: "started", otp: order.otp, eta: 900 },
			{ to: "dropped" },
		];
		for (const m of moves) await bed.node.broker.call("orders.transition", { orderId: order.orderId, ...m });

		const events = await eventsOnce(
			order.orderId,
			"all four events delivered",
			(list) => list.length === 4 && list.every((e) => e.delivery.state === "delivered"),
		);
		expect(events.map((e) => [e.sequence, e.status])).toEqual([
			[1, "accepted"],
			[2, "arrived"],
			[3, "started"],
			[4, "dropped"],
		]);
		for (const e of events) {
			expect(e.eventId).toMatch(/^evt_/);
			expect(new Date(e.occurredAt).toISOString()).toBe(e.occurredAt);
			expect(e.payload).toMatchObject({
				eventId: e.eventId,
				orderId: order.orderId,
				sequence: e.sequence,
				status: e.status,
				metadata: { partnerRef: "/ok" },
			});
			expect(e.delivery).toEqual({ state: "delivered", attempts: 1, lastStatus: 200, lastError: null });
		}
		// What the partner received is exactly the stored payloads, in order, with webhook-id = eventId.
		const mine = receiver.received.filter((r) => r.orderId === order.orderId);
		expect(mine.map((r) => r.body)).toEqual(events.map((e) => e.payload));
		expect(mine.map((r) => r.headers["webhook-id"])).toEqual(events.map((e) => e.eventId));
	});

	it("reports a failed first try as pending with its attempt, status and error", async () => {
		const order = await createOrder("/fail");
		await bed.node.broker.call("orders.transition", { orderId: order.orderId, to: "accepted", driver: DRIVER, eta: 100 });
		const [event] = await eventsOnce(order.orderId, "the first try", (list) => list[0]?.delivery.attempts >= 1);
		expect(event).toMatchObject({ sequence: 1, status: "accepted" });
		expect(event.delivery).toMatchObject({ state: "pending", attempts: 1, lastStatus: 500 });
		expect(typeof event.delivery.lastError).toBe("string");
	});
});
