import type { Client } from "pg";
import { connect, createTestDatabase, TEST_NATS_URL, type TestDatabase } from "../helpers/db";
import { startTestNode, uniqueNamespace, type TestNode } from "../helpers/node";
import { startServiceProcess, type ServiceProcess } from "../helpers/processes";
import { createPartner, createRide, move, orderViolations, startPartnerEndpoint, waitFor, type PartnerEndpoint, type TestRide } from "../helpers/webhooks";

/**
 * Two notifications processes over NATS share the delivery of 1,000 status
 * events of 100 rides: none is missing, none is sent by both at once (the
 * endpoint tracks requests in flight per event id), each ride's events
 * arrive in order, and both processes took part.
 */

const RIDES = 100;
/** accepted ×7 (the driver drops out six times: back to searching, which sends nothing), arrived, started, dropped. */
const EVENTS_PER_RIDE = 10;

let db: TestDatabase;
let pg: Client;
let node: TestNode;
let endpoint: PartnerEndpoint;
const processes: ServiceProcess[] = [];
const namespace = uniqueNamespace("scale");

beforeAll(async () => {
	db = await createTestDatabase("whscale");
	pg = await connect(db.url);
	node = await startTestNode({ databaseUrl: db.url, services: ["partners", "riders", "pricing", "orders"], nats: { namespace }, env: { NODE_ID: `${namespace}-main` } });
	for (const label of ["a", "b"]) {
		processes.push(
			await startServiceProcess(`notifications-${label}`, {
				SERVICES: "notifications",
				DATABASE_URL: db.url,
				TRANSPORTER: TEST_NATS_URL,
				NAMESPACE: namespace,
				NODE_ID: `${namespace}-${label}`,
				WEBHOOK_ALLOW_PRIVATE: "true",
				// Fewer slots than rides: neither process can take all the work alone.
				WEBHOOK_CONCURRENCY: "16",
				LOGLEVEL: "info", // the helper waits for the broker's "started successfully" line
			}),
		);
	}
});

afterAll(async () => {
	for (const p of processes) await p.kill("SIGTERM").catch(() => undefined);
	await endpoint?.close();
	await node?.stop();
	await pg?.end();
	await db?.drop();
});

async function driveRide(ride: TestRide): Promise<void> {
	for (let i = 0; i < 7; i++) {
		await move(node.broker, ride, "accepted");
		if (i < 6) await move(node.broker, ride, "searching");
	}
	for (const to of ["arrived", "started", "dropped"] as const) await move(node.broker, ride, to);
}

it("delivers 1,000 events of 100 rides with two instances: none twice at once, none missing, in order", async () => {
	const partner = await createPartner(node.broker);
	endpoint = await startPartnerEndpoint(partner.webhookSecret);
	// A little latency per request so deliveries overlap across the instances.
	endpoint.behave(() => ({ delayMs: 5 + Math.floor(Math.random() * 10) }));

	const rides: TestRide[] = [];
	for (let i = 0; i < RIDES; i++) rides.push(await createRide(node.broker, partner, `${endpoint.url}/scale`));
	await Promise.all(rides.map(driveRide));

	const eventIds = (await pg.query("SELECT id FROM ride_events WHERE order_id = ANY($1)", [rides.map((r) => r.orderId)])).rows.map((r) => r.id as string);
	expect(eventIds).toHaveLength(RIDES * EVENTS_PER_RIDE);

	await waitFor("all 1,000 events", () => new Set(endpoint.delivered().map((h) => h.eventId)).size === RIDES * EVENTS_PER_RIDE, 45_000, 100);
	await waitFor("every delivery recorded", async () => {
		const { rows } = await pg.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE state = 'delivered'");
		return rows[0].n === RIDES * EVENTS_PER_RIDE;
	});

	expect(endpoint.concurrentDuplicates).toEqual([]);
	expect(new Set(endpoint.delivered().map((h) => h.eventId))).toEqual(new Set(eventIds));
	// Nothing failed and no lease ran out, so every event went out exactly once.
	expect(endpoint.received).toHaveLength(RIDES * EVENTS_PER_RIDE);
	expect(orderViolations(endpoint.received)).toEqual([]);
	for (const ride of rides) {
		const seqs = endpoint.delivered().filter((h) => h.orderId === ride.orderId).map((h) => h.sequence);
		expect(seqs).toEqual(Array.from({ length: EVENTS_PER_RIDE }, (_, i) => i + 1));
	}
	expect(endpoint.received.every((h) => h.signatureValid)).toBe(true);

	const perInstance = (await pg.query("SELECT instance, count(*)::int AS n FROM webhook_attempts GROUP BY instance")).rows;
	expect(perInstance).toHaveLength(2);
	for (const row of perInstance) expect(row.n).toBeGreaterThan(0);
	console.log(`notifications-scale: attempts per instance ${perInstance.map((r) => `${r.instance}=${r.n}`).join(", ")}`);
});
