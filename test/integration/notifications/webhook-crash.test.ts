import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { startTestNode, type TestNode } from "../../helpers/node";
import { Cluster } from "../../helpers/processes";
import { waitFor } from "../../helpers/wait";
import { createPartner, createRide, move, orderViolations, startPartnerEndpoint, type PartnerEndpoint, type TestRide } from "../../helpers/webhooks";

/**
 * The notifications process is killed with SIGKILL in the middle of
 * deliveries and started again: every event is delivered afterwards, at least
 * once, and each ride's status events still arrive in order. Orders and the
 * other services run in this process; notifications is a separate OS process
 * on the same NATS namespace and database, as in production.
 */

const RIDES = 20;

let db: TestDatabase;
let pg: Client;
let node: TestNode;
/** The notifications processes, on the test node's namespace. */
let cluster: Cluster;
let endpoint: PartnerEndpoint;

beforeAll(async () => {
	db = await createTestDatabase("whcrash");
	pg = await connect(db.url);
	cluster = new Cluster("crash", db.url, {
		WEBHOOK_TIMEOUT_MS: "1000",
		// The shortest lease allowed with that timeout (timeout + 5 s): a dead instance's claims come back after it.
		WEBHOOK_LEASE_MS: "6000",
		WEBHOOK_RETRY_SCHEDULE_MS: "100,200,400,800,1600,3200",
	});
	node = await startTestNode({
		databaseUrl: db.url,
		services: ["partners", "riders", "pricing", "orders"],
		nats: { namespace: cluster.namespace },
		env: { NODE_ID: `${cluster.namespace}-main` },
	});
});

afterAll(async () => {
	await cluster?.stopAll();
	await endpoint?.close();
	await node?.stop();
	await pg?.end();
	await db?.drop();
});

it("delivers every event, in order, after notifications is killed mid-delivery and restarted", async () => {
	const partner = await createPartner(node.broker);
	endpoint = await startPartnerEndpoint(partner.webhookSecret);
	// A slow partner, so that many tries are in flight at any moment.
	endpoint.behave(() => ({ delayMs: 250 }));

	const first = await cluster.start({ label: "notifications-1", services: "notifications" });

	const rides: TestRide[] = [];
	for (let i = 0; i < RIDES; i++) rides.push(await createRide(node.broker, partner, `${endpoint.url}/crash`));
	await Promise.all(
		rides.map(async (ride) => {
			for (const to of ["accepted", "arrived", "started"] as const) await move(node.broker, ride, to);
		}),
	);

	// Kill it hard once deliveries are well under way, at a moment when tries are in flight.
	// (A try that arrived in the last 100 ms is still far from its 250 ms answer.)
	await waitFor(
		"deliveries in flight",
		() => endpoint.delivered().length >= 10 && endpoint.received.some((h) => h.answered === 0 && Date.now() - h.receivedAt < 100),
		30_000,
		5,
	);
	const receivedBeforeKill = endpoint.received.length;
	await first.kill("SIGKILL");
	// Tries that were under way when it died: their connections closed before the (slow) answer.
	await waitFor("the cut tries", () => endpoint.received.slice(0, receivedBeforeKill).every((h) => h.answered > 0 || h.abandoned));
	const cut = endpoint.received.slice(0, receivedBeforeKill).filter((h) => h.abandoned);
	expect(cut.length).toBeGreaterThan(0);
	expect(endpoint.delivered().length).toBeLessThan(RIDES * 3);

	// Ride changes keep committing while notifications is down: the outbox keeps them.
	await Promise.all(rides.map((ride) => move(node.broker, ride, "dropped")));

	const second = await cluster.start({ label: "notifications-2", services: "notifications" });

	const eventIds = (await pg.query("SELECT id FROM ride_events WHERE order_id = ANY($1)", [rides.map((r) => r.orderId)])).rows.map((r) => r.id as string);
	expect(eventIds).toHaveLength(RIDES * 4);
	await waitFor("every event delivered after the restart", () => new Set(endpoint.delivered().map((h) => h.eventId)).size === RIDES * 4, 45_000);

	expect(new Set(endpoint.delivered().map((h) => h.eventId))).toEqual(new Set(eventIds));
	for (const ride of rides) {
		expect(
			endpoint
				.delivered()
				.filter((h) => h.orderId === ride.orderId)
				.map((h) => h.status),
		).toEqual(["accepted", "arrived", "started", "dropped"]);
	}
	expect(orderViolations(endpoint.received)).toEqual([]);
	// The tries cut by the kill were sent again (at least once).
	for (const h of cut) expect(endpoint.delivered().some((d) => d.eventId === h.eventId)).toBe(true);
	expect(endpoint.received.every((h) => h.signatureValid)).toBe(true);
	// The last answers may still be on their way into the database.
	await waitFor("every delivery recorded", async () => {
		const { rows } = await pg.query("SELECT state, count(*)::int AS n FROM webhook_deliveries GROUP BY state");
		return rows.length === 1 && rows[0].state === "delivered" && rows[0].n === RIDES * 4;
	});
	// The tries cut short by the kill were never recorded by the dead process; the new one delivered them.
	const byInstance = (await pg.query("SELECT DISTINCT instance FROM webhook_attempts")).rows.length;
	expect(byInstance).toBe(2);

	// A graceful stop releases its claims and exits cleanly.
	expect(await second.kill("SIGTERM")).toBe(0);
	expect((await pg.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE lease_owner IS NOT NULL AND state = 'pending'")).rows[0].n).toBe(0);
});
