import { randomPhone } from "../../helpers/rides";
import { TELEPORTING_DRIVERS, uniqueNamespace } from "../../helpers/node";
import { httpRequest, type HttpAnswer } from "../../helpers/http";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { startPartnerEndpoint, waitFor, type PartnerEndpoint, type ReceivedWebhook } from "../../helpers/webhooks";
import { sleep } from "../../helpers/wait";
import { destinationPoint, haversineMeters } from "../../../lib/geo";
import { computeFare } from "../../../lib/fare-math";
import type { DriverTokenCreated } from "../../../contracts/driver";
import type { DriverJob } from "../../../contracts/dispatch";
import type { CancelPreviewResult, CancelResult, FinalFare, Order } from "../../../contracts/orders";
import type { FareTerms } from "../../../contracts/pricing";

/**
 * The cancellation policy and the final fare over real HTTP, NATS and
 * PostgreSQL (the services in one process), with a scripted driver over the
 * `/driver` API (FLEET_MODE=live: no simulated driver competes) so its
 * positions are the test's: each state's preview and fee, a preview writes
 * nothing, a raised fee refuses the confirmed cancel, a started ride refuses
 * preview and confirmed cancel, a detour with waiting keeps the quote plus
 * the exact waiting charge, an early end is metered, the ETA to the pickup
 * is on `accepted` and location events. Short timers: a 3 s grace period,
 * location ticks every 100 ms, waiting at ₹60 a minute from the first second.
 */

const PICKUP = { lat: 12.9716, lng: 77.5946 };
const DROP = destinationPoint(PICKUP, 135, 5000);
const GRACE_SECONDS = 3;

let bed: Testbed;
let base: string;
let partner: { partnerId: string; apiKey: string; webhookSecret: string };
let endpoint: PartnerEndpoint;
let driverToken: DriverTokenCreated;

beforeAll(async () => {
	bed = await startTestbed("fares-and-fees", {
		services: ["gateway", "partners", "riders", "pricing", "orders", "dispatch", "notifications"],
		// Over the test NATS server: the broker events (orders' hints, dispatch's) cross a real transporter.
		nats: { namespace: uniqueNamespace("fares") },
		env: {
			...TELEPORTING_DRIVERS,
			FLEET_MODE: "live",
			WEBHOOK_ALLOW_PRIVATE: "true",
			RATE_LIMIT_PER_MINUTE: "0",
			AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
			CANCEL_GRACE_SECONDS: String(GRACE_SECONDS),
			LOCATION_INTERVAL_MS: "100",
			DRIVER_POSITION_FLUSH_MS: "50",
			DISPATCH_TICK_MS: "50",
			TARIFFS_JSON: JSON.stringify({ cab: { waitingPerMinute: 60, freeWaitingMinutes: 0, cancellationFee: 50 } }),
		},
	});
	base = bed.node.baseUrl!;
	partner = await bed.node.broker.call("partners.create", { name: "Fares partner", mode: "live" });
	endpoint = await startPartnerEndpoint(partner.webhookSecret);
	driverToken = await bed.node.broker.call<DriverTokenCreated, unknown>("dispatch.createDriverToken", {
		name: "Driver F",
		phone: randomPhone("+9196"),
		vehicleNumber: "KA01AB1234",
		serviceType: "cab",
		mode: "live",
	});
}, 30_000);

afterAll(async () => {
	await endpoint?.close();
	await bed?.stop();
});

const ride = <T>(path: string, body: unknown): Promise<HttpAnswer<T>> =>
	httpRequest<T>(`${base}/ride${path}`, { headers: { Authorization: `Bearer ${partner.apiKey}` }, body });
const driver = <T = Record<string, unknown>>(path: string, body?: unknown): Promise<HttpAnswer<T>> =>
	httpRequest<T>(`${base}/driver${path}`, { headers: { Authorization: `Bearer ${driverToken.token}` }, body });
const at = (p: { lat: number; lng: number }) => ({ lat: p.lat, lng: p.lng });

/** The driver goes online (again) at `where`, a ride is booked (with a quote when asked) and the driver accepts its offer. */
async function bookAndAccept(where: { lat: number; lng: number }, withQuote = false): Promise<Order> {
	await waitFor("the driver free", async () => (await driver("/online", { location: at(where) })).status === 200);
	await waitFor("the driver available", async () => (await driver<DriverJob>("/offers", { waitSeconds: 0 })).body.driver?.status === "available");
	let quoteId: string | undefined;
	if (withQuote) {
		const estimate = await ride<{ quotes: Array<{ quoteId: string }> }>("/fare-estimate", { pickup: PICKUP, drop: DROP, serviceType: "cab" });
		quoteId = estimate.body.quotes[0].quoteId;
	}
	const booked = await ride<Order>("/create-order", {
		user: { name: "Asha Rao", phone: randomPhone() },
		serviceType: "cab",
		pickup: PICKUP,
		drop: at(DROP),
		webhookURL: `${endpoint.url}/hooks`,
		...(quoteId ? { quoteId } : {}),
	});
	expect(booked.status).toBe(201);
	const offers = await driver<DriverJob>("/offers", { waitSeconds: 20 });
	expect(offers.body.offer?.orderId).toBe(booked.body.orderId);
	expect((await driver("/accept", { orderId: booked.body.orderId })).status).toBe(200);
	return booked.body;
}

const hooksOf = (orderId: string, status?: string): ReceivedWebhook[] =>
	endpoint.delivered().filter((h) => h.orderId === orderId && (status === undefined || h.status === status));
const preview = (orderId: string) => ride<CancelPreviewResult>("/cancel", { orderId, preview: true });
async function rowOf(orderId: string): Promise<{ status: string; version: number; events: number }> {
	const { rows } = await bed.pg.query<{ status: string; version: number; events: number }>(
		"SELECT status, version, (SELECT count(*)::int FROM ride_events e WHERE e.order_id = o.id) AS events FROM orders o WHERE id = $1",
		[orderId],
	);
	return rows[0];
}

it("previews each state's fee without writing, refuses a raised fee, and charges the confirmed one", async () => {
	const far = destinationPoint(PICKUP, 90, 3000);
	// Searching (the driver is still offline): free; a preview writes nothing.
	const booked = await ride<Order>("/create-order", {
		user: { name: "Ravi K", phone: randomPhone() },
		serviceType: "cab",
		pickup: PICKUP,
		drop: at(DROP),
		webhookURL: `${endpoint.url}/hooks`,
	});
	expect(booked.status).toBe(201);
	const before = await rowOf(booked.body.orderId);
	const searching = await preview(booked.body.orderId);
	expect(searching.status).toBe(200);
	expect(searching.body).toEqual({
		code: "CANCEL_PREVIEW",
		orderId: booked.body.orderId,
		status: "searching",
		cancellationFee: { amount: 0, currency: "INR", rule: "searching" },
	});
	expect(await rowOf(booked.body.orderId)).toEqual(before);
	// A plain cancel keeps its answer, plus the fee.
	const plain = await ride<CancelResult>("/cancel", { orderId: booked.body.orderId });
	expect(plain.body).toEqual({
		code: "RIDE_CANCELLED",
		orderId: booked.body.orderId,
		status: "customer_cancelled",
		cancellationFee: { amount: 0, currency: "INR", rule: "searching" },
	});

	const order = await bookAndAccept(far);
	const acceptedAt = Date.now();
	// Within the grace period: free, whatever the distance.
	const grace = await preview(order.orderId);
	expect(grace.body.cancellationFee).toEqual({ amount: 0, currency: "INR", rule: "grace_period" });
	await sleep(Math.max(0, GRACE_SECONDS * 1000 - (Date.now() - acceptedAt)) + 200);
	// After it, with the driver 3 km away: free.
	const farAnswer = await preview(order.orderId);
	expect(farAnswer.body).toMatchObject({ status: "accepted", cancellationFee: { amount: 0, rule: "driver_far" } });

	// The driver comes within 500 m: the fee (₹50) once orders has its position.
	const statusEvents = async () =>
		(await bed.pg.query<{ n: number }>("SELECT count(*)::int AS n FROM ride_events WHERE order_id = $1 AND kind = 'status'", [order.orderId])).rows[0].n;
	const eventsBefore = await statusEvents();
	expect((await driver("/location", { locations: [at(destinationPoint(PICKUP, 90, 300))] })).status).toBe(200);
	const near = await waitFor("the fee once the driver is near", async () => {
		const p = await preview(order.orderId);
		return p.body.cancellationFee?.rule === "driver_near" ? p.body : null;
	});
	expect(near.cancellationFee).toEqual({ amount: 50, currency: "INR", rule: "driver_near" });
	// The previews wrote no event (only the driver's location events were added meanwhile).
	expect(await statusEvents()).toBe(eventsBefore);

	// Confirming the free fee from before is refused with the new fee; nothing changes.
	const raised = await ride<{ code: string; details: Array<{ field: string; message: string }> }>("/cancel", {
		orderId: order.orderId,
		confirmFee: 0,
		reasonCode: "DRIVER_TOO_FAR",
	});
	expect(raised.status).toBe(409);
	expect(raised.body.code).toBe("CANCELLATION_FEE_CHANGED");
	expect(raised.body.details).toEqual(
		expect.arrayContaining([
			{ field: "cancellationFee.amount", message: "50" },
			{ field: "cancellationFee.currency", message: "INR" },
		]),
	);
	expect((await rowOf(order.orderId)).status).toBe("accepted");

	// Arrived: the fee; a confirmed cancel without a reason code is a 400.
	expect((await driver("/arrived", { orderId: order.orderId, location: at(PICKUP) })).status).toBe(200);
	expect((await preview(order.orderId)).body.cancellationFee).toEqual({ amount: 50, currency: "INR", rule: "driver_arrived" });
	expect((await ride("/cancel", { orderId: order.orderId, confirmFee: 50 })).status).toBe(400);
	expect((await ride("/cancel", { orderId: order.orderId, confirmFee: 50, reasonCode: "NOT_A_CODE" })).status).toBe(400);
	const confirmed = await ride<CancelResult>("/cancel", { orderId: order.orderId, confirmFee: 50, reasonCode: "RIDER_CHANGED_PLANS" });
	expect(confirmed.status).toBe(200);
	expect(confirmed.body).toEqual({
		code: "RIDE_CANCELLED",
		orderId: order.orderId,
		status: "customer_cancelled",
		cancellationFee: { amount: 50, currency: "INR", rule: "driver_arrived" },
	});
	// The fee on the retry, /ride/status and the webhook.
	expect((await ride<CancelResult>("/cancel", { orderId: order.orderId })).body.cancellationFee?.amount).toBe(50);
	expect((await ride<Order>("/status", { orderId: order.orderId })).body.cancellationFee).toEqual(confirmed.body.cancellationFee);
	const hook = await waitFor("the customer_cancelled webhook", () => hooksOf(order.orderId, "customer_cancelled")[0]);
	expect(hook.body.cancellationFee).toEqual(confirmed.body.cancellationFee);
	expect((await bed.pg.query("SELECT cancel_reason_code FROM orders WHERE id = $1", [order.orderId])).rows[0].cancel_reason_code).toBe("RIDER_CHANGED_PLANS");

	// The ETA to the pickup: on `accepted` and on the location events while the driver is on its way.
	const accepted = hooksOf(order.orderId, "accepted")[0];
	expect(accepted.body.etaToPickupSeconds).toEqual(expect.any(Number));
	expect(accepted.body.etaToPickupSeconds as number).toBeGreaterThan(120);
	expect(hooksOf(order.orderId, "location_updated").some((h) => typeof h.body.etaToPickupSeconds === "number")).toBe(true);
	expect(hooksOf(order.orderId, "arrived")[0].body.etaToPickupSeconds).toBe(0);
});

it("refuses a preview or a confirmed cancel of a started ride; a plain cancel still ends it, charged the fare", async () => {
	const order = await bookAndAccept(destinationPoint(PICKUP, 0, 200));
	expect((await driver("/arrived", { orderId: order.orderId, location: at(PICKUP) })).status).toBe(200);
	expect((await driver("/start", { orderId: order.orderId, otp: order.otp })).status).toBe(200);
	const refused = await preview(order.orderId);
	expect(refused.status).toBe(409);
	expect(refused.body).toMatchObject({ code: "RIDE_NOT_CANCELLABLE" });
	const refusedConfirmed = await ride("/cancel", { orderId: order.orderId, confirmFee: 10_000, reasonCode: "OTHER" });
	expect(refusedConfirmed.status).toBe(409);
	expect((await rowOf(order.orderId)).status).toBe("started");
	const plain = await ride<CancelResult>("/cancel", { orderId: order.orderId, reason: "rider left" });
	expect(plain.status).toBe(200);
	expect(plain.body.cancellationFee).toEqual({ amount: order.fare.totalAmount, currency: "INR", rule: "ride_started" });
});

it("keeps the quote after a detour, plus the exact waiting charge; /ride/status and `dropped` carry the final fare", async () => {
	const order = await bookAndAccept(destinationPoint(PICKUP, 0, 200), true);
	expect((await driver("/arrived", { orderId: order.orderId, location: at(PICKUP) })).status).toBe(200);
	await sleep(1500);
	expect((await driver("/start", { orderId: order.orderId, otp: order.otp })).status).toBe(200);
	// A 4 km detour, sampled by a location tick, then to the booked drop.
	const detour = destinationPoint(PICKUP, 45, 4000);
	await driver("/location", { locations: [at(detour)] });
	await waitFor("the detour sampled", async () => {
		const { rows } = await bed.pg.query<{ driven_m: number }>("SELECT driven_m FROM dispatch_rides WHERE order_id = $1", [order.orderId]);
		return rows[0]?.driven_m > 3900;
	});
	await driver("/location", { locations: [at(destinationPoint(DROP, 0, 100))] });
	expect((await driver("/drop", { orderId: order.orderId })).status).toBe(200);

	const status = await ride<Order>("/status", { orderId: order.orderId });
	const fare = status.body.finalFare as FinalFare;
	expect(fare).toMatchObject({ basis: "quote", tripFare: order.fare.totalAmount, quotedAmount: order.fare.totalAmount, currency: "INR" });
	expect(fare.distance).toBeGreaterThan(4000 + haversineMeters(detour, DROP) - 200);
	// ₹60 a minute from the first second: ₹1 per whole second waited.
	expect(fare.chargedWaitingSeconds).toBe(fare.waitingSeconds);
	expect(fare.waitingCharge).toBe(fare.waitingSeconds);
	expect(fare.totalAmount).toBe(Math.round((order.fare.totalAmount + fare.waitingCharge) * 100) / 100);
	const dropped = await waitFor("the dropped webhook", () => hooksOf(order.orderId, "dropped")[0]);
	expect(dropped.body.finalFare).toEqual(fare);
	// The waiting is the time between the arrived and started events.
	const arrivedAt = Date.parse(hooksOf(order.orderId, "arrived")[0].body.occurredAt as string);
	const startedAt = Date.parse((await waitFor("started", () => hooksOf(order.orderId, "started")[0])).body.occurredAt as string);
	expect(Math.abs(fare.waitingSeconds - (startedAt - arrivedAt) / 1000)).toBeLessThan(1);
	expect(fare.waitingSeconds).toBeGreaterThanOrEqual(1);
});

it("meters a ride that ends before its drop from the distance driven, below the quote", async () => {
	const order = await bookAndAccept(destinationPoint(PICKUP, 0, 200));
	expect((await driver("/arrived", { orderId: order.orderId, location: at(PICKUP) })).status).toBe(200);
	expect((await driver("/start", { orderId: order.orderId, otp: order.otp })).status).toBe(200);
	const halfway = destinationPoint(PICKUP, 135, 1500);
	await driver("/location", { locations: [at(destinationPoint(PICKUP, 135, 700))] });
	await sleep(300);
	await driver("/location", { locations: [at(halfway)] });
	expect((await driver("/drop", { orderId: order.orderId })).status).toBe(200);

	const fare = (await ride<Order>("/status", { orderId: order.orderId })).body.finalFare as FinalFare;
	expect(fare.basis).toBe("metered");
	expect(Math.abs(fare.distance - 1500)).toBeLessThanOrEqual(2);
	const { rows } = await bed.pg.query<{ fare_terms: FareTerms; distance: number; duration: number }>(
		"SELECT fare_terms, distance, duration FROM orders WHERE id = $1",
		[order.orderId],
	);
	const { fare_terms: terms, distance: quotedDistance, duration: quotedDuration } = rows[0];
	const actual = computeFare(terms, fare.distance, fare.duration, terms.surgeTenths).total;
	const paced = computeFare(terms, fare.distance, Math.round((quotedDuration * fare.distance) / quotedDistance), terms.surgeTenths).total;
	expect(fare.tripFare).toBe(Math.min(actual, paced) / 100);
	expect(fare.tripFare).toBeLessThan(order.fare.totalAmount);
	expect(fare.totalAmount).toBe(Math.round((fare.tripFare + fare.waitingCharge) * 100) / 100);
	expect((await waitFor("the dropped webhook", () => hooksOf(order.orderId, "dropped")[0])).body.finalFare).toEqual(fare);
});
