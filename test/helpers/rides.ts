import { randomInt } from "node:crypto";
import type { ServiceBroker } from "moleculer";
import { destinationPoint } from "../../lib/geo";
import type { Point, ServiceType } from "../../contracts/common";
import type { DriverJob, DriverMode, DriverView } from "../../contracts/dispatch";
import { waitFor } from "./wait";

/** A fresh Indian mobile number, so riders never collide across tests. */
export function randomPhone(prefix = "+9197"): string {
	return `${prefix}${String(randomInt(0, 100_000_000)).padStart(8, "0")}`;
}

/** A create-order body: a rider in Bengaluru with a short trip (about 2 km), so simulated rides finish quickly. */
export function rideRequest(webhookURL: string, n: number): Record<string, unknown> {
	const jitter = () => (randomInt(0, 2000) - 1000) / 100_000;
	return {
		user: { name: `Rider ${n}`, phone: randomPhone("+9198") },
		serviceType: n % 2 === 0 ? "cab" : "scooty",
		pickup: { lat: 12.9716 + jitter(), lng: 77.5946 + jitter(), address: `Pickup ${n}` },
		drop: { lat: 12.9616 + jitter(), lng: 77.6046 + jitter() },
		webhookURL,
		metadata: { partnerRef: `cluster-${n}` },
	};
}

/** A driver registered with dispatch and online `metres` east of `near`, heading towards it; a `test` driver (for test-mode rides) unless told. */
export async function onlineDriver(
	broker: ServiceBroker,
	near: Point,
	metres: number,
	serviceType: ServiceType = "cab",
	name = "Test Driver",
	mode: DriverMode = "test",
): Promise<DriverView> {
	const d = await broker.call<DriverView, unknown>("dispatch.register", {
		name,
		phone: randomPhone(),
		vehicleNumber: `KA01${randomInt(1000, 9999)}`,
		serviceType,
		mode,
	});
	const at = destinationPoint(near, 90, metres);
	return broker.call<DriverView, unknown>("dispatch.goOnline", { driverId: d.driverId, location: { lat: at.lat, lng: at.lng, heading: 270 } });
}

/** Waits until dispatch offers the ride to the driver; returns the driver's job with that offer. */
export function offerFor(broker: ServiceBroker, driverId: string, orderId: string, timeoutMs?: number): Promise<DriverJob> {
	return waitFor(
		`an offer of ${orderId} to ${driverId}`,
		async () => {
			const job = await broker.call<DriverJob, unknown>("dispatch.driver", { driverId });
			return job.offer?.orderId === orderId ? job : null;
		},
		timeoutMs,
	);
}

export interface BookedRide {
	orderId: string;
	otp: string;
	status: string;
}

/** A ride booked through orders.create for the partner, from `pickup` to a point 3 km north of it unless told. */
export function bookRide(
	broker: ServiceBroker,
	partnerId: string,
	pickup: Point,
	{ serviceType = "cab" as ServiceType, drop = destinationPoint(pickup, 0, 3000), webhookURL = "https://partner.example.com/hooks/rides" } = {},
): Promise<BookedRide> {
	return broker.call<BookedRide, unknown>(
		"orders.create",
		{ user: { name: "Asha Rao", phone: randomPhone() }, serviceType, pickup, drop, webhookURL },
		{ meta: { partnerId } },
	);
}
