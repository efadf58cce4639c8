import { sleep, waitFor } from "../../helpers/wait";
import {
	createRide,
	move,
	orderViolations,
	recordLocation,
	startWebhookTestbed,
	type PartnerEndpoint,
	type TestPartner,
	type TestRide,
	type WebhookTestbed,
} from "../../helpers/webhooks";

/**
 * Location events end to end (API.md, "Webhooks"): a `location_updated`
 * event is dropped once older than its lifetime (`WEBHOOK_LOCATION_TTL_MS`,
 * 120 s by default, 2 s here), and a location event older than one already
 * delivered is never sent. Real rides moved through orders, the outbox read
 * by notifications, a real partner endpoint on 127.0.0.1.
 */

const LOCATION_TTL_MS = 2_000;
// A try every 300 ms for half a minute: a status event outlives any outage in these tests.
const SCHEDULE = Array.from({ length: 100 }, (_, i) => (i + 1) * 300).join(",");

let bed: WebhookTestbed;
let node: WebhookTestbed["node"];
let partner: TestPartner;
let endpoint: PartnerEndpoint;
let hooksOf: WebhookTestbed["hooksOf"];
let deliveredOf: WebhookTestbed["deliveredOf"];
let states: WebhookTestbed["states"];

beforeAll(async () => {
	bed = await startWebhookTestbed("webhook_location", {
		WEBHOOK_LOCATION_TTL_MS: String(LOCATION_TTL_MS),
		WEBHOOK_RETRY_SCHEDULE_MS: SCHEDULE,
		WEBHOOK_TIMEOUT_MS: "800",
	});
	({ node, partner, endpoint, hooksOf, deliveredOf, states } = bed);
});

afterAll(async () => {
	await bed?.stop();
});

async function eventAt(ride: TestRide, sequence: number) {
	const row = (await bed.eventsOf(ride.orderId)).find((e) => e.sequence === sequence);
	if (!row) throw new Error(`${ride.orderId} has no event #${sequence}`);
	return row;
}

async function stateOf(eventId: string): Promise<string> {
	return (await states([eventId]))[eventId].state;
}

/** Lets a few polls (1 s each) pass, so anything that would still go out has had its chance. */
const letPollsPass = (ms = 2_500): Promise<void> => sleep(ms);

it("drops location events past their lifetime while the endpoint is down; every status event goes out in order once it is back", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/down`);
	let down = true;
	endpoint.behave((hook) => (hook.path.endsWith("/down") && down ? { status: 500, body: "down for maintenance" } : undefined));

	await move(node.broker, ride, "accepted"); // #1
	await recordLocation(node.broker, ride, 12.96); // #2, superseded by #3
	await recordLocation(node.broker, ride, 12.965); // #3, the newest: expires
	const l2 = await eventAt(ride, 2);
	const l3 = await eventAt(ride, 3);
	await waitFor("the newest position to expire", async () => (await stateOf(l3.id)) === "expired", 15_000, 100);
	expect(await stateOf(l2.id)).toBe("superseded");

	await move(node.broker, ride, "arrived"); // #4
	await recordLocation(node.broker, ride, 12.9716); // #5: expires too
	const l5 = await eventAt(ride, 5);
	await waitFor("the second position to expire", async () => (await stateOf(l5.id)) === "expired", 15_000, 100);
	await move(node.broker, ride, "started"); // #6

	// The endpoint was tried all along, only ever with the ride's first event (it holds the others back).
	const whileDown = hooksOf(ride);
	expect(whileDown.length).toBeGreaterThanOrEqual(2);
	expect(whileDown.every((h) => h.sequence === 1 && h.answered === 500)).toBe(true);

	down = false;
	await waitFor("every status event", () => deliveredOf(ride).length === 3, 15_000);
	await letPollsPass();

	expect(deliveredOf(ride).map((h) => [h.sequence, h.status])).toEqual([
		[1, "accepted"],
		[4, "arrived"],
		[6, "started"],
	]);
	expect(orderViolations(hooksOf(ride))).toEqual([]);
	// The expired and superseded positions were never sent, not even tried.
	expect(hooksOf(ride).filter((h) => h.status === "location_updated")).toEqual([]);
	expect(endpoint.received.every((h) => h.signatureValid)).toBe(true);

	// /ride/events shows why: the positions are `expired` (or `superseded`), never tried.
	const view = await node.broker.call<
		{ events: Array<{ sequence: number; status: string; delivery: { state: string; attempts: number } }> },
		{ orderId: string }
	>("orders.events", { orderId: ride.orderId }, { meta: { partnerId: partner.partnerId } });
	expect(view.events.map((e) => [e.sequence, e.status, e.delivery.state])).toEqual([
		[1, "accepted", "delivered"],
		[2, "location_updated", "superseded"],
		[3, "location_updated", "expired"],
		[4, "arrived", "delivered"],
		[5, "location_updated", "expired"],
		[6, "started", "delivered"],
	]);
	expect(view.events.filter((e) => e.status === "location_updated").every((e) => e.delivery.attempts === 0)).toBe(true);
	expect(view.events[0].delivery.attempts).toBe(hooksOf(ride).filter((h) => h.sequence === 1).length);
});

it("retries a failing location event only within its lifetime, then it is expired and never sent again", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/flaky-positions`);
	endpoint.behave((hook) => (hook.path.endsWith("/flaky-positions") && hook.status === "location_updated" ? { status: 503 } : undefined));
	await move(node.broker, ride, "accepted");
	await waitFor("accepted", () => deliveredOf(ride).length === 1);

	await recordLocation(node.broker, ride, 12.96); // #2: every try answered 503
	const position = await eventAt(ride, 2);
	await waitFor("the position to expire", async () => (await stateOf(position.id)) === "expired", 15_000, 100);
	const tries = hooksOf(ride).filter((h) => h.eventId === position.id);
	expect(tries.length).toBeGreaterThanOrEqual(2); // retried while it was fresh
	expect(tries.every((h) => h.answered === 503)).toBe(true);

	await letPollsPass();
	expect(hooksOf(ride).filter((h) => h.eventId === position.id)).toHaveLength(tries.length);
	expect((await states([position.id]))[position.id]).toMatchObject({ state: "expired", attempts: tries.length, lastStatus: 503, lastError: "HTTP_5XX" });
});

it("never sends a location event older than one already delivered", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/positions`);
	// The first try of an older position is slow and fails: it is still pending when a newer one has gone out.
	const slowFailure = { status: 500, delayMs: 500 };
	endpoint.behave((hook, attempt) => (hook.path.endsWith("/positions") && hook.sequence === 2 && attempt === 1 ? slowFailure : undefined));
	await move(node.broker, ride, "accepted");
	await waitFor("accepted", () => deliveredOf(ride).length === 1);

	await recordLocation(node.broker, ride, 12.96); // #2
	const older = await eventAt(ride, 2);
	await waitFor("the older position in flight", () => hooksOf(ride).some((h) => h.eventId === older.id));
	await recordLocation(node.broker, ride, 12.965); // #3
	const newer = await eventAt(ride, 3);
	await waitFor("the newer position", () => deliveredOf(ride).some((h) => h.eventId === newer.id));
	const newerDeliveredAt = deliveredOf(ride).find((h) => h.eventId === newer.id)!.answeredAt;

	await waitFor("the older position settled", async () => ["superseded", "expired"].includes(await stateOf(older.id)), 10_000, 100);
	await letPollsPass();
	// Its one (failed) try started before the newer position existed; it was not tried again after that went out.
	const olderHooks = hooksOf(ride).filter((h) => h.eventId === older.id);
	expect(olderHooks).toHaveLength(1);
	expect(olderHooks[0].answered).toBe(500);
	expect(olderHooks[0].receivedAt).toBeLessThanOrEqual(newerDeliveredAt);
	expect(deliveredOf(ride).map((h) => [h.sequence, h.status])).toEqual([
		[1, "accepted"],
		[3, "location_updated"],
	]);

	// A status event carries the newest position too: a position that has not gone out is never sent after it.
	endpoint.behave((hook, attempt) => (hook.path.endsWith("/positions") && hook.sequence === 4 && attempt === 1 ? slowFailure : undefined));
	await recordLocation(node.broker, ride, 12.97); // #4: its first try is slow and fails
	const stale = await eventAt(ride, 4);
	await waitFor("the position in flight", () => hooksOf(ride).some((h) => h.eventId === stale.id));
	await move(node.broker, ride, "arrived"); // #5
	await waitFor("arrived", () => deliveredOf(ride).some((h) => h.status === "arrived"));
	await waitFor("the stale position settled", async () => ["superseded", "expired"].includes(await stateOf(stale.id)), 10_000, 100);
	await letPollsPass();
	expect(hooksOf(ride).filter((h) => h.eventId === stale.id)).toHaveLength(1);
	expect(deliveredOf(ride).map((h) => [h.sequence, h.status])).toEqual([
		[1, "accepted"],
		[3, "location_updated"],
		[5, "arrived"],
	]);
	expect(orderViolations(hooksOf(ride))).toEqual([]);
});

it("never lets a position in flight arrive after a later status event: the status event waits for that try", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/slow-position`);
	// The position's try is answered (200) late; the status event made meanwhile must not overtake it.
	endpoint.behave((hook) => (hook.path.endsWith("/slow-position") && hook.status === "location_updated" ? { status: 200, delayMs: 600 } : undefined));
	await move(node.broker, ride, "accepted"); // #1
	await waitFor("accepted", () => deliveredOf(ride).length === 1);

	await recordLocation(node.broker, ride, 12.96); // #2
	const position = await eventAt(ride, 2);
	await waitFor("the position in flight", () => hooksOf(ride).some((h) => h.eventId === position.id));
	await move(node.broker, ride, "arrived"); // #3, made while #2 is in flight
	await waitFor("arrived", () => deliveredOf(ride).some((h) => h.status === "arrived"));

	const positionTry = hooksOf(ride).find((h) => h.eventId === position.id)!;
	const arrived = hooksOf(ride).find((h) => h.status === "arrived")!;
	expect(positionTry.answered).toBe(200);
	expect(arrived.receivedAt).toBeGreaterThanOrEqual(positionTry.answeredAt);
	expect(deliveredOf(ride).map((h) => [h.sequence, h.status])).toEqual([
		[1, "accepted"],
		[2, "location_updated"],
		[3, "arrived"],
	]);
	expect(await stateOf(position.id)).toBe("delivered");
});
