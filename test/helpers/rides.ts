import { randomInt } from "node:crypto";

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
