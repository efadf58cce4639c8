import { freePort } from "../../helpers/http";
import { TELEPORTING_DRIVERS } from "../../helpers/node";
import { bookRide, offerFor, onlineDriver } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { createPartner } from "../../helpers/webhooks";
import type { Point } from "../../../contracts/common";
import type { DriverJob, DriverView } from "../../../contracts/dispatch";

/**
 * Dispatch's Prometheus figures (docs/OPERATIONS.md, "Metrics") move with
 * real rides: live mode, real orders/pricing/riders/partners, metrics on.
 * One ride is declined by one driver and taken by another (wrong OTP once,
 * then started and dropped); another is left unanswered until its offer
 * expires and the ride ends as no_driver_found.
 */

const OFFER_TIMEOUT_MS = 1000;
const DISPATCH_TIMEOUT_MS = 4000;

let bed: Testbed;
let partnerId: string;

async function ok<T = any>(action: string, params: unknown, meta?: Record<string, unknown>): Promise<T> {
	return bed.node.broker.call<T, unknown>(action, params, meta ? { meta } : undefined);
}

const driver = (near: Point, metres: number): Promise<DriverView> => onlineDriver(bed.node.broker, near, metres, "cab", "Metrics Driver");
const createOrder = (pickup: Point) => bookRide(bed.node.broker, partnerId, pickup);

/** A metric's value for these labels (0 when nothing was counted yet). */
function valueOf(name: string, labels: Record<string, string>): number {
	const metric = bed.node.broker.metrics.getMetric(name);
	if (!metric) throw new Error(`metric ${name} is not registered`);
	return (metric.get(labels) as { value?: number } | null)?.value ?? 0;
}

beforeAll(async () => {
	bed = await startTestbed("dispatch_metrics", {
		services: ["partners", "riders", "pricing", "orders", "dispatch"],
		env: {
			...TELEPORTING_DRIVERS,
			FLEET_MODE: "live",
			METRICS_PORT: String(await freePort()),
			DISPATCH_OFFER_TIMEOUT_MS: String(OFFER_TIMEOUT_MS),
			DISPATCH_TIMEOUT_MS: String(DISPATCH_TIMEOUT_MS),
			DISPATCH_TICK_MS: "50",
			DISPATCH_RETRY_MS: "100",
			DISPATCH_SWEEP_MS: "1000",
			DISPATCH_INDEX_REFRESH_MS: "200",
		},
	});
	partnerId = (await createPartner(bed.node.broker, "Dispatch metrics partner")).partnerId;
});

afterAll(async () => {
	await bed?.stop();
});

it("counts offers by outcome, matched and no_driver_found rides, wrong OTPs, the time to a driver, and drivers by status", async () => {
	const cab = { service_type: "cab" };
	expect(bed.node.broker.isMetricsEnabled()).toBe(true);
	expect(valueOf("dispatch.offers.made.total", cab)).toBe(0);

	// Ride 1: the nearest driver declines, the next one takes it.
	const here = { lat: 23.1, lng: 79.2 };
	const near = await driver(here, 500);
	const next = await driver(here, 1500);
	const ride = await createOrder(here);
	await offerFor(bed.node.broker, near.driverId, ride.orderId);
	await ok("dispatch.declineOffer", { driverId: near.driverId, orderId: ride.orderId });
	await offerFor(bed.node.broker, next.driverId, ride.orderId);
	await ok("dispatch.acceptOffer", { driverId: next.driverId, orderId: ride.orderId });
	await ok("dispatch.arrive", { driverId: next.driverId, orderId: ride.orderId });
	const wrongOtp = ride.otp === "0000" ? "1111" : "0000";
	await expect(ok("dispatch.startRide", { driverId: next.driverId, orderId: ride.orderId, otp: wrongOtp })).rejects.toMatchObject({ type: "INVALID_OTP" });
	await ok("dispatch.startRide", { driverId: next.driverId, orderId: ride.orderId, otp: ride.otp });
	const dropped = await ok<DriverJob>("dispatch.dropRide", { driverId: next.driverId, orderId: ride.orderId });
	expect(dropped.ride?.status).toBe("dropped");

	// Ride 2, 40 km away: its only driver never answers; the offer expires, then the ride ends.
	const there = { lat: 23.5, lng: 79.2 };
	const silent = await driver(there, 700);
	const lonely = await createOrder(there);
	await offerFor(bed.node.broker, silent.driverId, lonely.orderId);
	await waitFor(
		"no_driver_found",
		async () => (await ok<{ status: string }>("orders.get", { orderId: lonely.orderId })).status === "no_driver_found",
		DISPATCH_TIMEOUT_MS + 15_000,
	);

	expect(valueOf("dispatch.offers.made.total", cab)).toBe(3);
	expect(valueOf("dispatch.offers.ended.total", { outcome: "declined", ...cab })).toBe(1);
	expect(valueOf("dispatch.offers.ended.total", { outcome: "accepted", ...cab })).toBe(1);
	expect(valueOf("dispatch.offers.ended.total", { outcome: "expired", ...cab })).toBe(1);
	expect(valueOf("dispatch.rides.matched.total", cab)).toBe(1);
	expect(valueOf("dispatch.rides.no_driver_found.total", cab)).toBe(1);
	expect(valueOf("dispatch.otp.wrong.total", cab)).toBe(1);
	const matchTime = bed.node.broker.metrics.getMetric("dispatch.match.time")!.get(cab) as { count?: number; sum?: number } | null;
	expect(matchTime?.count).toBe(1);
	expect(matchTime?.sum).toBeGreaterThanOrEqual(0);

	// All three drivers are free again; the gauge is re-read from the table every index refresh.
	await waitFor("the driver gauge", () => valueOf("dispatch.drivers.count", { status: "available", ...cab }) === 3);
	expect(valueOf("dispatch.drivers.count", { status: "on_trip", ...cab })).toBe(0);
	expect(valueOf("dispatch.drivers.count", { status: "available", service_type: "scooty" })).toBe(0);
});
