import type { Client } from "pg";
import { TELEPORTING_DRIVERS } from "../../helpers/node";
import { callAction } from "../../helpers/broker";
import { bookRide, offerFor as offered, onlineDriver, randomPhone, type BookedRide } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { createPartner } from "../../helpers/webhooks";
import { sleep, waitFor } from "../../helpers/wait";
import { destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import type { DriverJob, DriverView, SupplyDemandReply } from "../../../contracts/dispatch";

/**
 * Dispatch in `live` mode (nothing moves without driver actions) against the
 * server PostgreSQL with the real partners, riders, pricing and orders
 * services: every path of the ride state machine driven through the driver
 * actions, checked in the `ride_events` rows and their order.
 *
 * Each test works in its own area (far from the others'), so drivers of one
 * test are never offered another test's rides.
 */

const OFFER_TIMEOUT_MS = 1500;
const DISPATCH_TIMEOUT_MS = 5000;

let bed: Testbed;
let pg: Client;
let partnerId: string;

const call = <T = any>(action: string, params: unknown, meta?: Record<string, unknown>) =>
	callAction<T>(bed.node.broker, action, params, meta ? { meta } : undefined);

async function ok<T = any>(action: string, params: unknown, meta?: Record<string, unknown>): Promise<T> {
	const res = await call<T>(action, params, meta);
	if (res.status !== 200) throw new Error(`${action} → ${res.status} ${res.code}`);
	return res.body;
}

/** A separate area per test: ~30 km apart, so searches (5 km) never cross. */
let areaCount = 0;
function area(): Point {
	areaCount += 1;
	return { lat: 20 + areaCount * 0.3, lng: 78 };
}

const driver = (near: Point, metres: number, serviceType: "cab" | "scooty" = "cab"): Promise<DriverView> =>
	onlineDriver(bed.node.broker, near, metres, serviceType);
const createOrder = (pickup: Point, serviceType: "cab" | "scooty" = "cab"): Promise<BookedRide> =>
	bookRide(bed.node.broker, partnerId, pickup, { serviceType });
const offerFor = (driverId: string, orderId: string, timeoutMs?: number): Promise<DriverJob> => offered(bed.node.broker, driverId, orderId, timeoutMs);

async function orderStatus(orderId: string): Promise<string> {
	return (await ok<{ status: string }>("orders.get", { orderId })).status;
}

interface EventRow {
	sequence: number;
	kind: string;
	status: string;
	payload: { driver?: { id: string }; eta?: number; location?: Point; sequence: number; status: string };
}

async function events(orderId: string): Promise<EventRow[]> {
	const { rows } = await pg.query<EventRow>("SELECT sequence, kind, status, payload FROM ride_events WHERE order_id = $1 ORDER BY sequence", [orderId]);
	return rows;
}

/** Status events only, in order. */
async function statuses(orderId: string): Promise<string[]> {
	return (await events(orderId)).filter((e) => e.kind === "status").map((e) => e.status);
}

function expectConsecutive(rows: EventRow[]): void {
	rows.forEach((r, i) => {
		expect(r.sequence).toBe(i + 1);
		expect(r.payload.sequence).toBe(r.sequence);
		expect(r.payload.status).toBe(r.status);
	});
}

async function driverState(driverId: string): Promise<DriverView> {
	return (await ok<DriverJob>("dispatch.driver", { driverId })).driver;
}

/** Accepts the ride's offer with `d` and returns when the order is accepted. */
async function acceptWith(d: DriverView, order: BookedRide): Promise<void> {
	await offerFor(d.driverId, order.orderId);
	const job = await ok<DriverJob>("dispatch.acceptOffer", { driverId: d.driverId, orderId: order.orderId });
	expect(job.ride).toMatchObject({ orderId: order.orderId, status: "accepted" });
}

beforeAll(async () => {
	bed = await startTestbed("dispatch", {
		services: ["partners", "riders", "pricing", "orders", "dispatch"],
		env: {
			...TELEPORTING_DRIVERS,
			FLEET_MODE: "live",
			DISPATCH_OFFER_TIMEOUT_MS: String(OFFER_TIMEOUT_MS),
			DISPATCH_TIMEOUT_MS: String(DISPATCH_TIMEOUT_MS),
			DISPATCH_TICK_MS: "50",
			DISPATCH_RETRY_MS: "100",
			DISPATCH_SWEEP_MS: "1000",
			LOCATION_INTERVAL_MS: "300",
		},
	});
	pg = bed.pg;
	partnerId = (await createPartner(bed.node.broker, "Dispatch test partner")).partnerId;
});

afterAll(async () => {
	await bed?.stop();
});

describe("dispatch in live mode", () => {
	it("drives the happy path with the driver actions: offer, accept, location events with eta, arrive, wrong OTP counted, start, drop", async () => {
		const pickup = area();
		const far = await driver(pickup, 2500);
		const near = await driver(pickup, 800);
		const order = await createOrder(pickup);
		expect(order.status).toBe("searching");

		// The nearest available driver gets the offer; the farther one does not.
		const job = await offerFor(near.driverId, order.orderId);
		expect(job.driver.status).toBe("offered");
		expect(job.offer!.distanceM).toBeGreaterThan(700);
		expect(job.offer!.distanceM).toBeLessThan(900);
		expect((await driverState(far.driverId)).status).toBe("available");

		await ok("dispatch.acceptOffer", { driverId: near.driverId, orderId: order.orderId });
		const accepted = await ok<any>("orders.get", { orderId: order.orderId });
		expect(accepted.status).toBe("accepted");
		expect(accepted.driver).toMatchObject({ id: near.driverId, name: "Test Driver", phone: near.phone, vehicleNumber: near.vehicleNumber });

		// While driving to the pickup, location events with an eta to the pickup.
		await waitFor("location events while accepted", async () => (await events(order.orderId)).filter((e) => e.kind === "location").length >= 2);
		const moved = destinationPoint(pickup, 90, 300);
		await ok("dispatch.reportLocation", { driverId: near.driverId, location: { lat: moved.lat, lng: moved.lng, heading: 270 } });
		await waitFor("a location event from the new position", async () =>
			(await events(order.orderId)).some((e) => e.kind === "location" && Math.abs((e.payload.location?.lng ?? 0) - moved.lng) < 1e-9),
		);
		const toPickup = (await events(order.orderId)).filter((e) => e.kind === "location");
		for (const e of toPickup) expect(typeof e.payload.eta).toBe("number");
		// 300 m (straight) from the pickup × 1.3 at 20 km/h ≈ 71 s; 800 m ≈ 188 s.
		const lastEta = toPickup[toPickup.length - 1].payload.eta!;
		expect(lastEta).toBeGreaterThan(60);
		expect(lastEta).toBeLessThan(80);
		expect(toPickup[0].payload.eta!).toBeGreaterThan(lastEta);

		await ok("dispatch.arrive", { driverId: near.driverId, orderId: order.orderId, location: { lat: pickup.lat, lng: pickup.lng, heading: 270 } });
		expect(await orderStatus(order.orderId)).toBe("arrived");

		const wrongOtp = order.otp === "0000" ? "1111" : "0000";
		const refused = await call("dispatch.startRide", { driverId: near.driverId, orderId: order.orderId, otp: wrongOtp });
		expect(refused).toMatchObject({ status: 422, code: "INVALID_OTP" });
		expect(await orderStatus(order.orderId)).toBe("arrived");
		expect((await driverState(near.driverId)).wrongOtpCount).toBe(1);

		await ok("dispatch.startRide", { driverId: near.driverId, orderId: order.orderId, otp: order.otp });
		expect(await orderStatus(order.orderId)).toBe("started");
		await waitFor("location events while started", async () => {
			const rows = await events(order.orderId);
			const startedAt = rows.findIndex((e) => e.status === "started");
			return rows.slice(startedAt + 1).some((e) => e.kind === "location");
		});
		await ok("dispatch.dropRide", { driverId: near.driverId, orderId: order.orderId });
		expect(await orderStatus(order.orderId)).toBe("dropped");
		expect(await driverState(near.driverId)).toMatchObject({ status: "available", orderId: null });

		const rows = await events(order.orderId);
		expectConsecutive(rows);
		expect(rows.filter((e) => e.kind === "status").map((e) => e.status)).toEqual(["accepted", "arrived", "started", "dropped"]);
		const idx = (s: string) => rows.findIndex((e) => e.status === s);
		// Location events only while moving: between accepted and arrived, and between started and dropped.
		rows.forEach((e, i) => {
			if (e.kind !== "location") return;
			expect((i > idx("accepted") && i < idx("arrived")) || (i > idx("started") && i < idx("dropped"))).toBe(true);
		});
		const afterStart = rows.filter((e, i) => e.kind === "location" && i > idx("started"));
		// After started the eta is to the drop (3 km straight ≈ 702 s), not to the pickup.
		expect(afterStart[0].payload.eta!).toBeGreaterThan(600);
		expect(rows[idx("accepted")].payload.driver?.id).toBe(near.driverId);
		// No more location events once dropped.
		const count = rows.length;
		await sleep(700);
		expect((await events(order.orderId)).length).toBe(count);
	});

	it.each(["searching", "accepted", "arrived", "started"] as const)("frees the driver when the partner cancels in %s", async (state) => {
		const pickup = area();
		const d = await driver(pickup, 500);
		const order = await createOrder(pickup);
		await offerFor(d.driverId, order.orderId);
		if (state !== "searching") {
			await ok("dispatch.acceptOffer", { driverId: d.driverId, orderId: order.orderId });
			if (state !== "accepted") await ok("dispatch.arrive", { driverId: d.driverId, orderId: order.orderId });
			if (state === "started") await ok("dispatch.startRide", { driverId: d.driverId, orderId: order.orderId, otp: order.otp });
		}
		expect(await orderStatus(order.orderId)).toBe(state);

		await ok("orders.cancel", { orderId: order.orderId, reason: "changed plans" }, { partnerId });
		await waitFor("the driver to be free", async () => (await driverState(d.driverId)).status === "available");
		expect(await driverState(d.driverId)).toMatchObject({ status: "available", orderId: null });
		const ride = await ok<any>("dispatch.ride", { orderId: order.orderId });
		expect(ride.phase).toBe("closed");
		expect(ride.offers.every((o: { state: string }) => o.state !== "pending")).toBe(true);

		const expected = { searching: [], accepted: ["accepted"], arrived: ["accepted", "arrived"], started: ["accepted", "arrived", "started"] }[state];
		expect(await statuses(order.orderId)).toEqual([...expected, "customer_cancelled"]);
		expectConsecutive(await events(order.orderId));
		// The driver can no longer act on the ride.
		const late =
			state === "searching"
				? await call("dispatch.acceptOffer", { driverId: d.driverId, orderId: order.orderId })
				: await call("dispatch.dropRide", { driverId: d.driverId, orderId: order.orderId });
		expect(late).toMatchObject({ status: 409, code: "CONFLICT" });
		// And is offered the next ride.
		const next = await createOrder(pickup);
		await offerFor(d.driverId, next.orderId);
		await ok("orders.cancel", { orderId: next.orderId }, { partnerId });
	});

	it("never gives a ride two drivers when a cancel races an accept", async () => {
		const pickup = area();
		const d = await driver(pickup, 400);
		for (let i = 0; i < 6; i++) {
			const order = await createOrder(pickup);
			await offerFor(d.driverId, order.orderId);
			const [accept, cancel] = await Promise.all([
				call("dispatch.acceptOffer", { driverId: d.driverId, orderId: order.orderId }),
				call("orders.cancel", { orderId: order.orderId }, { partnerId }),
			]);
			expect(cancel.status).toBe(200);
			expect([200, 409]).toContain(accept.status);
			expect(await orderStatus(order.orderId)).toBe("customer_cancelled");
			const s = await statuses(order.orderId);
			expect(s).toEqual(accept.status === 200 ? ["accepted", "customer_cancelled"] : ["customer_cancelled"]);
			await waitFor("the driver to be free again", async () => (await driverState(d.driverId)).status === "available");
		}
		const { rows } = await pg.query("SELECT count(*)::int AS n FROM drivers WHERE order_id IS NOT NULL");
		expect(rows[0].n).toBe(0);
	});

	it("re-dispatches after a drop-out: the partner sees a new accepted with the new driver", async () => {
		const pickup = area();
		const first = await driver(pickup, 300);
		const second = await driver(pickup, 1500);
		const order = await createOrder(pickup);
		await acceptWith(first, order);
		await ok("dispatch.arrive", { driverId: first.driverId, orderId: order.orderId });

		// Only the ride's driver can drop out of it.
		expect(await call("dispatch.dropOut", { driverId: second.driverId, orderId: order.orderId })).toMatchObject({ status: 409 });
		await ok("dispatch.dropOut", { driverId: first.driverId, orderId: order.orderId, reason: "flat tyre" });
		expect(await orderStatus(order.orderId)).toBe("searching");
		expect(await driverState(first.driverId)).toMatchObject({ status: "available", orderId: null });

		// Dispatched again, to the other driver (the one who dropped out is not asked again).
		await acceptWith(second, order);
		const ride = await ok<any>("dispatch.ride", { orderId: order.orderId });
		expect(ride).toMatchObject({ phase: "assigned", driverId: second.driverId, dropOuts: 1 });
		expect(ride.excludedDriverIds).toContain(first.driverId);
		await ok("dispatch.arrive", { driverId: second.driverId, orderId: order.orderId });
		await ok("dispatch.startRide", { driverId: second.driverId, orderId: order.orderId, otp: order.otp });
		await ok("dispatch.dropRide", { driverId: second.driverId, orderId: order.orderId });

		const rows = await events(order.orderId);
		expectConsecutive(rows);
		const statusRows = rows.filter((e) => e.kind === "status");
		expect(statusRows.map((e) => e.status)).toEqual(["accepted", "arrived", "accepted", "arrived", "started", "dropped"]);
		expect(statusRows[0].payload.driver?.id).toBe(first.driverId);
		expect(statusRows[2].payload.driver?.id).toBe(second.driverId);
		// A drop-out after the start is not allowed.
		expect((await ok<any>("orders.get", { orderId: order.orderId })).driver.id).toBe(second.driverId);
	});

	it("refuses a drop-out once the ride started", async () => {
		const pickup = area();
		const d = await driver(pickup, 300);
		const order = await createOrder(pickup);
		await acceptWith(d, order);
		await ok("dispatch.arrive", { driverId: d.driverId, orderId: order.orderId });
		await ok("dispatch.startRide", { driverId: d.driverId, orderId: order.orderId, otp: order.otp });
		expect(await call("dispatch.dropOut", { driverId: d.driverId, orderId: order.orderId })).toMatchObject({ status: 409, code: "INVALID_TRANSITION" });
		expect(await orderStatus(order.orderId)).toBe("started");
		// Nor may a driver arrive twice, or start before arriving.
		expect(await call("dispatch.arrive", { driverId: d.driverId, orderId: order.orderId })).toMatchObject({ status: 409 });
		await ok("dispatch.dropRide", { driverId: d.driverId, orderId: order.orderId });
	});

	it("offers the next driver when one declines and when one does not answer in time", async () => {
		const pickup = area();
		const a = await driver(pickup, 200);
		const b = await driver(pickup, 900);
		const c = await driver(pickup, 1800);
		const order = await createOrder(pickup);
		await offerFor(a.driverId, order.orderId);
		await ok("dispatch.declineOffer", { driverId: a.driverId, orderId: order.orderId });
		expect((await driverState(a.driverId)).status).toBe("available");
		await offerFor(b.driverId, order.orderId);
		// b lets the offer run out.
		await offerFor(c.driverId, order.orderId, OFFER_TIMEOUT_MS + 5000);
		expect((await driverState(b.driverId)).status).toBe("available");
		expect(await call("dispatch.acceptOffer", { driverId: b.driverId, orderId: order.orderId })).toMatchObject({ status: 409, code: "CONFLICT" });
		await ok("dispatch.acceptOffer", { driverId: c.driverId, orderId: order.orderId });
		const ride = await ok<any>("dispatch.ride", { orderId: order.orderId });
		expect(ride.offers.map((o: any) => [o.driverId, o.state])).toEqual([
			[a.driverId, "declined"],
			[b.driverId, "expired"],
			[c.driverId, "accepted"],
		]);
		await ok("orders.cancel", { orderId: order.orderId }, { partnerId });
	});

	it("declines a pending offer when the driver goes offline, and offers the ride to the next driver", async () => {
		const pickup = area();
		const a = await driver(pickup, 200);
		const b = await driver(pickup, 1200);
		const order = await createOrder(pickup);
		await offerFor(a.driverId, order.orderId);
		expect((await ok<DriverView>("dispatch.goOffline", { driverId: a.driverId })).status).toBe("offline");
		await offerFor(b.driverId, order.orderId);
		const ride = await ok<any>("dispatch.ride", { orderId: order.orderId });
		expect(ride.offers.map((o: any) => [o.driverId, o.state])).toEqual([
			[a.driverId, "declined"],
			[b.driverId, "pending"],
		]);
		await ok("orders.cancel", { orderId: order.orderId }, { partnerId });
		await waitFor("b to be free", async () => (await driverState(b.driverId)).status === "available");
		expect((await ok<any>("dispatch.ride", { orderId: order.orderId })).offers[1].state).toBe("cancelled");
	});

	it("ends a ride as no_driver_found after the dispatch timeout", async () => {
		const pickup = area();
		// A driver of the other type, and one too far away, do not count.
		await driver(pickup, 300, "scooty");
		await driver(pickup, 8000, "cab");
		const order = await createOrder(pickup, "cab");
		await waitFor("no_driver_found", async () => (await orderStatus(order.orderId)) === "no_driver_found", DISPATCH_TIMEOUT_MS + 10_000);
		expect(await statuses(order.orderId)).toEqual(["no_driver_found"]);
		expectConsecutive(await events(order.orderId));
		expect((await ok<any>("dispatch.ride", { orderId: order.orderId })).offers).toEqual([]);
	});

	it("answers supplyDemand from the index: eta of the nearest driver, available drivers, demand", async () => {
		const pickup = area();
		const empty = await ok<SupplyDemandReply>("dispatch.supplyDemand", { point: pickup });
		expect(empty).toEqual({ scooty: { eta: null, available: 0, demand: 0 }, cab: { eta: null, available: 0, demand: 0 } });
		await driver(pickup, 1000, "scooty");
		await driver(pickup, 2000, "scooty");
		const order = await createOrder(destinationPoint(pickup, 180, 500), "cab");
		const sd = await waitFor("demand to show", async () => {
			const r = await ok<SupplyDemandReply>("dispatch.supplyDemand", { point: pickup });
			return r.cab.demand >= 1 ? r : null;
		});
		// 1000 m × 1.3 at 24 km/h = 195 s
		expect(sd.scooty).toMatchObject({ eta: 195, available: 2 });
		expect(sd.cab).toMatchObject({ eta: null, available: 0, demand: 1 });
		await ok("orders.cancel", { orderId: order.orderId }, { partnerId });
		// Pricing's estimate carries dispatch's eta.
		const estimate = await ok<any>("pricing.estimate", { pickup, drop: destinationPoint(pickup, 0, 4000), serviceType: "scooty" }, { partnerId });
		expect(estimate.quotes[0].eta).toBe(195);
	});

	it("guards the driver actions: validation, unknown drivers, idempotent registration, no going offline on a ride", async () => {
		expect(await call("dispatch.register", { name: "X", phone: "12345", vehicleNumber: "KA01", serviceType: "cab" })).toMatchObject({ status: 400 });
		expect(await call("dispatch.register", { name: "X", phone: "+919800000000", vehicleNumber: "KA01", serviceType: "bus" })).toMatchObject({
			status: 400,
		});
		expect(await call("dispatch.goOnline", { driverId: "drv_unknown", location: { lat: 12, lng: 77 } })).toMatchObject({
			status: 404,
			code: "DRIVER_NOT_FOUND",
		});
		expect(await call("dispatch.goOnline", { driverId: "drv_unknown", location: { lat: 91, lng: 77 } })).toMatchObject({ status: 400 });

		const p = randomPhone();
		const first = await ok<DriverView>("dispatch.register", { name: "Same", phone: p, vehicleNumber: "KA01ZZ0001", serviceType: "scooty" });
		const again = await ok<DriverView>("dispatch.register", { name: "Same", phone: p, vehicleNumber: "KA01ZZ0001", serviceType: "scooty" });
		expect(again.driverId).toBe(first.driverId);
		expect(first.status).toBe("offline");
		// A driver is live unless registered as test (the simulated fleet is test); the mode is kept on re-registration.
		expect(first.mode).toBe("live");
		expect(
			(await ok<DriverView>("dispatch.register", { name: "Same", phone: p, vehicleNumber: "KA01ZZ0001", serviceType: "scooty", mode: "test" })).mode,
		).toBe("live");
		expect(
			(await ok<DriverView>("dispatch.register", { name: "Sim", phone: randomPhone(), vehicleNumber: "SIM1", serviceType: "cab", simulated: true })).mode,
		).toBe("test");
		const tester = await ok<DriverView>("dispatch.register", {
			name: "Tester",
			phone: randomPhone(),
			vehicleNumber: "KA01ZZ0002",
			serviceType: "cab",
			mode: "test",
		});
		expect(tester).toMatchObject({ mode: "test", simulated: false });
		expect(await call("dispatch.register", { name: "X", phone: randomPhone(), vehicleNumber: "KA01", serviceType: "cab", mode: "prod" })).toMatchObject({
			status: 400,
		});
		expect(await call("dispatch.supplyDemand", { point: { lat: 12.97, lng: 77.59 }, mode: "prod" })).toMatchObject({ status: 400 });
		const testDrivers = await ok<DriverView[]>("dispatch.listDrivers", { mode: "test", limit: 1000 });
		expect(testDrivers.some((x) => x.driverId === tester.driverId)).toBe(true);
		expect(testDrivers.every((x) => x.mode === "test")).toBe(true);

		const pickup = area();
		const d = await driver(pickup, 300);
		const order = await createOrder(pickup);
		await acceptWith(d, order);
		expect(await call("dispatch.goOffline", { driverId: d.driverId })).toMatchObject({ status: 409, code: "DRIVER_NOT_AVAILABLE" });
		await ok("orders.cancel", { orderId: order.orderId }, { partnerId });
		await waitFor("the driver to be free", async () => (await driverState(d.driverId)).status === "available");
		expect((await ok<DriverView>("dispatch.goOffline", { driverId: d.driverId })).status).toBe("offline");
		// An offline driver is not offered rides.
		const next = await createOrder(pickup);
		await sleep(500);
		expect((await driverState(d.driverId)).status).toBe("offline");
		expect((await ok<any>("dispatch.ride", { orderId: next.orderId })).offers).toEqual([]);
		await ok("orders.cancel", { orderId: next.orderId }, { partnerId });
	});
});
