import { existsSync } from "node:fs";
import { join } from "node:path";
import { randomInt } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import axios from "axios";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startTestNode, type TestNode } from "../helpers/node";
import type { ServiceName } from "../../services";

/**
 * POST /ride/events end to end: orders writes the outbox rows, the real
 * notifications service delivers them to a real HTTP receiver, and the
 * events endpoint reports each event in sequence order with its delivery
 * state from notifications.
 */

const HAS_GATEWAY = existsSync(join(__dirname, "../../services/gateway/gateway.service.ts")) && process.env.ORDERS_TEST_VIA !== "broker";
const HAS_NOTIFICATIONS = existsSync(join(__dirname, "../../services/notifications/notifications.service.ts"));
const SERVICES: ServiceName[] = ["partners", "riders", "pricing", "orders", "notifications", ...(HAS_GATEWAY ? (["gateway"] as ServiceName[]) : [])];

interface Partner {
	partnerId: string;
	apiKey: string;
}

let db: TestDatabase;
let node: TestNode;
let partner: Partner;
let receiver: Server;
let receiverUrl: string;
const received: Array<{ path: string; headers: IncomingMessage["headers"]; body: any }> = [];

async function post(path: string, body: unknown): Promise<{ status: number; body: any }> {
	if (HAS_GATEWAY) {
		const res = await axios.post(`${node.baseUrl}${path}`, body, { headers: { Authorization: `Bearer ${partner.apiKey}` }, validateStatus: () => true });
		return { status: res.status, body: res.data };
	}
	const action = { "/ride/create-order": "orders.create", "/ride/events": "orders.events" }[path]!;
	const meta: Record<string, unknown> = { partnerId: partner.partnerId };
	const result = await node.broker.call(action, body, { meta });
	return { status: (meta.$statusCode as number | undefined) ?? 200, body: result };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await probe();
		if (value !== undefined) return value;
		if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
		await new Promise((r) => setTimeout(r, 100));
	}
}

async function createOrder(path: string): Promise<{ orderId: string; otp: string }> {
	const res = await post("/ride/create-order", {
		user: { name: "Asha Rao", phone: `+9196${String(randomInt(0, 100_000_000)).padStart(8, "0")}` },
		serviceType: "cab",
		pickup: { lat: 12.9716, lng: 77.5946 },
		drop: { lat: 12.9352, lng: 77.6245 },
		webhookURL: `${receiverUrl}${path}`,
		metadata: { partnerRef: path },
	});
	expect(res.status).toBe(201);
	return res.body;
}

const DRIVER = { id: "drv_evt1", name: "Ravi", phone: "+919800000001", vehicleNumber: "KA01AB1234" };

beforeAll(async () => {
	receiver = createServer((req, res) => {
		const chunks: Buffer[] = [];
		req.on("data", (c: Buffer) => chunks.push(c));
		req.on("end", () => {
			const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "null");
			received.push({ path: req.url ?? "", headers: req.headers, body });
			res.statusCode = req.url?.startsWith("/fail") ? 500 : 200;
			res.end("ok");
		});
	});
	await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
	receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

	db = await createTestDatabase("ordersevents");
	// A long retry schedule keeps a failed first try visibly pending.
	node = await startTestNode({ databaseUrl: db.url, services: SERVICES, env: { WEBHOOK_RETRY_SCHEDULE_MS: "600000" } });
	partner = await node.broker.call<Partner, { name: string }>("partners.create", { name: "Events partner" });
});

afterAll(async () => {
	await node?.stop();
	await db?.drop();
	await new Promise((r) => receiver?.close(r));
});

(HAS_NOTIFICATIONS ? describe : describe.skip)("events with notifications running", () => {
	it("lists every webhook event in sequence order with its delivery state", async () => {
		const order = await createOrder("/ok");
		const moves = [
			{ to: "accepted", driver: { ...DRIVER, location: { lat: 12.975, lng: 77.59 } }, eta: 240 },
			{ to: "arrived", eta: 0 },
			{ to: "started", otp: order.otp, eta: 900 },
			{ to: "dropped" },
		];
		for (const m of moves) await node.broker.call("orders.transition", { orderId: order.orderId, ...m });

		const events = await waitFor("all four events delivered", async () => {
			const res = await post("/ride/events", { orderId: order.orderId });
			expect(res.status).toBe(200);
			const list = res.body.events as any[];
			return list.length === 4 && list.every((e) => e.delivery.state === "delivered") ? list : undefined;
		});
		expect(events.map((e) => [e.sequence, e.status])).toEqual([[1, "accepted"], [2, "arrived"], [3, "started"], [4, "dropped"]]);
		for (const e of events) {
			expect(e.eventId).toMatch(/^evt_/);
			expect(new Date(e.occurredAt).toISOString()).toBe(e.occurredAt);
			expect(e.payload).toMatchObject({ eventId: e.eventId, orderId: order.orderId, sequence: e.sequence, status: e.status, metadata: { partnerRef: "/ok" } });
			expect(e.delivery).toEqual({ state: "delivered", attempts: 1, lastStatus: 200, lastError: null });
		}
		// What the partner received is exactly the stored payloads, in order, with webhook-id = eventId.
		const mine = received.filter((r) => r.body?.orderId === order.orderId);
		expect(mine.map((r) => r.body)).toEqual(events.map((e) => e.payload));
		expect(mine.map((r) => r.headers["webhook-id"])).toEqual(events.map((e) => e.eventId));
	});

	it("reports a failed first try as pending with its attempt, status and error", async () => {
		const order = await createOrder("/fail");
		await node.broker.call("orders.transition", { orderId: order.orderId, to: "accepted", driver: DRIVER, eta: 100 });
		const [event] = await waitFor("the first try", async () => {
			const res = await post("/ride/events", { orderId: order.orderId });
			const list = res.body.events as any[];
			return list[0]?.delivery.attempts >= 1 ? list : undefined;
		});
		expect(event).toMatchObject({ sequence: 1, status: "accepted" });
		expect(event.delivery).toMatchObject({ state: "pending", attempts: 1, lastStatus: 500 });
		expect(typeof event.delivery.lastError).toBe("string");
	});
});
