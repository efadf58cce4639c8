import { TELEPORTING_DRIVERS } from "../../helpers/node";
import { PartnerApi, httpRequest, type HttpAnswer } from "../../helpers/http";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { sleep, waitFor } from "../../helpers/wait";
import { orderViolations, startPartnerEndpoint, type PartnerEndpoint } from "../../helpers/webhooks";
import { destinationPoint } from "../../../lib/geo";
import type { DriverTokenCreated } from "../../../contracts/driver";
import type { DriverJob } from "../../../contracts/dispatch";

/**
 * Scheduled rides over real HTTP, PostgreSQL and webhooks, with lead times
 * of seconds (SCHEDULE_* settings): bookings outside the window refused with
 * nothing booked; a quote bound to its pickup time; a scheduled ride
 * dispatched at its lead time and driven to `dropped` by a scripted driver
 * over the driver API; one with nobody around ends `no_driver_found` before
 * its pickup time; cancel while scheduled; a rider busy on another ride.
 * Live mode (FLEET_MODE=live): only the scripted driver drives.
 */

const PICKUP = { lat: 12.9716, lng: 77.5946 };
const DROP = { lat: 12.9352, lng: 77.6245 };
/** Delhi: nobody drives there in this test. */
const NOWHERE = { lat: 28.6139, lng: 77.209 };
const NOWHERE_DROP = { lat: 28.5839, lng: 77.229 };

/** Seconds: book at least 3 s ahead, at most 60 s; dispatch starts 2 s before pickup; the search ends 0.5 s before it. */
const MIN_LEAD_S = 3;
const DISPATCH_LEAD_S = 2.5;
const MARGIN_S = 1.2;

let bed: Testbed;
let api: PartnerApi;
let partner: { partnerId: string; apiKey: string; webhookSecret: string };
let endpoint: PartnerEndpoint;
let driverA: DriverTokenCreated;

beforeAll(async () => {
	bed = await startTestbed("scheduled", {
		services: ["gateway", "partners", "riders", "pricing", "orders", "dispatch", "notifications"],
		env: {
			...TELEPORTING_DRIVERS,
			FLEET_MODE: "live",
			RATE_LIMIT_PER_MINUTE: "0",
			AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
			SCHEDULE_MIN_LEAD_SECONDS: String(MIN_LEAD_S),
			SCHEDULE_MAX_AHEAD_SECONDS: "60",
			SCHEDULE_DISPATCH_LEAD_SECONDS: String(DISPATCH_LEAD_S),
			SCHEDULE_SEARCH_MARGIN_SECONDS: String(MARGIN_S),
			SCHEDULE_POLL_SECONDS: "0.5",
			DISPATCH_TICK_MS: "50",
			DISPATCH_RETRY_MS: "100",
			DISPATCH_RETRY_MAX_MS: "200",
			DISPATCH_OFFER_TIMEOUT_MS: "20000",
			WEBHOOK_RETRY_SCHEDULE_MS: "100,200,500",
		},
	});
	partner = await bed.node.broker.call("partners.create", { name: "Scheduled rides partner", mode: "live" });
	api = new PartnerApi(bed.node.baseUrl!, partner.apiKey);
	endpoint = await startPartnerEndpoint(partner.webhookSecret);
	driverA = await bed.node.broker.call<DriverTokenCreated, unknown>("dispatch.createDriverToken", {
		name: "Driver Scheduled",
		phone: randomPhone("+9196"),
		vehicleNumber: "KA01AB1234",
		serviceType: "cab",
		mode: "live",
	});
});

afterAll(async () => {
	await bed?.stop();
	await endpoint?.close();
});

const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

interface OrderAnswer {
	orderId: string;
	otp: string;
	status: string;
	pickupAt?: string;
	code?: string;
}

function book(o: { pickupAt?: string; phone?: string; pickup?: typeof PICKUP; drop?: typeof DROP; quoteId?: string }): Promise<HttpAnswer<OrderAnswer>> {
	return api.post<OrderAnswer>("/ride/create-order", {
		user: { name: "Asha Rao", phone: o.phone ?? randomPhone() },
		serviceType: "cab",
		pickup: o.pickup ?? PICKUP,
		drop: o.drop ?? DROP,
		webhookURL: `${endpoint.url}/hooks`,
		...(o.pickupAt !== undefined ? { pickupAt: o.pickupAt } : {}),
		...(o.quoteId !== undefined ? { quoteId: o.quoteId } : {}),
	});
}

function driver<T = Record<string, unknown>>(path: string, body?: unknown): Promise<HttpAnswer<T>> {
	return httpRequest<T>(`${bed.node.baseUrl}/driver${path}`, { method: "POST", headers: { Authorization: `Bearer ${driverA.token}` }, body });
}

const statusOf = async (orderId: string) => (await api.post<{ status: string }>("/ride/status", { orderId })).body.status;
const statusHooks = (orderId: string) => endpoint.delivered().filter((h) => h.orderId === orderId && h.status !== "location_updated");
const orderCount = async () => (await bed.pg.query<{ n: number }>("SELECT count(*)::int AS n FROM orders")).rows[0].n;

it("refuses a pickup time outside the window or badly written, booking nothing; fare-estimate likewise", async () => {
	const before = await orderCount();
	for (const [pickupAt, code] of [
		[inSeconds(1), "PICKUP_TIME_OUT_OF_RANGE"],
		[inSeconds(-60), "PICKUP_TIME_OUT_OF_RANGE"],
		[inSeconds(120), "PICKUP_TIME_OUT_OF_RANGE"],
		["2030-01-01T10:00:00", "VALIDATION_ERROR"],
		["tomorrow at noon", "VALIDATION_ERROR"],
		["2030-02-30T10:00:00Z", "VALIDATION_ERROR"],
	]) {
		const res = await book({ pickupAt });
		expect({ pickupAt, status: res.status, code: res.body.code }).toEqual({ pickupAt, status: 400, code });
		expect(res.body).toMatchObject({ retryable: false, details: [{ field: "pickupAt" }] });
	}
	const estimate = await api.post("/ride/fare-estimate", { pickup: PICKUP, drop: DROP, pickupAt: inSeconds(120) });
	expect(estimate.status).toBe(400);
	expect(estimate.body).toMatchObject({ code: "PICKUP_TIME_OUT_OF_RANGE" });
	expect(await orderCount()).toBe(before);
});

it("binds a quote to its pickup time: only that time books with it; older (ride-now) quotes keep working for rides now", async () => {
	const pickupAt = inSeconds(30);
	const later = await api.post<{ quotes: Array<{ quoteId: string; serviceType: string; eta: number | null; totalAmount: number }> }>("/ride/fare-estimate", {
		pickup: PICKUP,
		drop: DROP,
		serviceType: "cab",
		pickupAt,
	});
	expect(later.status).toBe(200);
	const quote = later.body.quotes[0];
	// A ride for later: no ETA from today's drivers.
	expect(quote.eta).toBeNull();
	const now = await api.post<{ quotes: Array<{ quoteId: string }> }>("/ride/fare-estimate", { pickup: PICKUP, drop: DROP, serviceType: "cab" });

	const otherTime = await book({ pickupAt: inSeconds(40), quoteId: quote.quoteId });
	expect(otherTime.status).toBe(422);
	expect(otherTime.body).toMatchObject({ code: "QUOTE_INVALID", details: [{ field: "pickupAt" }] });
	const asNow = await book({ quoteId: quote.quoteId });
	expect(asNow.status).toBe(422);
	expect(asNow.body).toMatchObject({ code: "QUOTE_INVALID", details: [{ field: "pickupAt" }] });
	const nowQuoteForLater = await book({ pickupAt, quoteId: now.body.quotes[0].quoteId });
	expect(nowQuoteForLater.status).toBe(422);

	// Written with another offset, the same instant is the same pickup time.
	const sameInstant = new Date(Date.parse(pickupAt) + 5.5 * 3_600_000).toISOString().replace("Z", "+05:30");
	const booked = await book({ pickupAt: sameInstant, quoteId: quote.quoteId });
	expect(booked.status).toBe(201);
	expect(booked.body).toMatchObject({ status: "scheduled", fare: { totalAmount: quote.totalAmount } });
	expect(Date.parse(booked.body.pickupAt!)).toBe(Math.floor(Date.parse(pickupAt) / 1000) * 1000);

	// A ride-now quote still books a ride now.
	const nowRide = await book({ quoteId: now.body.quotes[0].quoteId, pickup: NOWHERE, drop: NOWHERE_DROP });
	expect(nowRide.status).toBe(422); // its trip is another one
	const plainNow = await book({ quoteId: now.body.quotes[0].quoteId });
	expect(plainNow.status).toBe(201);
	expect(plainNow.body.status).toBe("searching");
	expect(plainNow.body.pickupAt).toBeUndefined();

	// Cancel while scheduled: free, final, the ride never reaches dispatch.
	const cancel = await api.post("/ride/cancel", { orderId: booked.body.orderId, reason: "plans changed" });
	expect(cancel.status).toBe(200);
	expect(cancel.body).toMatchObject({ code: "RIDE_CANCELLED", status: "customer_cancelled" });
	expect(await statusOf(booked.body.orderId)).toBe("customer_cancelled");
	expect((await api.post("/ride/cancel", { orderId: booked.body.orderId })).status).toBe(200);
	await waitFor("the scheduled and cancelled webhooks", () => statusHooks(booked.body.orderId).length === 2);
	expect(statusHooks(booked.body.orderId).map((h) => [h.status, h.sequence])).toEqual([
		["scheduled", 1],
		["customer_cancelled", 2],
	]);
	expect(statusHooks(booked.body.orderId)[0].body).toMatchObject({ pickupAt: booked.body.pickupAt });
	const { rows } = await bed.pg.query("SELECT 1 FROM dispatch_rides WHERE order_id = $1", [booked.body.orderId]);
	expect(rows).toEqual([]);
	await api.post("/ride/cancel", { orderId: plainNow.body.orderId });
});

it("dispatches a scheduled ride at its lead time; a scripted driver drives it to dropped over the driver API", async () => {
	const near = destinationPoint(PICKUP, 90, 300);
	expect((await driver("/online", { location: { lat: near.lat, lng: near.lng, heading: 270 } })).status).toBe(200);
	const bookedAt = Date.now();
	const ride = await book({ pickupAt: inSeconds(MIN_LEAD_S + 1) });
	expect(ride.status).toBe(201);
	expect(ride.body.status).toBe("scheduled");
	const pickupAtMs = Date.parse(ride.body.pickupAt!);
	const { orderId, otp } = ride.body;

	// The driver waits for work; the offer comes once dispatch starts, not at booking.
	let offer: DriverJob["offer"] = null;
	while (!offer && Date.now() < pickupAtMs + 5000) offer = (await driver<DriverJob>("/offers", { waitSeconds: 2 })).body.offer;
	expect(offer?.orderId).toBe(orderId);
	const { rows } = await bed.pg.query<{ offered: Date; dispatch_at: Date }>(
		"SELECT o.created_at AS offered, r.dispatch_at FROM dispatch_offers o JOIN orders r ON r.id = o.order_id WHERE o.order_id = $1",
		[orderId],
	);
	expect(rows[0].dispatch_at.getTime()).toBe(pickupAtMs - DISPATCH_LEAD_S * 1000);
	expect(rows[0].offered.getTime()).toBeGreaterThanOrEqual(rows[0].dispatch_at.getTime());
	expect(rows[0].offered.getTime()).toBeGreaterThan(bookedAt);

	expect((await driver<DriverJob>("/accept", { orderId })).body.ride).toMatchObject({ orderId, status: "accepted" });
	expect((await driver("/arrived", { orderId })).body).toMatchObject({ ride: { status: "arrived" } });
	expect((await driver("/start", { orderId, otp })).body).toMatchObject({ ride: { status: "started" } });
	expect((await driver("/drop", { orderId })).body).toMatchObject({ ride: { status: "dropped" } });

	await waitFor("six status webhooks", () => statusHooks(orderId).length === 6);
	expect(statusHooks(orderId).map((h) => h.status)).toEqual(["scheduled", "searching", "accepted", "arrived", "started", "dropped"]);
	expect(statusHooks(orderId).map((h) => h.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
	expect(endpoint.received.filter((h) => h.orderId === orderId).every((h) => h.signatureValid)).toBe(true);
	expect(orderViolations(endpoint.received)).toEqual([]);
	const events = await api.allEvents<{ status: string }>(orderId);
	expect(events.filter((e) => e.status !== "location_updated").map((e) => e.status)).toEqual([
		"scheduled",
		"searching",
		"accepted",
		"arrived",
		"started",
		"dropped",
	]);
	expect((await driver("/offline", {})).status).toBe(200);
});

it("a scheduled ride with nobody around ends no_driver_found, webhook delivered, before its pickup time", async () => {
	const ride = await book({ pickupAt: inSeconds(MIN_LEAD_S + 1), pickup: NOWHERE, drop: NOWHERE_DROP });
	expect(ride.status).toBe(201);
	const { orderId } = ride.body;
	const pickupAtMs = Date.parse(ride.body.pickupAt!);
	await waitFor("no_driver_found delivered", () => statusHooks(orderId).some((h) => h.status === "no_driver_found"), 15_000);
	const hooks = statusHooks(orderId);
	expect(hooks.map((h) => h.status)).toEqual(["scheduled", "searching", "no_driver_found"]);
	const ended = hooks[2];
	expect(Date.parse(String(ended.body.occurredAt))).toBeLessThan(pickupAtMs);
	expect(ended.receivedAt).toBeLessThan(pickupAtMs);
	// It did search (dispatch mirrored it) and stopped at its deadline.
	expect(Date.parse(String(hooks[1].body.occurredAt))).toBeGreaterThanOrEqual(pickupAtMs - DISPATCH_LEAD_S * 1000);
});

it("one active ride plus one waiting scheduled ride per rider; a due ride waits for its busy rider, ending no_driver_found if that lasts", async () => {
	const busyPhone = randomPhone();
	const freedPhone = randomPhone();
	// Both riders are on a ride now, searching where nobody drives (it stays searching).
	const busyNow = await book({ phone: busyPhone, pickup: NOWHERE, drop: NOWHERE_DROP });
	const freedNow = await book({ phone: freedPhone, pickup: NOWHERE, drop: NOWHERE_DROP });
	expect([busyNow.status, freedNow.status]).toEqual([201, 201]);

	// A scheduled ride besides the active one is welcome; a second scheduled one answers the first.
	const busyLater = await book({ phone: busyPhone, pickupAt: inSeconds(MIN_LEAD_S + 1), pickup: NOWHERE, drop: NOWHERE_DROP });
	const freedLater = await book({ phone: freedPhone, pickupAt: inSeconds(MIN_LEAD_S + 1), pickup: NOWHERE, drop: NOWHERE_DROP });
	expect([busyLater.status, freedLater.status]).toEqual([201, 201]);
	const again = await book({ phone: busyPhone, pickupAt: inSeconds(MIN_LEAD_S + 5) });
	expect(again.status).toBe(200);
	expect(again.body).toMatchObject({ code: "USER_HAVE_ACTIVE_RIDE", orderId: busyLater.body.orderId, status: "scheduled" });

	// Both come due while their riders are busy: they wait.
	const dueAt = Date.parse(busyLater.body.pickupAt!) - DISPATCH_LEAD_S * 1000;
	await sleep(Math.max(0, dueAt - Date.now()) + 300);
	expect(await statusOf(busyLater.body.orderId)).toBe("scheduled");
	expect(await statusOf(freedLater.body.orderId)).toBe("scheduled");
	// One rider's ride ends: its scheduled ride starts.
	expect((await api.post("/ride/cancel", { orderId: freedNow.body.orderId })).status).toBe(200);
	await waitFor("the freed rider's scheduled ride to start", async () => (await statusOf(freedLater.body.orderId)) !== "scheduled", 5000);
	// The other stays busy to the end: no_driver_found before the pickup time, without ever searching.
	await waitFor("the busy rider's scheduled ride to end", () => statusHooks(busyLater.body.orderId).length === 2, 10_000);
	expect(statusHooks(busyLater.body.orderId).map((h) => h.status)).toEqual(["scheduled", "no_driver_found"]);
	expect(Date.parse(String(statusHooks(busyLater.body.orderId)[1].body.occurredAt))).toBeLessThan(Date.parse(busyLater.body.pickupAt!));
	await waitFor("the freed rider's ride to search", () => statusHooks(freedLater.body.orderId).some((h) => h.status === "searching"));
	for (const id of [busyNow.body.orderId, freedLater.body.orderId]) await api.post("/ride/cancel", { orderId: id });
});
