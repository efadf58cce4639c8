import { randomInt } from "node:crypto";
import { offerFor, randomPhone } from "../../helpers/rides";
import { startBackoffTestbed, type BackoffTestbed } from "../../helpers/testbed";
import { sleep, waitFor } from "../../helpers/wait";
import { destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import type { DriverJob, DriverMode, DriverView } from "../../../contracts/dispatch";
import { ORDER_EVENTS, type InternalOrder, type OrderCreatedEvent } from "../../../contracts/orders";

/**
 * Issue 9's cheaper dispatch work per ride, and what it must not change:
 * - a new ride is mirrored from the `orders.created` snapshot, without asking
 *   `orders.get`; a late `orders.created` never reopens a ride that ended
 *   first (the tombstone);
 * - due rides nobody is near are backed off in bulk by the statement that
 *   finds them, while a ride with a driver of its own mode in reach is still
 *   offered at once, in the same pass. A driver of the other mode, or one the
 *   ride excluded, is nobody for it: nothing crosses modes.
 * The backoff (60 s) is longer than the dispatch timeout (20 s), so a ride
 * backed off sits at its deadline and an offer proves it was matched, not retried.
 */

const BACKOFF_MS = 60_000;
const TIMEOUT_MS = 20_000;
const CENTRE: Point = { lat: 23.0225, lng: 72.5714 }; // Ahmedabad

let bed: BackoffTestbed;
let partnerId: string;

beforeAll(async () => {
	bed = await startBackoffTestbed("dispatch-batch", { backoffMs: BACKOFF_MS, timeoutMs: TIMEOUT_MS });
	partnerId = bed.partnerId;
}, 60_000);

afterAll(async () => {
	jest.restoreAllMocks();
	await bed?.stop();
});

async function book(pickup: Point, mode: DriverMode = "live", metadata?: Record<string, unknown>): Promise<InternalOrder> {
	const created = await bed.node.broker.call<{ orderId: string }, unknown>(
		"orders.create",
		{
			user: { name: "Asha Rao", phone: randomPhone() },
			serviceType: "cab",
			pickup,
			drop: destinationPoint(pickup, 0, 2000),
			webhookURL: "https://partner.example.com/hooks",
			...(metadata ? { metadata } : {}),
		},
		{ meta: { partnerId, mode } },
	);
	return bed.node.broker.call<InternalOrder, unknown>("orders.get", { orderId: created.orderId });
}

async function driverAt(at: Point, mode: DriverMode): Promise<DriverView> {
	const broker = bed.node.broker;
	const d = await broker.call<DriverView, unknown>("dispatch.register", {
		name: "Batch Driver",
		phone: randomPhone(),
		vehicleNumber: `GJ01${randomInt(1000, 9999)}`,
		serviceType: "cab",
		mode,
	});
	return broker.call<DriverView, unknown>("dispatch.goOnline", { driverId: d.driverId, location: { lat: at.lat, lng: at.lng, heading: 0 } });
}

const mirror = async (orderId: string) => (await bed.pg.query("SELECT * FROM dispatch_rides WHERE order_id = $1", [orderId])).rows[0];
const offersOf = async (orderId: string): Promise<number> =>
	Number((await bed.pg.query("SELECT count(*) AS n FROM dispatch_offers WHERE order_id = $1", [orderId])).rows[0].n);

/** The ride's first look found nobody: its next look is in the future (at its deadline, the backoff being longer). */
const backedOff = (orderId: string) =>
	waitFor(
		`${orderId} backed off`,
		async () =>
			(await bed.pg.query("SELECT 1 FROM dispatch_rides WHERE order_id = $1 AND state = 'searching' AND next_match_at > now()", [orderId])).rowCount ===
			1,
	);

it("mirrors a new ride from the orders.created snapshot without asking orders.get, with the order's mode and snapshot", async () => {
	// A test ride with a sandbox directive: carried by the event, ignored in FLEET_MODE=live.
	const broker = bed.node.broker;
	const asked: string[] = [];
	const call = broker.call.bind(broker);
	const spy = jest.spyOn(broker, "call").mockImplementation(((name: string, params?: { orderId?: string }, opts?: unknown) => {
		if (name === "orders.get" && params?.orderId) asked.push(params.orderId);
		return call(name, params, opts as never);
	}) as typeof broker.call);
	let orderId: string;
	try {
		const created = await broker.call<{ orderId: string; updatedAt: string }, unknown>(
			"orders.create",
			{
				user: { name: "Asha Rao", phone: randomPhone() },
				serviceType: "cab",
				pickup: destinationPoint(CENTRE, 0, 90_000),
				drop: destinationPoint(CENTRE, 0, 92_000),
				webhookURL: "https://partner.example.com/hooks",
				metadata: { sandbox: "fast" },
			},
			{ meta: { partnerId, mode: "test" } },
		);
		orderId = created.orderId;
		const row = await waitFor(`${orderId} mirrored`, () => mirror(orderId));
		expect(row).toMatchObject({ state: "searching", order_status: "searching", mode: "test", partner_id: partnerId, order_version: 0, sandbox: null });
		expect(new Date(row.order_updated_at).toISOString()).toBe(created.updatedAt);
		await backedOff(orderId);
	} finally {
		spy.mockRestore();
	}
	expect(asked).not.toContain(orderId!);
}, 30_000);

it("a late orders.created does not reopen a ride that ended before dispatch mirrored it", async () => {
	const pickup = destinationPoint(CENTRE, 45, 120_000);
	const order = await book(pickup);
	await waitFor(`${order.orderId} mirrored`, () => mirror(order.orderId));
	// As if dispatch never heard of the ride: the cancel reaches it first.
	await bed.pg.query("DELETE FROM dispatch_rides WHERE order_id = $1", [order.orderId]);
	await bed.node.broker.call("orders.cancel", { orderId: order.orderId }, { meta: { partnerId, mode: "live" } });
	await waitFor(`${order.orderId} tombstone`, async () => (await mirror(order.orderId))?.state === "closed");
	const driver = await driverAt(pickup, "live");
	const late: OrderCreatedEvent = {
		orderId: order.orderId,
		partnerId,
		mode: "live",
		serviceType: "cab",
		pickup: order.pickup,
		drop: order.drop,
		status: "searching",
		version: 0,
		updatedAt: order.createdAt,
	};
	await bed.node.broker.emit(ORDER_EVENTS.created, late);
	await sleep(500);
	expect((await mirror(order.orderId)).state).toBe("closed");
	expect(await offersOf(order.orderId)).toBe(0);
	expect((await bed.node.broker.call<DriverJob, unknown>("dispatch.driver", { driverId: driver.driverId })).driver.status).toBe("available");
	await bed.node.broker.call("dispatch.goOffline", { driverId: driver.driverId });
}, 30_000);

it("in one pass, offers the ride with a driver of its mode near and backs off the ones nobody of their mode (or not excluded) is near", async () => {
	// A test driver right at a live ride's pickup is nobody for it.
	const testOnly = destinationPoint(CENTRE, 90, 200_000);
	const testDriver = await driverAt(testOnly, "test");
	// A live driver right at another pickup.
	const served = destinationPoint(CENTRE, 180, 200_000);
	const liveDriver = await driverAt(served, "live");
	const lonely = destinationPoint(CENTRE, 270, 200_000);

	const [a, b, c] = await Promise.all([book(testOnly), book(served), book(lonely)]);
	await offerFor(bed.node.broker, liveDriver.driverId, b.orderId, TIMEOUT_MS);
	await backedOff(a.orderId);
	await backedOff(c.orderId);
	expect(await offersOf(a.orderId)).toBe(0);
	expect(await offersOf(c.orderId)).toBe(0);
	expect((await bed.node.broker.call<DriverJob, unknown>("dispatch.driver", { driverId: testDriver.driverId })).driver.status).toBe("available");

	// The live driver declines: excluded, it is nobody for ride b, which backs off instead of being offered to it again.
	await bed.node.broker.call("dispatch.declineOffer", { driverId: liveDriver.driverId, orderId: b.orderId });
	await backedOff(b.orderId);
	await sleep(300);
	expect(await offersOf(b.orderId)).toBe(1);
	expect((await bed.node.broker.call<DriverJob, unknown>("dispatch.driver", { driverId: liveDriver.driverId })).driver.status).toBe("available");

	// A test ride at the test driver is offered to it: the same pass serves each mode its own drivers.
	const t = await book(testOnly, "test");
	await offerFor(bed.node.broker, testDriver.driverId, t.orderId, TIMEOUT_MS);
	expect(await offersOf(a.orderId)).toBe(0);
	for (const d of [testDriver, liveDriver])
		await bed.node.broker.call("dispatch.declineOffer", { driverId: d.driverId, orderId: t.orderId }).catch(() => undefined);
}, 60_000);

it("a burst of rides nobody is near is mirrored and backed off in bulk, each in its own mode, and each still ends no_driver_found at its deadline", async () => {
	const far = destinationPoint(CENTRE, 135, 400_000);
	// Test and live rides in one burst: their mirror rows are inserted together, each with its own order's mode and partner.
	const orders = await Promise.all(Array.from({ length: 150 }, (_, i) => book(destinationPoint(far, (i * 7) % 360, 100 + i * 10), i % 3 ? "live" : "test")));
	for (const o of orders) await backedOff(o.orderId);
	const mismatched = await bed.pg.query(
		`SELECT r.order_id FROM dispatch_rides r JOIN orders o ON o.id = r.order_id
		 WHERE r.order_id = ANY($1::text[]) AND (r.mode <> o.mode OR r.partner_id <> o.partner_id OR r.order_updated_at <> date_trunc('milliseconds', o.updated_at) OR r.pickup_lat <> (o.pickup->>'lat')::float8)`,
		[orders.map((o) => o.orderId)],
	);
	expect(mismatched.rows).toEqual([]);
	const r = await bed.pg.query(
		`SELECT count(*) FILTER (WHERE abs(extract(epoch FROM next_match_at - (search_started_at + $2::double precision * interval '1 millisecond'))) < 0.01) AS at_deadline, count(*) AS n
		 FROM dispatch_rides WHERE order_id = ANY($1::text[])`,
		[orders.map((o) => o.orderId), TIMEOUT_MS],
	);
	expect(Number(r.rows[0].n)).toBe(150);
	expect(Number(r.rows[0].at_deadline)).toBe(150);
	await waitFor(
		"every ride no_driver_found",
		async () =>
			(await bed.pg.query("SELECT count(*) AS n FROM orders WHERE id = ANY($1::text[]) AND status = 'no_driver_found'", [orders.map((o) => o.orderId)]))
				.rows[0].n === "150",
		TIMEOUT_MS + 30_000,
		250,
	);
}, 90_000);
