import { randomBytes } from "node:crypto";
import { PartnerApi } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { destinationPoint } from "../../../lib/geo";
import type { ServiceName } from "../../../services";

/**
 * Scheduled rides across instances over the real NATS and PostgreSQL, driven
 * by the simulated fleet: two orders and two dispatch instances (separate
 * brokers) start each scheduled ride exactly once and every one reaches
 * `dropped`; then every orders and dispatch instance is stopped between
 * booking and lead time and new ones are started: the schedule lives in the
 * tables, so the rides start and finish as if nothing happened.
 */

const CITY = { lat: 12.9716, lng: 77.5946 };
/** Dispatch starts 6 s before pickup: long enough a search for the simulated fleet to take six rides at once. */
const DISPATCH_LEAD_S = 6;

const ENV = {
	FLEET_MODE: "simulated",
	SIM_SPEED: "60",
	SIM_CITIES: `${CITY.lat},${CITY.lng}`,
	FLEET_DRIVERS_PER_CITY: "6",
	FLEET_SEED_RADIUS_M: "1500",
	FLEET_TICK_MS: "100",
	SCHEDULE_MIN_LEAD_SECONDS: "6",
	SCHEDULE_MAX_AHEAD_SECONDS: "120",
	SCHEDULE_DISPATCH_LEAD_SECONDS: String(DISPATCH_LEAD_S),
	SCHEDULE_SEARCH_MARGIN_SECONDS: "0.5",
	SCHEDULE_POLL_SECONDS: "1",
	DISPATCH_TICK_MS: "50",
	DISPATCH_SWEEP_MS: "1000",
	DISPATCH_INDEX_REFRESH_MS: "1000",
	DISPATCH_TIMEOUT_MS: "60000",
	RATE_LIMIT_PER_MINUTE: "0",
};

let namespace: string;
let bed: Testbed;
let api: PartnerApi;
const workers: TestNode[] = [];

async function startWorker(service: ServiceName, label: string): Promise<TestNode> {
	const node = await startTestNode({
		databaseUrl: bed.db.url,
		services: [service],
		nats: { namespace },
		env: { ...ENV, NODE_ID: `${label}-${randomBytes(3).toString("hex")}` },
	});
	workers.push(node);
	await waitFor(
		`${label} to be discovered`,
		() =>
			bed.node.broker.registry
				.getServiceList({ onlyAvailable: true })
				.some((s: { name: string; nodeID?: string }) => s.name === service && s.nodeID === node.broker.nodeID),
		20_000,
	);
	return node;
}

async function stopWorkers(): Promise<void> {
	await Promise.all(workers.splice(0).map((n) => n.stop()));
}

beforeAll(async () => {
	namespace = uniqueNamespace("sched");
	bed = await startTestbed("schedcluster", {
		services: ["gateway", "partners", "riders", "pricing", "notifications", "fleet"],
		nats: { namespace },
		env: { ...ENV, NODE_ID: `core-${randomBytes(3).toString("hex")}` },
	});
	await Promise.all([
		startWorker("orders", "orders-a"),
		startWorker("orders", "orders-b"),
		startWorker("dispatch", "dispatch-a"),
		startWorker("dispatch", "dispatch-b"),
	]);
	const partner = await bed.node.broker.call<{ apiKey: string }, unknown>("partners.create", { name: "Scheduled cluster partner", mode: "test" });
	api = new PartnerApi(bed.node.baseUrl!, partner.apiKey);
}, 60_000);

afterAll(async () => {
	await stopWorkers();
	await bed?.stop();
});

/** Books `n` scheduled rides picked up `leadS` seconds from now, each for its own rider, finished quickly by the simulated fleet. */
async function bookScheduled(n: number, leadS: number): Promise<Array<{ orderId: string; pickupAt: string }>> {
	const pickupAt = new Date(Date.now() + leadS * 1000).toISOString();
	return Promise.all(
		Array.from({ length: n }, async (_, i) => {
			const pickup = destinationPoint(CITY, i * 60, 300 + i * 100);
			const res = await api.post<{ orderId: string; status: string; pickupAt: string }>("/ride/create-order", {
				user: { name: `Rider ${i}`, phone: randomPhone() },
				serviceType: "cab",
				pickup,
				drop: destinationPoint(pickup, 45, 1500),
				webhookURL: "https://partner.example.com/hooks",
				pickupAt,
				metadata: { sandbox: { scenario: "fast" } },
			});
			expect(res.status).toBe(201);
			expect(res.body.status).toBe("scheduled");
			return { orderId: res.body.orderId, pickupAt: res.body.pickupAt };
		}),
	);
}

/** Waits until every ride is dropped; a timeout says where each one stands. */
async function untilAllDropped(ids: string[]): Promise<void> {
	await waitFor(
		"every ride dropped",
		async () => {
			const statuses = await statusesOf(ids);
			if (!statuses.every((s) => s === "dropped")) throw new Error(`statuses: ${statuses.join(", ")}`);
			return true;
		},
		30_000,
		200,
	);
}

async function statusesOf(orderIds: string[]): Promise<string[]> {
	const { rows } = await bed.pg.query<{ status: string }>("SELECT status FROM orders WHERE id = ANY($1::text[]) ORDER BY id", [orderIds]);
	return rows.map((r) => r.status);
}

/** Each ride's status events, in sequence order: exactly one start, at or after its dispatch time, the rest of the flow once each. */
async function expectStartedOnceOnTime(orderIds: string[]): Promise<void> {
	const { rows } = await bed.pg.query<{ order_id: string; statuses: string[]; searching_at: Date; dispatch_at: Date }>(
		`SELECT e.order_id, array_agg(e.status ORDER BY e.sequence) AS statuses,
		        min(e.occurred_at) FILTER (WHERE e.status = 'searching') AS searching_at, o.dispatch_at
		 FROM ride_events e JOIN orders o ON o.id = e.order_id
		 WHERE e.order_id = ANY($1::text[]) AND e.kind = 'status' GROUP BY e.order_id, o.dispatch_at`,
		[orderIds],
	);
	expect(rows).toHaveLength(orderIds.length);
	for (const r of rows) {
		expect({ orderId: r.order_id, statuses: r.statuses }).toEqual({
			orderId: r.order_id,
			statuses: ["scheduled", "searching", "accepted", "arrived", "started", "dropped"],
		});
		expect(r.searching_at.getTime()).toBeGreaterThanOrEqual(r.dispatch_at.getTime());
	}
	// Dispatch mirrored each ride once, with its search deadline before the pickup time.
	const mirrored = await bed.pg.query<{ n: number }>(
		"SELECT count(*)::int AS n FROM dispatch_rides WHERE order_id = ANY($1::text[]) AND search_until IS NOT NULL",
		[orderIds],
	);
	expect(mirrored.rows[0].n).toBe(orderIds.length);
}

it("two orders and two dispatch instances start each scheduled ride once; the simulated fleet drives every one to dropped", async () => {
	const rides = await bookScheduled(6, 7);
	const ids = rides.map((r) => r.orderId);
	await untilAllDropped(ids);
	await expectStartedOnceOnTime(ids);
});

it("every orders and dispatch instance stopped between booking and lead time, new ones started: the rides start and finish", async () => {
	// Dispatch is due 12 s after booking: room to stop four instances on a busy machine before it.
	const rides = await bookScheduled(3, 18);
	const ids = rides.map((r) => r.orderId);
	await stopWorkers();
	// Nothing runs the schedule now; the rides wait in the table.
	expect(await statusesOf(ids)).toEqual(["scheduled", "scheduled", "scheduled"]);
	await startWorker("orders", "orders-c");
	await startWorker("dispatch", "dispatch-c");
	await untilAllDropped(ids);
	await expectStartedOnceOnTime(ids);
});
