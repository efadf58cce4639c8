import type { Point } from "../../../contracts/common";
import type { RideView } from "../../../contracts/dispatch";
import { destinationPoint } from "../../../lib/geo";
import { PartnerApi, type HttpAnswer } from "../../helpers/http";
import { uniqueNamespace } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { sleep, waitFor } from "../../helpers/wait";
import { startPartnerEndpoint, type PartnerEndpoint, type ReceivedWebhook, type TestPartner } from "../../helpers/webhooks";

/**
 * Sandbox controls (API.md, "The sandbox"): a test ride booked with
 * `metadata.sandbox: "manual"` waits until POST /ride/sandbox/advance moves
 * it. The whole platform on one node over real NATS, HTTP and PostgreSQL,
 * with the simulated fleet; a local partner endpoint verifies every
 * webhook's signature. Each step goes through the real paths (the fleet as
 * the driver, dispatch offering and ending the ride, orders moving it), so
 * the ride's event rows must be exactly a real ride's. Scheduled rides run
 * on lead times of seconds (SCHEDULE_* settings): a manual one is started by
 * an advance with the schedule's own `searching` webhook, or by the schedule
 * at its dispatch time, and then waits like any manual ride.
 */

const BENGALURU: Point = { lat: 12.9716, lng: 77.5946 };
/** Short, so a ride nobody takes ends within the test; manual rides must not. */
const DISPATCH_TIMEOUT_MS = 1500;
/** Seconds: book at least 2 s ahead; dispatch starts 1.5 s before pickup; a scheduled search ends 1 s before it. */
const SCHEDULE_MIN_LEAD_S = 2;
const SCHEDULE_DISPATCH_LEAD_S = 1.5;

let bed: Testbed;
let api: PartnerApi;
let otherApi: PartnerApi;
let liveApi: PartnerApi;
let endpoint: PartnerEndpoint;

beforeAll(async () => {
	bed = await startTestbed("sandbox-controls", {
		services: ["gateway", "partners", "riders", "pricing", "orders", "dispatch", "notifications", "fleet"],
		nats: { namespace: uniqueNamespace("sandbox") },
		env: {
			FLEET_MODE: "simulated",
			SIM_SPEED: "60",
			SIM_CITIES: `${BENGALURU.lat},${BENGALURU.lng}`,
			FLEET_DRIVERS_PER_CITY: "1",
			FLEET_SEED_RADIUS_M: "1000",
			FLEET_TICK_MS: "100",
			DISPATCH_TICK_MS: "50",
			DISPATCH_RETRY_MS: "200",
			DISPATCH_RETRY_MAX_MS: "200",
			DISPATCH_TIMEOUT_MS: String(DISPATCH_TIMEOUT_MS),
			SCHEDULE_MIN_LEAD_SECONDS: String(SCHEDULE_MIN_LEAD_S),
			SCHEDULE_MAX_AHEAD_SECONDS: "600",
			SCHEDULE_DISPATCH_LEAD_SECONDS: String(SCHEDULE_DISPATCH_LEAD_S),
			SCHEDULE_SEARCH_MARGIN_SECONDS: "1",
			SCHEDULE_POLL_SECONDS: "0.5",
			RATE_LIMIT_PER_MINUTE: "0",
			AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
		},
	});
	const broker = bed.node.broker;
	const partner = await broker.call<TestPartner, unknown>("partners.create", { name: "Sandbox controls", mode: "test" });
	const other = await broker.call<TestPartner, unknown>("partners.create", { name: "Another partner", mode: "test" });
	const live = await broker.call<TestPartner, unknown>("partners.create", { name: "Sandbox live", mode: "live" });
	endpoint = await startPartnerEndpoint(partner.webhookSecret);
	api = new PartnerApi(bed.node.baseUrl!, partner.apiKey);
	otherApi = new PartnerApi(bed.node.baseUrl!, other.apiKey);
	liveApi = new PartnerApi(bed.node.baseUrl!, live.apiKey);
	await waitFor("the fleet to be seeded", async () => (await broker.call<{ seeded: number }>("fleet.status")).seeded === 2, 30_000);
}, 60_000);

afterAll(async () => {
	await endpoint?.close();
	await bed?.stop();
});

interface OrderAnswer {
	orderId: string;
	status: string;
	driver?: { id: string };
	code?: string;
	details?: Array<{ field: string }>;
}

let rideCount = 0;

/** Books a ride; `extra.pickupAt` schedules it, `extra.phone` picks the rider. */
async function book(
	metadata: Record<string, unknown> = { sandbox: "manual" },
	on: PartnerApi = api,
	extra: { pickupAt?: string; phone?: string } = {},
): Promise<string> {
	rideCount += 1;
	const pickup = destinationPoint(BENGALURU, (rideCount * 37) % 360, 400 + rideCount * 50);
	const res = await on.post<{ orderId: string; status: string }>("/ride/create-order", {
		user: { name: `Rider ${rideCount}`, phone: extra.phone ?? randomPhone("+9193") },
		serviceType: rideCount % 2 === 0 ? "cab" : "scooty",
		pickup: { ...pickup, address: "Somewhere" },
		drop: destinationPoint(pickup, 120, 1500),
		webhookURL: endpoint.url,
		metadata,
		...(extra.pickupAt !== undefined ? { pickupAt: extra.pickupAt } : {}),
	});
	expect(res.status).toBe(201);
	expect(res.body.status).toBe(extra.pickupAt === undefined ? "searching" : "scheduled");
	return res.body.orderId;
}

const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

/** A manual ride booked `s` seconds ahead (its dispatch time far beyond the test unless `s` is short). */
const bookScheduled = (s = 300, phone?: string) => book({ sandbox: "manual" }, api, { pickupAt: inSeconds(s), phone });

const advance = (orderId: string, to?: string, on: PartnerApi = api): Promise<HttpAnswer<OrderAnswer>> =>
	on.post<OrderAnswer>("/ride/sandbox/advance", to === undefined ? { orderId } : { orderId, to });

async function statusOf(orderId: string, on: PartnerApi = api): Promise<OrderAnswer> {
	const res = await on.post<OrderAnswer>("/ride/status", { orderId });
	expect(res.status).toBe(200);
	return res.body;
}

/** The ride's webhook events as written, in sequence order. */
async function eventsOf(orderId: string): Promise<string[]> {
	const { rows } = await bed.pg.query<{ status: string }>("SELECT status FROM ride_events WHERE order_id = $1 ORDER BY sequence", [orderId]);
	return rows.map((r) => r.status);
}

/** Waits until the endpoint accepted `count` webhooks of the ride (those `which` picks); returns them in arrival order. */
function deliveredOf(orderId: string, count: number, which: (hook: ReceivedWebhook) => boolean = () => true) {
	return waitFor(
		`${count} webhooks of ${orderId} delivered`,
		() => {
			const hooks = endpoint.delivered().filter((h) => h.orderId === orderId && which(h));
			return hooks.length >= count ? hooks : null;
		},
		15_000,
	);
}

function expectEnvelope(res: HttpAnswer<OrderAnswer>, status: number, code: string): void {
	expect({ status: res.status, code: res.body.code }).toEqual({ status, code });
}

it("walks a manual ride through every state one step at a time, with a real ride's webhooks in order", async () => {
	const orderId = await book();
	// Nothing moves until told: the fleet and matching leave it alone.
	await sleep(700);
	expect((await statusOf(orderId)).status).toBe("searching");
	expect((await bed.node.broker.call<RideView, unknown>("dispatch.ride", { orderId })).offers).toEqual([]);

	const seen: string[] = [];
	for (const expected of ["accepted", "arrived", "started", "dropped"]) {
		const res = await advance(orderId);
		expect(res.status).toBe(200);
		expect(res.body).toMatchObject({ orderId, status: expected });
		if (expected !== "dropped") expect(res.body.driver?.id).toMatch(/^drv_/);
		seen.push(expected);
		expect((await statusOf(orderId)).status).toBe(expected);
	}
	expect(await eventsOf(orderId)).toEqual(["accepted", "location_updated", "arrived", "started", "location_updated", "dropped"]);

	// The status webhooks arrive in order; a location_updated may be superseded by the next one before it goes out (newest wins).
	await deliveredOf(orderId, 4, (h) => h.status !== "location_updated");
	const hooks = endpoint.delivered().filter((h) => h.orderId === orderId);
	for (const h of hooks) {
		expect(h.signatureValid).toBe(true);
		expect(h.rideMode).toBe("test");
	}
	expect(hooks.filter((h) => h.status !== "location_updated").map((h) => h.status)).toEqual(seen);

	// A finished ride cannot be advanced.
	expectEnvelope(await advance(orderId), 409, "RIDE_NOT_ACTIVE");
}, 30_000);

it("jumps straight to each target, writing every step's webhooks on the way", async () => {
	const [toArrived, toStarted, toDropped, toNoDriver, toAccepted, dropOut] = await Promise.all([book(), book(), book(), book(), book(), book()]);
	// Independent rides, advanced side by side (each ride's own steps in order).
	await Promise.all([
		(async () => {
			expect((await advance(toArrived, "arrived")).body.status).toBe("arrived");
			expect(await eventsOf(toArrived)).toEqual(["accepted", "location_updated", "arrived"]);
			expect((await advance(toArrived, "dropped")).body.status).toBe("dropped");
			expect(await eventsOf(toArrived)).toEqual(["accepted", "location_updated", "arrived", "started", "location_updated", "dropped"]);
		})(),
		(async () => {
			expect((await advance(toStarted, "started")).body.status).toBe("started");
			expect(await eventsOf(toStarted)).toEqual(["accepted", "location_updated", "arrived", "started"]);
			// Behind the ride, or a drop-out after the start: refused, nothing changes.
			expectEnvelope(await advance(toStarted, "accepted"), 409, "SANDBOX_TARGET_UNREACHABLE");
			expectEnvelope(await advance(toStarted, "driver_drop_out"), 409, "SANDBOX_TARGET_UNREACHABLE");
			expectEnvelope(await advance(toStarted, "no_driver_found"), 409, "SANDBOX_TARGET_UNREACHABLE");
			expect((await statusOf(toStarted)).status).toBe("started");
		})(),
		(async () => {
			expect((await advance(toDropped, "dropped")).body.status).toBe("dropped");
			expect(await eventsOf(toDropped)).toEqual(["accepted", "location_updated", "arrived", "started", "location_updated", "dropped"]);
		})(),
		(async () => {
			expect((await advance(toNoDriver, "no_driver_found")).body.status).toBe("no_driver_found");
			expect(await eventsOf(toNoDriver)).toEqual(["no_driver_found"]);
			const [noDriverHook] = await deliveredOf(toNoDriver, 1);
			expect(noDriverHook).toMatchObject({ status: "no_driver_found", signatureValid: true });
		})(),
		(async () => {
			// Accepted, then the driver drops out: searching again without a webhook, and the next accept names another driver.
			const accepted = await advance(toAccepted, "accepted");
			expect(accepted.body.status).toBe("accepted");
			const firstDriver = accepted.body.driver!.id;
			expect((await advance(toAccepted, "no_driver_found")).body.code).toBe("SANDBOX_TARGET_UNREACHABLE");
			expect((await advance(toAccepted, "driver_drop_out")).body).toMatchObject({ status: "searching" });
			expect((await statusOf(toAccepted)).driver ?? null).toBeNull();
			expect(await eventsOf(toAccepted)).toEqual(["accepted"]);
			const again = await advance(toAccepted);
			expect(again.body.status).toBe("accepted");
			expect(again.body.driver!.id).not.toBe(firstDriver);
			expect(await eventsOf(toAccepted)).toEqual(["accepted", "accepted"]);
		})(),
		(async () => {
			// A drop-out straight from searching: a driver accepts first, then gives the ride up.
			expect((await advance(dropOut, "driver_drop_out")).body.status).toBe("searching");
			expect(await eventsOf(dropOut)).toEqual(["accepted"]);
			expect((await bed.node.broker.call<RideView, unknown>("dispatch.ride", { orderId: dropOut })).dropOuts).toBe(1);
		})(),
	]);
}, 30_000);

it("keeps a manual ride waiting past the dispatch timeout that ends other rides", async () => {
	const manual = await book();
	// A live ride nobody can take (no live drivers) ends at the timeout: the setting is in force.
	const live = await book({}, liveApi);
	await waitFor(`live ride ${live} to end`, async () => (await statusOf(live, liveApi)).status === "no_driver_found", 10_000);
	// The manual ride was booked first: its timeout has passed too. One more full pass, to be sure.
	await bed.node.broker.call("dispatch.runOnce");
	expect((await statusOf(manual)).status).toBe("searching");
	expect(await bed.node.broker.call<RideView, unknown>("dispatch.ride", { orderId: manual })).toMatchObject({ phase: "searching", offers: [] });
	expect(await eventsOf(manual)).toEqual([]);
	// And it still moves when told.
	expect((await advance(manual)).body.status).toBe("accepted");
}, 20_000);

it("starts a manual scheduled ride's dispatch on an advance and walks it to dropped, with a scheduled ride's webhooks in order", async () => {
	const orderId = await bookScheduled();
	expect((await statusOf(orderId)).status).toBe("scheduled");
	// Without `to`: one step, the dispatch starts now with the `searching` webhook the schedule writes.
	const started = await advance(orderId);
	expect(started.status).toBe(200);
	expect(started.body).toMatchObject({ orderId, status: "searching" });
	expect(await eventsOf(orderId)).toEqual(["scheduled", "searching"]);
	// Dispatch mirrors it as a manual ride: nobody is offered it until told.
	await waitFor("dispatch to mirror the ride", async () => {
		const ride = await bed.node.broker.call<RideView | null, unknown>("dispatch.ride", { orderId }).catch(() => null);
		return ride?.phase === "searching" ? ride : null;
	});
	// Its dispatch time arrives now: the schedule no longer holds it, so nothing starts it twice.
	await bed.pg.query("UPDATE orders SET dispatch_at = now() - interval '1 second' WHERE id = $1", [orderId]);
	await sleep(700);
	expect(await eventsOf(orderId)).toEqual(["scheduled", "searching"]);

	for (const expected of ["accepted", "arrived", "started", "dropped"]) {
		expect((await advance(orderId)).body).toMatchObject({ orderId, status: expected });
	}
	expect(await eventsOf(orderId)).toEqual(["scheduled", "searching", "accepted", "location_updated", "arrived", "started", "location_updated", "dropped"]);
	const hooks = await deliveredOf(orderId, 6, (h) => h.status !== "location_updated");
	expect(hooks.map((h) => h.status)).toEqual(["scheduled", "searching", "accepted", "arrived", "started", "dropped"]);
	for (const h of hooks) {
		expect(h).toMatchObject({ signatureValid: true, rideMode: "test" });
		expect(typeof h.body.pickupAt).toBe("string");
	}
}, 30_000);

it("jumps a manual scheduled ride straight to no_driver_found through its dispatch start", async () => {
	const orderId = await bookScheduled();
	expect((await advance(orderId, "no_driver_found")).body).toMatchObject({ orderId, status: "no_driver_found" });
	expect(await eventsOf(orderId)).toEqual(["scheduled", "searching", "no_driver_found"]);
	const hooks = await deliveredOf(orderId, 3);
	expect(hooks.map((h) => [h.status, h.signatureValid])).toEqual([
		["scheduled", true],
		["searching", true],
		["no_driver_found", true],
	]);
	expectEnvelope(await advance(orderId), 409, "RIDE_NOT_ACTIVE");
}, 20_000);

it("refuses to start a manual scheduled ride while its rider is on another ride (409 RIDER_HAS_ACTIVE_RIDE), and starts it after", async () => {
	const phone = randomPhone("+9193");
	const now = await book({ sandbox: "manual" }, api, { phone });
	const later = await bookScheduled(300, phone);
	for (const to of [undefined, "accepted", "no_driver_found"]) {
		const res = await advance(later, to);
		expectEnvelope(res, 409, "RIDER_HAS_ACTIVE_RIDE");
		expect(res.body).toMatchObject({ retryable: false });
	}
	// Nothing changed: it still waits in the schedule.
	expect((await statusOf(later)).status).toBe("scheduled");
	expect(await eventsOf(later)).toEqual(["scheduled"]);
	expect((await advance(now, "dropped")).body.status).toBe("dropped");
	expect((await advance(later, "accepted")).body.status).toBe("accepted");
	expect(await eventsOf(later)).toEqual(["scheduled", "searching", "accepted"]);
}, 20_000);

it("lets a manual scheduled ride that comes due search, then wait past its search deadline until advanced", async () => {
	// 2 s of room over the minimum lead, so a slow booking is still inside the window.
	const pickupAt = inSeconds(SCHEDULE_MIN_LEAD_S + 2);
	const orderId = await book({ sandbox: "manual" }, api, { pickupAt });
	// The schedule starts it at its dispatch time, as any scheduled ride.
	await waitFor(`${orderId} to be dispatched at its lead time`, async () => (await statusOf(orderId)).status === "searching", 10_000);
	expect(await eventsOf(orderId)).toEqual(["scheduled", "searching"]);
	// Past its pickup time, so past its search deadline and the dispatch timeout: a manual ride still waits.
	await sleep(Math.max(0, Date.parse(pickupAt) + 300 - Date.now()));
	await bed.node.broker.call("dispatch.runOnce");
	expect(await bed.node.broker.call<RideView, unknown>("dispatch.ride", { orderId })).toMatchObject({ phase: "searching", offers: [] });
	expect((await statusOf(orderId)).status).toBe("searching");
	expect(await eventsOf(orderId)).toEqual(["scheduled", "searching"]);
	expect((await advance(orderId)).body.status).toBe("accepted");
}, 20_000);

it("lets exactly one of two racing advances take its steps; the other is 409 CONFLICT", async () => {
	const orderId = await book();
	// Two walks to the end at once: with a double step, events would repeat or a step would fail.
	const answers = await Promise.all([advance(orderId, "dropped"), advance(orderId, "dropped")]);
	expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
	const refused = answers.find((a) => a.status === 409)!;
	expect(refused.body.code).toBe("CONFLICT");
	expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
	expect((await statusOf(orderId)).status).toBe("dropped");
	expect(await eventsOf(orderId)).toEqual(["accepted", "location_updated", "arrived", "started", "location_updated", "dropped"]);
}, 20_000);

it("refuses bad input, other partners' and non-manual rides, and changes nothing", async () => {
	const orderId = await book();
	const bad = await advance(orderId, "flying");
	expectEnvelope(bad, 400, "VALIDATION_ERROR");
	expect(bad.body.details?.map((d) => d.field)).toEqual(["to"]);
	expectEnvelope(await api.post<OrderAnswer>("/ride/sandbox/advance", {}), 400, "VALIDATION_ERROR");
	expectEnvelope(await api.post<OrderAnswer>("/ride/sandbox/advance", { orderId, steps: 2 }), 400, "VALIDATION_ERROR");
	expectEnvelope(await advance("ord_doesnotexist"), 404, "ORDER_NOT_FOUND");
	expectEnvelope(await advance(orderId, undefined, otherApi), 404, "ORDER_NOT_FOUND");
	const automatic = await book({ partnerRef: "not-manual" });
	expectEnvelope(await advance(automatic), 409, "SANDBOX_NOT_MANUAL");
	expect((await statusOf(orderId)).status).toBe("searching");
	expect(await eventsOf(orderId)).toEqual([]);
});

it("refuses a live key with 403 SANDBOX_ONLY", async () => {
	const orderId = await book();
	const res = await advance(orderId, undefined, liveApi);
	expectEnvelope(res, 403, "SANDBOX_ONLY");
	expect(res.body).toMatchObject({ retryable: false });
	expect((await statusOf(orderId)).status).toBe("searching");
});
