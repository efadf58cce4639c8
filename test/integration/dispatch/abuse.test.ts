import { randomBytes } from "node:crypto";
import type { Client } from "pg";
import { callAction, type CallAnswer } from "../../helpers/broker";
import { startTestNode, uniqueNamespace, type TestNode, TELEPORTING_DRIVERS } from "../../helpers/node";
import { bookRide, offerFor, randomPhone, type BookedRide } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { createPartner } from "../../helpers/webhooks";
import { destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import type { DriverJob, DriverView, SupplyDemandReply } from "../../../contracts/dispatch";
import type { EstimateResult } from "../../../contracts/pricing";

/**
 * Cheap ways to hurt others, against the real services: two dispatch
 * instances (separate brokers over the real NATS on one PostgreSQL) and the
 * orders, pricing, riders and partners services on a core node.
 *
 * - The reconciliation sweep pages through every active ride: a ride whose
 *   dispatch row was lost, with more than 5,000 older active rides before
 *   it, is still found and offered to a driver.
 * - OTP guessing: tries are counted per order in PostgreSQL, whichever
 *   dispatch instance the driver goes through; after 5 wrong ones even the
 *   right OTP is refused (409 OTP_LOCKED) until an operator unlocks it, and
 *   concurrent guesses never get more than 5 tries.
 * - Surge gaming: create-and-cancel leaves fares unchanged; one partner's
 *   searching rides move surge only up to its cap, other partners' still count.
 *
 * Each test works in its own area (farther apart than every radius).
 */

const STEP_MS = 30_000;
const FILLERS = 5000;
const DEMAND_PER_PARTNER = 3;

const DISPATCH_ENV = {
	...TELEPORTING_DRIVERS,
	FLEET_MODE: "live",
	DISPATCH_TIMEOUT_MS: "600000", // searching rides stay searching for the whole file
	DISPATCH_TICK_MS: "50",
	DISPATCH_RETRY_MS: "200",
	DISPATCH_SWEEP_MS: "1000",
	DISPATCH_SWEEP_PAGE: "700",
	DISPATCH_INDEX_REFRESH_MS: "1000",
	// Drivers farther than 300 m are never offered a ride, but count as supply within 3 km.
	DISPATCH_SEARCH_RADIUS_M: "300",
	DISPATCH_SUPPLY_RADIUS_M: "3000",
	DISPATCH_DEMAND_PER_PARTNER: String(DEMAND_PER_PARTNER),
};

let bed: Testbed;
let pg: Client;
let namespace: string;
let core: TestNode;
let dispatchA: TestNode | undefined;
let dispatchB: TestNode | undefined;
let partnerId: string;
let otherPartnerId: string;

async function startDispatch(label: string): Promise<TestNode> {
	const n = await startTestNode({
		databaseUrl: bed.db.url,
		services: ["dispatch"],
		nats: { namespace },
		env: { ...DISPATCH_ENV, NODE_ID: `${label}-${randomBytes(3).toString("hex")}` },
	});
	await waitFor(
		`${label} to be discovered`,
		() =>
			core.broker.registry
				.getServiceList({ onlyAvailable: true })
				.some((s: { name: string; nodeID?: string }) => s.name === "dispatch" && s.nodeID === n.broker.nodeID),
		STEP_MS,
	);
	return n;
}

/** A call through a chosen dispatch instance (from the core node, over NATS). */
const via = <T = any>(n: TestNode, action: string, params: unknown): Promise<CallAnswer<T>> =>
	callAction<T>(core.broker, action, params, { nodeID: n.broker.nodeID });
const call = <T = any>(action: string, params: unknown, meta?: Record<string, unknown>): Promise<CallAnswer<T>> =>
	callAction<T>(core.broker, action, params, meta ? { meta } : undefined);

async function ok<T = any>(answer: Promise<CallAnswer<T>>): Promise<T> {
	const res = await answer;
	if (res.status !== 200) throw new Error(`→ ${res.status} ${res.code}`);
	return res.body;
}

/** A cab driver registered and online `metres` east of `near`, through instance `n`. */
async function driverNear(n: TestNode, near: Point, metres: number): Promise<DriverView> {
	const reg = await ok<DriverView>(
		via(n, "dispatch.register", {
			name: "Abuse Test",
			phone: randomPhone("+9195"),
			vehicleNumber: `KA05${String(randomBytes(2).readUInt16BE()).padStart(5, "0")}`,
			serviceType: "cab",
			mode: "test",
		}),
	);
	const at = destinationPoint(near, 90, metres);
	return ok<DriverView>(via(n, "dispatch.goOnline", { driverId: reg.driverId, location: { lat: at.lat, lng: at.lng, heading: 270 } }));
}

const book = (pickup: Point, partner = partnerId): Promise<BookedRide> => bookRide(core.broker, partner, pickup, { drop: destinationPoint(pickup, 0, 2500) });

/** A ride offered to `driver`, accepted and arrived (the driver waits at the pickup for the OTP). */
async function arrivedRide(n: TestNode, driver: DriverView, pickup: Point): Promise<BookedRide> {
	const order = await book(pickup);
	await offerFor(core.broker, driver.driverId, order.orderId, STEP_MS);
	await ok(via(n, "dispatch.acceptOffer", { driverId: driver.driverId, orderId: order.orderId }));
	await ok(via(n, "dispatch.arrive", { driverId: driver.driverId, orderId: order.orderId }));
	return order;
}

const wrongOtp = (otp: string, k: number): string => String((Number(otp) + 1 + k) % 10_000).padStart(4, "0");

async function cabQuote(pickup: Point): Promise<{ surge: number; total: number }> {
	const r = await ok<EstimateResult>(call("pricing.estimate", { pickup, drop: destinationPoint(pickup, 0, 2500) }, { partnerId }));
	const cab = r.quotes.find((q) => q.serviceType === "cab")!;
	return { surge: cab.fareBreakdown.surgeMultiplier, total: cab.totalAmount };
}

beforeAll(async () => {
	namespace = uniqueNamespace("abuse");
	bed = await startTestbed("dispatchabuse", {
		services: ["partners", "riders", "pricing", "orders"],
		nats: { namespace },
		env: {
			NODE_ID: `core-${randomBytes(3).toString("hex")}`,
			QUOTE_SIGNING_SECRET: `abuse-it-${"q".repeat(40)}`,
			SUPPLY_DEMAND_CACHE_MS: "0", // every estimate asks dispatch afresh
			SUPPLY_DEMAND_TIMEOUT_MS: "5000", // an unanswered supply call would look like "no surge"
			SURGE_MAX: "5",
			SURGE_SENSITIVITY: "1",
		},
	});
	({ node: core, pg } = bed);
	partnerId = (await createPartner(core.broker, "Abuse partner")).partnerId;
	otherPartnerId = (await createPartner(core.broker, "Other partner")).partnerId;
});

afterAll(async () => {
	await dispatchA?.stop();
	await dispatchB?.stop();
	await bed?.stop();
});

describe("the reconciliation sweep", () => {
	it("finds a ride whose hint was lost behind more than 5,000 older active rides, a page at a time", async () => {
		dispatchA = await startDispatch("dispatch-a");
		// 5,000 older active rides far away that dispatch already mirrors (nothing to do for them, never due for matching).
		await pg.query(
			`INSERT INTO orders (id, partner_id, rider_id, status, service_type, pickup, "drop", fare_paise, distance, duration, otp, webhook_url, created_at)
			 SELECT 'ord_filler' || i, $1, 'rdr_filler' || i, 'searching', 'cab', '{"lat":30.5,"lng":70.5}', '{"lat":30.52,"lng":70.5}', 10000, 2500, 600, '1234',
			        'https://partner.example.com/hooks', now() - interval '1 day' + i * interval '1 millisecond'
			 FROM generate_series(1, $2::int) AS i`,
			[partnerId, FILLERS],
		);
		await pg.query(
			`INSERT INTO dispatch_rides (order_id, service_type, pickup_lat, pickup_lng, drop_lat, drop_lng, state, order_status, next_match_at, created_at)
			 SELECT 'ord_filler' || i, 'cab', 30.5, 70.5, 30.52, 70.5, 'searching', 'searching', now() + interval '1 day', now() - interval '1 day'
			 FROM generate_series(1, $1::int) AS i`,
			[FILLERS],
		);
		try {
			// A new ride whose hint is lost: dispatch's row for it is gone (as if orders.created never arrived).
			const pickup = { lat: 23.1, lng: 79.1 };
			const lost = await book(pickup);
			await waitFor(
				"dispatch to mirror the ride",
				async () => (await pg.query("SELECT 1 FROM dispatch_rides WHERE order_id = $1", [lost.orderId])).rowCount === 1,
				STEP_MS,
			);
			await pg.query("DELETE FROM dispatch_rides WHERE order_id = $1", [lost.orderId]);
			const driver = await driverNear(dispatchA, pickup, 50);
			// Only the sweep can tell dispatch about the ride again: the driver gets its offer.
			const job = await offerFor(core.broker, driver.driverId, lost.orderId, STEP_MS).catch(async (err) => {
				const r = await pg.query(
					"SELECT order_id, state, order_status, mode, search_started_at, next_match_at, now() AS now, excluded_driver_ids FROM dispatch_rides WHERE order_id = $1",
					[lost.orderId],
				);
				const d = await pg.query("SELECT id, status, order_id, mode, lat, lng FROM drivers WHERE id = $1", [driver.driverId]);
				console.error("the lost ride and the driver when no offer came:", JSON.stringify(r.rows), JSON.stringify(d.rows));
				throw err;
			});
			expect(job.offer).toMatchObject({ orderId: lost.orderId });
			await ok(via(dispatchA, "dispatch.declineOffer", { driverId: driver.driverId, orderId: lost.orderId }));
			await ok(via(dispatchA, "dispatch.goOffline", { driverId: driver.driverId }));
		} finally {
			await pg.query("DELETE FROM dispatch_rides WHERE order_id LIKE 'ord_filler%'");
			await pg.query("DELETE FROM orders WHERE id LIKE 'ord_filler%'");
		}
	});
});

describe("OTP guessing", () => {
	it("counts tries per order across two dispatch instances: after 5 wrong ones the right OTP is refused until an operator unlocks it", async () => {
		dispatchA ??= await startDispatch("dispatch-a");
		dispatchB = await startDispatch("dispatch-b");
		const [a, b] = [dispatchA, dispatchB];
		const pickup = { lat: 23.6, lng: 79.6 };
		const driver = await driverNear(a, pickup, 50);
		const order = await arrivedRide(a, driver, pickup);
		const start = (n: TestNode, otp: string) => via(n, "dispatch.startRide", { driverId: driver.driverId, orderId: order.orderId, otp });

		// Five wrong tries, through both instances.
		for (const [k, n] of [a, a, a, b, b].entries()) expect(await start(n, wrongOtp(order.otp, k))).toMatchObject({ status: 422, code: "INVALID_OTP" });
		// Now the right one is refused too, through either instance, and the ride stays arrived.
		expect(await start(b, order.otp)).toMatchObject({ status: 409, code: "OTP_LOCKED" });
		expect(await start(a, order.otp)).toMatchObject({ status: 409, code: "OTP_LOCKED" });
		expect((await ok(call("orders.get", { orderId: order.orderId }))).status).toBe("arrived");
		expect((await ok<DriverJob>(via(b, "dispatch.driver", { driverId: driver.driverId }))).driver.wrongOtpCount).toBe(5);

		// An operator, having checked with the rider, unlocks it: the right OTP starts the ride.
		await ok(call("orders.unlockOtp", { orderId: order.orderId }));
		expect((await start(a, order.otp)).status).toBe(200);
		expect((await ok(call("orders.get", { orderId: order.orderId }))).status).toBe("started");
	});

	it("never grants more than 5 tries to concurrent guesses through both instances", async () => {
		const [a, b] = [dispatchA!, dispatchB!];
		const pickup = { lat: 24.1, lng: 80.1 };
		const driver = await driverNear(b, pickup, 50);
		const order = await arrivedRide(b, driver, pickup);
		const guesses = await Promise.all(
			Array.from({ length: 16 }, (_, k) =>
				via(k % 2 ? a : b, "dispatch.startRide", { driverId: driver.driverId, orderId: order.orderId, otp: wrongOtp(order.otp, k) }),
			),
		);
		expect(guesses.filter((g) => g.code === "INVALID_OTP")).toHaveLength(5);
		expect(guesses.filter((g) => g.code === "OTP_LOCKED")).toHaveLength(11);
		expect((await via(a, "dispatch.startRide", { driverId: driver.driverId, orderId: order.orderId, otp: order.otp })).code).toBe("OTP_LOCKED");
		// The driver can still give the ride up.
		expect((await via(a, "dispatch.dropOut", { driverId: driver.driverId, orderId: order.orderId, reason: "rider unknown" })).status).toBe(200);
	});
});

describe("surge gaming", () => {
	beforeAll(async () => {
		// One dispatch instance from here on: pricing's demand then comes from the index dispatch.runOnce settles.
		await dispatchB?.stop();
		dispatchB = undefined;
		dispatchA ??= await startDispatch("dispatch-a");
	});

	/** Two cab drivers 1.5 km away: supply for pricing, never offered these rides (search radius 300 m). */
	async function area(centre: Point): Promise<void> {
		await driverNear(dispatchA!, centre, 1500);
		await driverNear(dispatchA!, destinationPoint(centre, 180, 1500), 0);
		await waitFor(
			"two cab drivers in supply",
			async () => (await ok<SupplyDemandReply>(call("dispatch.supplyDemand", { point: centre }))).cab.available === 2,
			STEP_MS,
		);
	}
	const near = (centre: Point, i: number): Point => destinationPoint(centre, (i * 47) % 360, 50 + (i % 5) * 20);
	/** Settles what dispatch knows (events in flight, the sweep, its demand index) before a price is read. */
	const settle = () => ok(call("dispatch.runOnce", {}));

	it("leaves fares unchanged after 30 create-and-cancel calls", async () => {
		const centre = { lat: 24.6, lng: 80.6 };
		await area(centre);
		const before = await cabQuote(centre);
		expect(before.surge).toBe(1);
		for (let i = 0; i < 30; i++) {
			const order = await book(near(centre, i));
			await ok(call("orders.cancel", { orderId: order.orderId }, { partnerId }));
		}
		// The last cancels' hints may still be on their way to dispatch: demand must drop to none (it stayed at 23 when cancelled rides counted).
		await waitFor(
			"cancelled rides to leave demand",
			async () => {
				await settle();
				return (await ok<SupplyDemandReply>(call("dispatch.supplyDemand", { point: centre }))).cab.demand === 0;
			},
			STEP_MS,
		);
		expect((await ok<SupplyDemandReply>(call("dispatch.supplyDemand", { point: centre }))).cab).toMatchObject({ available: 2, demand: 0 });
		expect(await cabQuote(centre)).toEqual(before);
	});

	it("counts one partner's searching rides only up to its cap; other partners' still count", async () => {
		const centre = { lat: 25.1, lng: 81.1 };
		await area(centre);
		for (let i = 0; i < DEMAND_PER_PARTNER; i++) await book(near(centre, i));
		await settle();
		const atCap = await cabQuote(centre);
		expect(atCap.surge).toBe(1.5); // demand 3 over supply 2

		for (let i = DEMAND_PER_PARTNER; i < 30; i++) await book(near(centre, i));
		await settle();
		expect(await cabQuote(centre)).toEqual(atCap); // 30 searching rides of one partner move surge no further than 3

		for (let i = 0; i < 3; i++) await book(near(centre, 100 + i), otherPartnerId);
		await settle();
		expect((await cabQuote(centre)).surge).toBe(3); // 3 + 3 over 2
	});
});
