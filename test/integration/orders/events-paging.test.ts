import type { Client } from "pg";
import { PartnerApi } from "../../helpers/http";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { createPartner } from "../../helpers/webhooks";

/**
 * POST /ride/events a page at a time, over real HTTP through the gateway with
 * the real orders and notifications services: a ride with more than 10,000
 * events (a long ride's location events) is read in `sequence` order with no
 * gaps or repeats, the first page answers without a cursor, and a cursor that
 * is not ours is a 400 naming it, never a 500.
 */

const EVENTS = 10_050;

let bed: Testbed;
let pg: Client;
let api: PartnerApi;

interface Page {
	events: Array<{ eventId: string; sequence: number; status: string; payload: { sequence: number }; delivery: { state: string } }>;
	nextCursor: string | null;
}

beforeAll(async () => {
	// Events go to a closed port and are retried only much later: notifications stays quiet.
	bed = await startTestbed("eventspaging", {
		services: ["partners", "riders", "pricing", "orders", "notifications", "gateway"],
		env: { WEBHOOK_RETRY_SCHEDULE_MS: "600000" },
	});
	pg = bed.pg;
	const partner = await createPartner(bed.node.broker, "Paging partner");
	api = new PartnerApi(bed.node.baseUrl!, partner.apiKey);
});

afterAll(async () => {
	await bed?.stop();
});

async function createOrder(): Promise<string> {
	const res = await api.post<{ orderId: string }>("/ride/create-order", {
		user: { name: "Asha Rao", phone: randomPhone("+9193") },
		serviceType: "cab",
		pickup: { lat: 12.9716, lng: 77.5946 },
		drop: { lat: 12.9352, lng: 77.6245 },
		webhookURL: "http://127.0.0.1:9/hooks/rides",
	});
	expect(res.status).toBe(201);
	return res.body.orderId;
}

/** Location events of the ride with sequences from..n, as a long ride's outbox holds them. */
async function addLocationEvents(orderId: string, n: number, from = 1): Promise<void> {
	await pg.query(
		`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
		 SELECT 'evt_page_' || $1 || '_' || i, o.id, o.partner_id, i, 'location', 'location_updated', o.webhook_url,
		        jsonb_build_object('eventId', 'evt_page_' || $1 || '_' || i, 'orderId', o.id, 'status', 'location_updated', 'sequence', i,
		                           'occurredAt', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'metadata', NULL),
		        now()
		 FROM orders o, generate_series($3::int, $2::int) AS i WHERE o.id = $1`,
		[orderId, n, from],
	);
	await pg.query("UPDATE orders SET version = $2 WHERE id = $1", [orderId, n]);
}

describe("/ride/events pages", () => {
	let orderId: string;

	beforeAll(async () => {
		orderId = await createOrder();
		await addLocationEvents(orderId, EVENTS);
	});

	it("answers the first page (100 events) and a cursor without one, past 10,000 events", async () => {
		const res = await api.post<Page>("/ride/events", { orderId });
		expect(res.status).toBe(200);
		expect(res.body.events.map((e) => e.sequence)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
		expect(typeof res.body.nextCursor).toBe("string");
	});

	it("pages through every event in sequence order with no gaps or repeats", async () => {
		const seen: number[] = [];
		let cursor: string | null = null;
		let pages = 0;
		do {
			const res: { status: number; body: Page } = await api.post<Page>(
				"/ride/events",
				cursor ? { orderId, cursor, limit: 1000 } : { orderId, limit: 1000 },
			);
			expect(res.status).toBe(200);
			expect(res.body.events.length).toBeLessThanOrEqual(1000);
			for (const e of res.body.events) {
				expect(e.payload.sequence).toBe(e.sequence);
				expect(e.delivery.state).toEqual(expect.any(String));
				seen.push(e.sequence);
			}
			cursor = res.body.nextCursor;
			pages += 1;
		} while (cursor !== null && pages < 20);
		expect(pages).toBe(Math.ceil(EVENTS / 1000));
		expect(seen).toEqual(Array.from({ length: EVENTS }, (_, i) => i + 1));
	});

	it("continues after a page when new events arrive: the next page starts right after it", async () => {
		const id = await createOrder();
		await addLocationEvents(id, 3);
		const all = await api.post<Page>("/ride/events", { orderId: id, limit: 3 });
		expect(all.body.events.map((e) => e.sequence)).toEqual([1, 2, 3]);
		expect(all.body.nextCursor).toBeNull(); // exactly a full page, nothing after it: the end
		const first = await api.post<Page>("/ride/events", { orderId: id, limit: 2 });
		expect(first.body.events.map((e) => e.sequence)).toEqual([1, 2]);
		await addLocationEvents(id, 5, 4);
		const second = await api.post<Page>("/ride/events", { orderId: id, limit: 2, cursor: first.body.nextCursor });
		expect(second.body.events.map((e) => e.sequence)).toEqual([3, 4]);
		const last = await api.post<Page>("/ride/events", { orderId: id, limit: 2, cursor: second.body.nextCursor });
		expect(last.body).toMatchObject({ nextCursor: null });
		expect(last.body.events.map((e) => e.sequence)).toEqual([5]);
	});

	it.each([
		["a made-up cursor", { cursor: "not-a-cursor" }, "cursor"],
		["a cursor of another kind", { cursor: Buffer.from("ac1:2026-01-31T10:00:00.123456Z|ord_1").toString("base64url") }, "cursor"],
		["a negative sequence", { cursor: Buffer.from("ev1:-1").toString("base64url") }, "cursor"],
		["an empty cursor", { cursor: "" }, "cursor"],
		["a limit of 0", { limit: 0 }, "limit"],
		["a limit above 1000", { limit: 1001 }, "limit"],
		["a fractional limit", { limit: 2.5 }, "limit"],
	])("refuses %s with 400 VALIDATION_ERROR naming the field", async (_what, extra, field) => {
		const res = await api.post<{ code: string; details: Array<{ field: string }> }>("/ride/events", { orderId, ...extra });
		expect(res.status).toBe(400);
		expect(res.body.code).toBe("VALIDATION_ERROR");
		expect(res.body.details.map((d) => d.field)).toContain(field);
	});
});
