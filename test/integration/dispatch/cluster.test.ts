import { randomBytes } from "node:crypto";
import type { Client } from "pg";
import { callAction, type CallAnswer } from "../../helpers/broker";
import { startTestNode, uniqueNamespace, type TestNode, TELEPORTING_DRIVERS } from "../../helpers/node";
import { bookRide, randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { sleep, waitFor } from "../../helpers/wait";
import { createPartner } from "../../helpers/webhooks";
import { destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import type { DriverJob, DriverView } from "../../../contracts/dispatch";

/**
 * Two dispatch instances (separate brokers) over the real NATS on one
 * database, with many simultaneous rides and drivers answering offers through
 * either instance — sometimes through both at once: no driver is ever
 * double-booked and no ride ever gets two drivers. Then both instances stop,
 * rides are booked while no dispatch runs (their `orders.created` hints are
 * lost), and a fresh instance finds and finishes everything from the tables.
 */

const DRIVERS = 20;
const RIDES = 32;
const CENTRE: Point = { lat: 25.3176, lng: 82.9739 };

let bed: Testbed;
let pg: Client;
let namespace: string;
let core: TestNode;
let dispatchA: TestNode | undefined;
let dispatchB: TestNode | undefined;
let partnerId: string;

/** How long the cluster gets for each step (rides over NATS, two instances racing). */
const STEP_MS = 30_000;

const ENV = {
	...TELEPORTING_DRIVERS,
	FLEET_MODE: "live",
	DISPATCH_OFFER_TIMEOUT_MS: "4000",
	DISPATCH_TIMEOUT_MS: "120000",
	DISPATCH_TICK_MS: "50",
	DISPATCH_RETRY_MS: "100",
	DISPATCH_SWEEP_MS: "1000",
	DISPATCH_INDEX_REFRESH_MS: "1000",
	LOCATION_INTERVAL_MS: "1000",
};

async function startDispatch(label: string): Promise<TestNode> {
	const n = await startTestNode({
		databaseUrl: bed.db.url,
		services: ["dispatch"],
		nats: { namespace },
		env: { ...ENV, NODE_ID: `${label}-${randomBytes(3).toString("hex")}` },
	});
	// Calls are addressed to this instance by node id: wait until the core node has discovered it.
	await waitFor(
		`${label} to be discovered`,
		async () =>
			core.broker.registry
				.getServiceList({ onlyAvailable: true })
				.some((s: { name: string; nodeID?: string }) => s.name === "dispatch" && s.nodeID === n.broker.nodeID),
		STEP_MS,
	);
	return n;
}

const nodeIdOf = (n: TestNode): string => n.broker.nodeID;

/** A dispatch call through a chosen instance (from the core node, over NATS). */
function via<T = any>(n: TestNode, action: string, params: unknown): Promise<CallAnswer<T>> {
	return callAction<T>(core.broker, action, params, { nodeID: nodeIdOf(n) });
}

const book = (pickup: Point) =>
	bookRide(core.broker, partnerId, pickup, { drop: destinationPoint(pickup, 45, 2500), webhookURL: "https://partner.example.com/hooks" });

/**
 * Driver apps: every driver polls its job through one instance and accepts an
 * offer — every third accept is sent through both instances at the same time.
 */
function driverBots(drivers: DriverView[], instances: () => TestNode[]): { stop: () => Promise<void>; doubleAccepts: () => number } {
	let running = true;
	let doubles = 0;
	const loops = drivers.map(async (d, i) => {
		let n = 0;
		while (running) {
			const nodes = instances();
			const mine = nodes[(i + n++) % nodes.length];
			const job = await via<DriverJob>(mine, "dispatch.driver", { driverId: d.driverId });
			const offer = job.body?.offer;
			if (offer) {
				const params = { driverId: d.driverId, orderId: offer.orderId };
				if (n % 3 === 0 && nodes.length > 1) {
					const answers = await Promise.all(nodes.map((x) => via(x, "dispatch.acceptOffer", params)));
					// One offer, two accepts at once: exactly one wins.
					if (answers.every((a) => a.status === 200 || a.status === 409)) doubles += answers.filter((a) => a.status === 200).length === 1 ? 1 : 0;
					expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(1);
				} else {
					await via(mine, "dispatch.acceptOffer", params);
				}
			}
			await sleep(40);
		}
	});
	return {
		async stop() {
			running = false;
			await Promise.all(loops);
		},
		doubleAccepts: () => doubles,
	};
}

/** The invariants, straight from the tables. */
async function expectNoDoubleBooking(): Promise<void> {
	// An active order's driver is on no other active order.
	const shared = await pg.query(
		`SELECT driver->>'id' AS driver_id, count(*)::int AS n FROM orders
		 WHERE status IN ('accepted','arrived','started') GROUP BY 1 HAVING count(*) > 1`,
	);
	expect(shared.rows).toEqual([]);
	// Each driver holds at most one ride, and an on-trip driver holds exactly the order that names it.
	const mismatched = await pg.query(
		`SELECT d.id, d.order_id, o.id AS named_by FROM drivers d
		 LEFT JOIN orders o ON o.driver->>'id' = d.id AND o.status IN ('accepted','arrived','started')
		 WHERE (d.status = 'on_trip' AND (o.id IS NULL OR o.id <> d.order_id)) OR (d.status <> 'on_trip' AND o.id IS NOT NULL)`,
	);
	expect(mismatched.rows).toEqual([]);
	// No order was ever accepted by two offers, no driver holds two accepted offers of open rides.
	const twoAccepted = await pg.query(`SELECT order_id FROM dispatch_offers WHERE state = 'accepted' GROUP BY order_id HAVING count(*) > 1`);
	expect(twoAccepted.rows).toEqual([]);
	// The partner saw one accepted per ride (no drop-outs in this test).
	const twoAcceptedEvents = await pg.query(`SELECT order_id FROM ride_events WHERE status = 'accepted' GROUP BY order_id HAVING count(*) > 1`);
	expect(twoAcceptedEvents.rows).toEqual([]);
}

async function count(sql: string): Promise<number> {
	return (await pg.query<{ n: number }>(sql)).rows[0].n;
}

beforeAll(async () => {
	namespace = uniqueNamespace("dispatch");
	bed = await startTestbed("dispcluster", {
		services: ["partners", "riders", "pricing", "orders"],
		nats: { namespace },
		env: { ...ENV, NODE_ID: `core-${randomBytes(3).toString("hex")}` },
	});
	({ node: core, pg } = bed);
	dispatchA = await startDispatch("dispatch-a");
	dispatchB = await startDispatch("dispatch-b");
	await core.broker.waitForServices(["dispatch"], 20_000);
	partnerId = (await createPartner(core.broker, "Cluster partner")).partnerId;
});

afterAll(async () => {
	await dispatchA?.stop();
	await dispatchB?.stop();
	await bed?.stop();
});

describe("two dispatch instances over NATS", () => {
	it("never double-books a driver nor gives a ride two drivers, and a fresh instance recovers everything from the tables", async () => {
		const a = dispatchA!;
		const b = dispatchB!;
		// Drivers registered and brought online through alternating instances.
		const drivers: DriverView[] = [];
		for (let i = 0; i < DRIVERS; i++) {
			const n = i % 2 === 0 ? a : b;
			const reg = await via<DriverView>(n, "dispatch.register", {
				name: `Driver ${i}`,
				phone: randomPhone("+9196"),
				vehicleNumber: `UP65${1000 + i}`,
				serviceType: "cab",
				mode: "test",
			});
			const at = destinationPoint(CENTRE, (i * 37) % 360, 200 + i * 90);
			const online = await via<DriverView>(n === a ? b : a, "dispatch.goOnline", {
				driverId: reg.body!.driverId,
				location: { lat: at.lat, lng: at.lng, heading: 0 },
			});
			drivers.push(online.body!);
		}
		const bots = driverBots(drivers, () => [a, b]);
		try {
			// Many rides at once: more rides than drivers.
			const orders = await Promise.all(Array.from({ length: RIDES }, (_, i) => book(destinationPoint(CENTRE, (i * 53) % 360, 300 + i * 40))));
			await waitFor(
				"every driver to be on a ride",
				async () => (await count("SELECT count(*)::int AS n FROM orders WHERE status = 'accepted'")) === DRIVERS,
				STEP_MS,
			);
			await expectNoDoubleBooking();
			expect(await count("SELECT count(*)::int AS n FROM orders WHERE status = 'searching'")).toBe(RIDES - DRIVERS);

			// Half the drivers finish their rides (through either instance); the waiting rides get them.
			const { rows: onTrip } = await pg.query<{ id: string; order_id: string }>(
				"SELECT id, order_id FROM drivers WHERE status = 'on_trip' ORDER BY id LIMIT 10",
			);
			const otps = new Map(orders.map((o) => [o.orderId, o.otp]));
			await Promise.all(
				onTrip.map(async (d, i) => {
					const [x, y] = i % 2 === 0 ? [a, b] : [b, a];
					expect((await via(x, "dispatch.arrive", { driverId: d.id, orderId: d.order_id })).status).toBe(200);
					expect((await via(y, "dispatch.startRide", { driverId: d.id, orderId: d.order_id, otp: otps.get(d.order_id) })).status).toBe(200);
					expect((await via(x, "dispatch.dropRide", { driverId: d.id, orderId: d.order_id })).status).toBe(200);
				}),
			);
			await waitFor(
				"the waiting rides to be accepted",
				async () => (await count("SELECT count(*)::int AS n FROM orders WHERE status = 'searching'")) === Math.max(0, RIDES - DRIVERS - 10),
				STEP_MS,
			);
			await waitFor(
				"all drivers busy again",
				async () => (await count("SELECT count(*)::int AS n FROM orders WHERE status = 'accepted'")) === DRIVERS,
				STEP_MS,
			);
			await expectNoDoubleBooking();
			expect(await count("SELECT count(*)::int AS n FROM orders WHERE status = 'dropped'")).toBe(10);
		} finally {
			await bots.stop();
		}
		expect(bots.doubleAccepts()).toBeGreaterThan(0);

		// Both instances go away; meanwhile rides are cancelled and booked (their hints are lost).
		await dispatchA!.stop();
		await dispatchB!.stop();
		dispatchA = dispatchB = undefined;
		const { rows: accepted } = await pg.query<{ id: string; driver_id: string }>(
			"SELECT id, driver->>'id' AS driver_id FROM orders WHERE status = 'accepted' ORDER BY id LIMIT 3",
		);
		for (const o of accepted) await core.broker.call("orders.cancel", { orderId: o.id }, { meta: { partnerId } });
		const lost = await book(destinationPoint(CENTRE, 10, 500));

		// A fresh instance: the sweep frees the cancelled rides' drivers and matches every waiting ride, including the lost one.
		dispatchA = await startDispatch("dispatch-c");
		const c = dispatchA;
		for (const o of accepted) {
			await waitFor(
				`driver ${o.driver_id} to be freed`,
				async () => (await via<DriverJob>(c, "dispatch.driver", { driverId: o.driver_id })).body?.driver.status !== "on_trip",
				STEP_MS,
			);
		}
		const bots2 = driverBots(drivers, () => [c]);
		try {
			await waitFor(
				"the ride booked while dispatch was down to be accepted",
				async () => (await core.broker.call<{ status: string }, { orderId: string }>("orders.get", { orderId: lost.orderId })).status === "accepted",
				STEP_MS,
			);
			await expectNoDoubleBooking();
			// Location events resume for rides accepted before the restart.
			const before = await count("SELECT count(*)::int AS n FROM ride_events WHERE kind = 'location'");
			await waitFor(
				"location events after the restart",
				async () => (await count("SELECT count(*)::int AS n FROM ride_events WHERE kind = 'location'")) > before + DRIVERS / 2,
				STEP_MS,
			);
		} finally {
			await bots2.stop();
		}
	});
});
