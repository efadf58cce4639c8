import { randomInt } from "node:crypto";
import { offerFor, randomPhone } from "../../helpers/rides";
import { startBackoffTestbed, type BackoffTestbed } from "../../helpers/testbed";
import { sleep, waitFor } from "../../helpers/wait";
import { destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import type { DriverView } from "../../../contracts/dispatch";

/**
 * Matching is driven by events, with a backoff for the rest (issue 9): a ride
 * nobody could be offered is looked at again only after a long wait, capped
 * at its dispatch deadline — unless a driver comes within reach (online, or
 * moving near it), which wakes it at once. A driver far away causes no work
 * for the ride. The backoff here (60 s) is longer than the dispatch timeout
 * (15 s), so an offer at all proves the wake: without it the ride's next look
 * would be its deadline, where it ends `no_driver_found` (which a ride
 * nobody comes near still does, on time).
 */

const BACKOFF_MS = 60_000;
const TIMEOUT_MS = 15_000;
const CENTRE: Point = { lat: 26.8467, lng: 80.9462 }; // Lucknow

let bed: BackoffTestbed;
let partnerId: string;

beforeAll(async () => {
	bed = await startBackoffTestbed("dispatch-wake", { backoffMs: BACKOFF_MS, timeoutMs: TIMEOUT_MS });
	partnerId = bed.partnerId;
}, 60_000);

afterAll(async () => {
	await bed?.stop();
});

async function bookLive(pickup: Point): Promise<string> {
	const order = await bed.node.broker.call<{ orderId: string }, unknown>(
		"orders.create",
		{
			user: { name: "Asha Rao", phone: randomPhone() },
			serviceType: "cab",
			pickup,
			drop: destinationPoint(pickup, 0, 2000),
			webhookURL: "https://partner.example.com/hooks",
		},
		{ meta: { partnerId, mode: "live" } },
	);
	return order.orderId;
}

/** The ride's next look, once its first matching attempt found nobody (then it is in the future, capped at the deadline). */
async function backedOff(orderId: string): Promise<{ next: number; deadline: number }> {
	return waitFor(`${orderId} backed off`, async () => {
		const r = await bed.pg.query(
			`SELECT extract(epoch FROM next_match_at) * 1000 AS next, extract(epoch FROM search_started_at) * 1000 + $2::double precision AS deadline
			 FROM dispatch_rides WHERE order_id = $1 AND next_match_at > now()`,
			[orderId, TIMEOUT_MS],
		);
		return r.rows[0] ? { next: Number(r.rows[0].next), deadline: Number(r.rows[0].deadline) } : null;
	});
}

const nextMatchAt = async (orderId: string): Promise<number> =>
	Number((await bed.pg.query("SELECT extract(epoch FROM next_match_at) * 1000 AS n FROM dispatch_rides WHERE order_id = $1", [orderId])).rows[0].n);

async function liveDriver(at: Point): Promise<DriverView> {
	const broker = bed.node.broker;
	const d = await broker.call<DriverView, unknown>("dispatch.register", {
		name: "Live Driver",
		phone: randomPhone(),
		vehicleNumber: `UP32${randomInt(1000, 9999)}`,
		serviceType: "cab",
	});
	return broker.call<DriverView, unknown>("dispatch.goOnline", { driverId: d.driverId, location: { lat: at.lat, lng: at.lng, heading: 0 } });
}

it("a backed-off ride is offered at once to a driver coming online near it; a far driver causes no work for it", async () => {
	const orderId = await bookLive(CENTRE);
	const { next, deadline } = await backedOff(orderId);
	// The backoff (60 s) is capped at the ride's dispatch deadline.
	expect(Math.abs(next - deadline)).toBeLessThan(5);

	// 40 km away: outside the search radius, the ride is not touched.
	const far = await liveDriver(destinationPoint(CENTRE, 90, 40_000));
	expect(far.status).toBe("available");
	await sleep(500);
	expect(await nextMatchAt(orderId)).toBe(next);
	expect((await bed.node.broker.call<{ offers: unknown[] }, unknown>("dispatch.ride", { orderId })).offers).toHaveLength(0);

	// 800 m away: the ride is woken and offered to this driver, long before its backoff would have ended.
	const near = await liveDriver(destinationPoint(CENTRE, 90, 800));
	const job = await offerFor(bed.node.broker, near.driverId, orderId, TIMEOUT_MS);
	expect(job.offer?.orderId).toBe(orderId);
	await bed.node.broker.call("dispatch.declineOffer", { driverId: near.driverId, orderId });
}, 60_000);

it("a driver moving near a backed-off ride wakes it; a ride nobody comes near ends no_driver_found at its timeout", async () => {
	const pickup = destinationPoint(CENTRE, 180, 60_000);
	const lonely = destinationPoint(CENTRE, 0, 60_000);
	const orderId = await bookLive(pickup);
	const lonelyId = await bookLive(lonely);
	await backedOff(orderId);
	await backedOff(lonelyId);

	// Online 30 km away (no work for the ride), then driving to 1 km from its pickup.
	const driver = await liveDriver(destinationPoint(pickup, 270, 30_000));
	const before = await nextMatchAt(orderId);
	await sleep(300);
	expect(await nextMatchAt(orderId)).toBe(before);
	const near = destinationPoint(pickup, 270, 1000);
	await bed.node.broker.call("dispatch.reportLocation", { driverId: driver.driverId, location: { lat: near.lat, lng: near.lng, heading: 90 } });
	await offerFor(bed.node.broker, driver.driverId, orderId, TIMEOUT_MS);

	// Nobody near the other ride: it ends at its deadline although its backoff is longer.
	await waitFor(
		`${lonelyId} no_driver_found`,
		async () => (await bed.node.broker.call<{ status: string }, unknown>("orders.get", { orderId: lonelyId })).status === "no_driver_found",
		TIMEOUT_MS + 20_000,
		200,
	);
}, 90_000);
