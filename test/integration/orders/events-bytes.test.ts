import type { Client } from "pg";
import { EVENTS_PAGE_MAX_BYTES } from "../../../contracts/orders";
import { PartnerApi } from "../../helpers/http";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";

/**
 * `/ride/events` pages bounded in bytes, across the real bus: the gateway and
 * the services run as two nodes over NATS (max_payload 1 MiB by default), and
 * a ride's events carry 4 KB of metadata each, so 1,000 of them (the largest
 * `limit`) are about 4.5 MB. Every page fits (cut at EVENTS_PAGE_MAX_BYTES,
 * 512 KiB) and paging with `nextCursor` still reads every event once, in order.
 */

const EVENTS = 1_000;

let db: TestDatabase;
let pg: Client;
let services: TestNode;
let front: TestNode;
let api: PartnerApi;

beforeAll(async () => {
	db = await createTestDatabase("eventsbytes");
	const namespace = uniqueNamespace("evbytes");
	// Events go to a closed port and are retried only much later: notifications stays quiet.
	const env = { WEBHOOK_RETRY_SCHEDULE_MS: "600000" };
	services = await startTestNode({
		databaseUrl: db.url,
		services: ["partners", "riders", "pricing", "orders", "notifications"],
		nats: { namespace },
		env: { ...env, NODE_ID: `${namespace}-services` },
	});
	front = await startTestNode({ databaseUrl: db.url, services: ["gateway"], nats: { namespace }, env: { ...env, NODE_ID: `${namespace}-gateway` } });
	pg = await connect(db.url);
	const { apiKey } = await services.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Bytes partner" });
	api = new PartnerApi(front.baseUrl!, apiKey);
});

afterAll(async () => {
	await pg?.end().catch(() => undefined);
	await front?.stop();
	await services?.stop();
	await db?.drop();
});

interface Page {
	events: Array<{ sequence: number; payload: { sequence: number; metadata: { note: string } } }>;
	nextCursor: string | null;
}

it("cuts a page of large events to fit the bus; the cursor reads every event once, in order", async () => {
	const note = "x".repeat(4_000);
	await waitForGateway();
	const created = await api.post<{ orderId: string }>("/ride/create-order", {
		user: { name: "Asha Rao", phone: randomPhone("+9194") },
		serviceType: "cab",
		pickup: { lat: 12.9716, lng: 77.5946 },
		drop: { lat: 12.9352, lng: 77.6245 },
		webhookURL: "http://127.0.0.1:9/hooks/rides",
		metadata: { note },
	});
	expect(created.status).toBe(201);
	const orderId = created.body.orderId;
	await pg.query(
		`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
		 SELECT 'evt_bytes_' || i, o.id, o.partner_id, i, 'location', 'location_updated', o.webhook_url,
		        jsonb_build_object('eventId', 'evt_bytes_' || i, 'orderId', o.id, 'status', 'location_updated', 'sequence', i,
		                           'occurredAt', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'metadata', o.metadata),
		        now()
		 FROM orders o, generate_series(1, $2::int) AS i WHERE o.id = $1`,
		[orderId, EVENTS],
	);
	await pg.query("UPDATE orders SET version = $2 WHERE id = $1", [orderId, EVENTS]);

	const seen: number[] = [];
	let cursor: string | null = null;
	let pages = 0;
	do {
		const res: { status: number; body: Page } = await api.post<Page>("/ride/events", cursor ? { orderId, cursor, limit: 1000 } : { orderId, limit: 1000 });
		expect(res.status).toBe(200);
		expect(Buffer.byteLength(JSON.stringify(res.body.events))).toBeLessThanOrEqual(EVENTS_PAGE_MAX_BYTES);
		for (const e of res.body.events) {
			expect(e.payload).toMatchObject({ sequence: e.sequence, metadata: { note } });
			seen.push(e.sequence);
		}
		cursor = res.body.nextCursor;
		pages += 1;
	} while (cursor !== null && pages < 50);
	expect(seen).toEqual(Array.from({ length: EVENTS }, (_, i) => i + 1));
	// ~4.2 KB per event: about 120 per page, never the 1,000 asked for.
	expect(pages).toBeGreaterThan(1);
});

/** The gateway node learns the services node over NATS; bounded. */
async function waitForGateway(): Promise<void> {
	await front.broker.waitForServices(["orders", "partners"], 10_000);
}
