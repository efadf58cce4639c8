import type { Client } from "pg";
import { uniqueNamespace, type TestNode } from "../../helpers/node";
import { Cluster, processesFor } from "../../helpers/processes";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { createPartner, createRide, move, orderViolations, startPartnerEndpoint, type PartnerEndpoint, type TestRide } from "../../helpers/webhooks";

/**
 * Two notifications processes over NATS share the delivery of 1,000 status
 * events of 100 rides: none is missing, none is sent by both at once (the
 * endpoint tracks requests in flight per event id), each ride's events
 * arrive in order, and both processes took part.
 */

const RIDES = 100;
/** accepted ×7 (the driver drops out six times: back to searching, which sends nothing), arrived, started, dropped. */
const EVENTS_PER_RIDE = 10;

let bed: Testbed;
let pg: Client;
let node: TestNode;
let endpoint: PartnerEndpoint;
let notifications: Cluster;
const namespace = uniqueNamespace("scale");

beforeAll(async () => {
	bed = await startTestbed("whscale", { services: ["partners", "riders", "pricing", "orders"], nats: { namespace }, env: { NODE_ID: `${namespace}-main` } });
	({ node, pg } = bed);
	// Two notifications processes on this node's namespace, with fewer slots than rides: neither can take all the work alone.
	notifications = new Cluster("scale", bed.db.url, { WEBHOOK_CONCURRENCY: "16" }, namespace);
	await notifications.startAll(processesFor({ notifications: 2 }));
});

afterAll(async () => {
	await notifications?.stopAll();
	await endpoint?.close();
	await bed?.stop();
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
		const seqs = endpoint
			.delivered()
			.filter((h) => h.orderId === ride.orderId)
			.map((h) => h.sequence);
		expect(seqs).toEqual(Array.from({ length: EVENTS_PER_RIDE }, (_, i) => i + 1));
	}
	expect(endpoint.received.every((h) => h.signatureValid)).toBe(true);

	const perInstance = (await pg.query("SELECT instance, count(*)::int AS n FROM webhook_attempts GROUP BY instance")).rows;
	expect(perInstance).toHaveLength(2);
	for (const row of perInstance) expect(row.n).toBeGreaterThan(0);
	console.log(`notifications-scale: attempts per instance ${perInstance.map((r) => `${r.instance}=${r.n}`).join(", ")}`);
});
