import type { Client } from "pg";
import { Webhook } from "standardwebhooks";
import { connect } from "../../helpers/db";
import { freePort } from "../../helpers/http";
import { sleep, waitFor } from "../../helpers/wait";
import {
	completeRide,
	createPartner,
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
import type { StatsResult } from "../../../contracts/notifications";
import { FIRST_API_VERSION } from "../../../contracts/versions";

/**
 * Webhook delivery end to end, in one process: real rides moved through
 * orders, the outbox read by notifications, and a real partner endpoint on
 * 127.0.0.1 that verifies every signature with the `standardwebhooks` package.
 */

const SCHEDULE = "100,200,400,800,1600,3200,6400"; // eight tries over ~6.4 s
const TIMEOUT_MS = 800;

let bed: WebhookTestbed;
let node: WebhookTestbed["node"];
let pg: Client;
let partner: TestPartner;
let endpoint: PartnerEndpoint;
let hooksOf: WebhookTestbed["hooksOf"];
let deliveredOf: WebhookTestbed["deliveredOf"];
let eventsOf: WebhookTestbed["eventsOf"];
let states: WebhookTestbed["states"];

beforeAll(async () => {
	// Metrics on (a free port for this node's Prometheus endpoint), so the delivery metrics are live.
	bed = await startWebhookTestbed("webhooks", {
		WEBHOOK_RETRY_SCHEDULE_MS: SCHEDULE,
		WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
		METRICS_PORT: String(await freePort()),
	});
	({ node, pg, partner, endpoint, hooksOf, deliveredOf, eventsOf, states } = bed);
});

afterAll(async () => {
	await bed?.stop();
});

async function attemptsOf(eventId: string): Promise<Array<{ outcome: string; http_status: number | null; attempt: number }>> {
	return (await bed.pg.query("SELECT outcome, http_status, attempt FROM webhook_attempts WHERE event_id = $1 ORDER BY started_at", [eventId])).rows;
}

it("retries a 500 with the same webhook-id until it succeeds, keeps the ride's order, and never holds back other rides", async () => {
	const failing = await createRide(node.broker, partner, `${endpoint.url}/failing`);
	const healthy = await createRide(node.broker, partner, `${endpoint.url}/healthy`);
	let healthyDone = false;
	endpoint.behave((hook, attempt) => {
		// The failing ride's endpoint answers 500 until the other ride is fully delivered (and at least three times).
		if (hook.path.endsWith("/failing") && (!healthyDone || attempt <= 3)) return { status: 500, body: "upstream broken" };
		return undefined;
	});

	await completeRide(node.broker, failing);
	await completeRide(node.broker, healthy);

	await waitFor("the healthy ride's four events", () => deliveredOf(healthy).length === 4);
	// Other rides are unaffected: all of them went out while the failing ride's first event was still failing.
	expect(deliveredOf(failing)).toHaveLength(0);
	expect(hooksOf(failing).every((h) => h.sequence === 1)).toBe(true);
	healthyDone = true;

	await waitFor("the failing ride's four events", () => deliveredOf(failing).length === 4, 20_000);

	const first = hooksOf(failing).filter((h) => h.sequence === 1);
	expect(first.length).toBeGreaterThanOrEqual(4);
	expect(new Set(first.map((h) => h.eventId)).size).toBe(1); // same webhook-id on every try
	expect(first.slice(0, -1).every((h) => h.answered === 500)).toBe(true);
	expect(endpoint.received.every((h) => h.signatureValid)).toBe(true);

	// Order kept: 1, 2, 3, 4 with no later event before an earlier one was accepted.
	expect(deliveredOf(failing).map((h) => h.status)).toEqual(["accepted", "arrived", "started", "dropped"]);
	expect(deliveredOf(failing).map((h) => h.sequence)).toEqual([1, 2, 3, 4]);
	expect(orderViolations([...hooksOf(failing), ...hooksOf(healthy)])).toEqual([]);

	// Every try recorded; /ride/events shows the delivery state.
	const [accepted] = await eventsOf(failing.orderId);
	const tries = await attemptsOf(accepted.id);
	expect(tries.map((t) => t.outcome)).toEqual([...Array(first.length - 1).fill("HTTP_5XX"), "delivered"]);
	expect(tries.map((t) => t.attempt)).toEqual(tries.map((_, i) => i + 1));
	const view = await node.broker.call<{ events: Array<{ eventId: string; delivery: Record<string, unknown> }> }, { orderId: string }>(
		"orders.events",
		{ orderId: failing.orderId },
		{ meta: { partnerId: partner.partnerId } },
	);
	expect(view.events[0].delivery).toMatchObject({ state: "delivered", attempts: first.length, lastStatus: 200, lastError: null });
	expect(view.events.every((e) => e.delivery.state === "delivered")).toBe(true);

	// The body is exactly the stored event rendered in the partner's pinned API version (which it names), signed as sent.
	const stored = (await pg.query("SELECT payload FROM ride_events WHERE id = $1", [accepted.id])).rows[0].payload;
	expect(first[0].body).toEqual({ ...stored, apiVersion: FIRST_API_VERSION });
	expect(first[0].body.eventId).toBe(accepted.id);
});

it("times out an endpoint that hangs, records TIMEOUT, and delivers on the next try", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/slow`);
	endpoint.behave((hook, attempt) => (hook.path.endsWith("/slow") && attempt === 1 ? { hang: true } : undefined));
	await move(node.broker, ride, "accepted");

	await waitFor("delivery after a timeout", () => deliveredOf(ride).length === 1, 15_000);
	const hooks = hooksOf(ride);
	await waitFor("the try recorded", async () => (await states([hooks[0].eventId]))[hooks[0].eventId].state === "delivered");
	expect(hooks.length).toBe(2);
	expect(hooks[0].eventId).toBe(hooks[1].eventId);
	const tries = await attemptsOf(hooks[0].eventId);
	expect(tries.map((t) => t.outcome)).toEqual(["TIMEOUT", "delivered"]);
	expect(tries[0].http_status).toBeNull();
});

it("marks an event failed after its last try, then lets the ride's later events go; operators can replay", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/down`);
	let down = true;
	endpoint.behave((hook) => (hook.path.endsWith("/down") && down ? { status: 503, body: "maintenance" } : undefined));
	await move(node.broker, ride, "accepted");
	await move(node.broker, ride, "arrived");
	const [accepted, arrived] = await eventsOf(ride.orderId);

	await waitFor("the first event to fail", async () => (await states([accepted.id]))[accepted.id].state === "failed", 20_000);
	// While the first event was retrying, the second was held back: it only went out after the eighth try failed.
	const tries = hooksOf(ride).filter((h) => h.sequence === 1);
	expect(tries).toHaveLength(8);
	expect(
		hooksOf(ride)
			.filter((h) => h.sequence === 2)
			.every((h) => h.receivedAt >= tries[7].answeredAt),
	).toBe(true);
	expect((await states([accepted.id]))[accepted.id]).toMatchObject({ state: "failed", attempts: 8, lastStatus: 503, lastError: "HTTP_5XX" });

	// `failed` no longer holds back the ride's later events.
	down = false;
	await waitFor("the later event", async () => (await states([arrived.id]))[arrived.id].state === "delivered");

	// replayFailed: every failed event of the partner since a time.
	const replayed = await node.broker.call<{ replayed: number; eventIds: string[] }, unknown>("notifications.replayFailed", {
		partnerId: partner.partnerId,
		since: new Date(Date.now() - 60_000).toISOString(),
	});
	expect(replayed.eventIds).toContain(accepted.id);
	await waitFor("the replayed event", async () => (await states([accepted.id]))[accepted.id].state === "delivered");
	expect((await states([accepted.id]))[accepted.id].attempts).toBe(9);

	// replay: one event again (same webhook-id), e.g. a partner lost it on their side.
	const accepted200 = () => hooksOf(ride).filter((h) => h.eventId === arrived.id && h.answered === 200).length;
	const before = accepted200();
	await expect(node.broker.call("notifications.replay", { eventId: arrived.id })).resolves.toMatchObject({ replayed: true });
	await waitFor("the second copy", () => accepted200() === before + 1);
	await expect(node.broker.call("notifications.replay", { eventId: "evt_unknown" })).rejects.toMatchObject({ code: 404 });

	const stats = await node.broker.call<StatsResult>("notifications.stats");
	expect(stats.states.delivered).toBeGreaterThan(0);
	expect(stats.attemptsLastHour.HTTP_5XX).toBeGreaterThanOrEqual(8);
});

it("honours Retry-After on 429", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/throttled`);
	endpoint.behave((hook, attempt) => (hook.path.endsWith("/throttled") && attempt === 1 ? { status: 429, headers: { "retry-after": "2" } } : undefined));
	await move(node.broker, ride, "accepted");
	await waitFor("delivery after Retry-After", () => deliveredOf(ride).length === 1, 15_000);
	const [first, second] = hooksOf(ride);
	// The schedule alone would have retried after 100 ms; the partner asked for 2 s.
	expect(second.receivedAt - first.receivedAt).toBeGreaterThanOrEqual(1_900);
});

it("sends only the newest of several pending location events; older ones are superseded", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/moving`);
	let hold = true;
	endpoint.behave((hook) => (hook.path.endsWith("/moving") && hold ? { status: 500 } : undefined));
	await move(node.broker, ride, "accepted");
	// Three positions while the ride's first status event cannot be delivered.
	await recordLocation(node.broker, ride, 12.96);
	await recordLocation(node.broker, ride, 12.965);
	await recordLocation(node.broker, ride, 12.97);
	hold = false;

	const events = await eventsOf(ride.orderId);
	const newest = events[3];
	await waitFor("the newest position", () => deliveredOf(ride).some((h) => h.eventId === newest.id), 15_000);
	const sent = hooksOf(ride).map((h) => h.sequence);
	expect(sent.filter((s) => s === 2 || s === 3)).toEqual([]);
	expect(deliveredOf(ride).map((h) => [h.sequence, h.status])).toEqual([
		[1, "accepted"],
		[4, "location_updated"],
	]);
	await waitFor("older positions settled", async () => {
		const s = await states([events[1].id, events[2].id]);
		return s[events[1].id].state === "superseded" && s[events[2].id].state === "superseded";
	});
	// A newer status event supersedes a location event that has not gone out; it is never sent after it.
	await recordLocation(node.broker, ride, 12.975);
	await move(node.broker, ride, "arrived");
	await waitFor("arrived", () => deliveredOf(ride).some((h) => h.status === "arrived"));
	const all = await eventsOf(ride.orderId);
	const lastLocation = all.find((e) => e.sequence === 5)!;
	const arrivedAt = hooksOf(ride).find((h) => h.status === "arrived")!.receivedAt;
	expect(hooksOf(ride).filter((h) => h.eventId === lastLocation.id && h.receivedAt > arrivedAt)).toEqual([]);
	await waitFor("the fifth event settled", async () => ["delivered", "superseded"].includes((await states([lastLocation.id]))[lastLocation.id].state));
});

it("sends nothing for a ride change that rolled back", async () => {
	const ride = await createRide(node.broker, partner, `${endpoint.url}/rollback`);
	endpoint.behave(() => undefined);
	// Make orders' own transaction fail after its event row was written: a trigger refuses the insert for this ride.
	await pg.query("CREATE TABLE IF NOT EXISTS poisoned_orders (order_id text PRIMARY KEY)");
	await pg.query(`CREATE OR REPLACE FUNCTION refuse_poisoned() RETURNS trigger AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM poisoned_orders WHERE order_id = NEW.order_id) THEN RAISE EXCEPTION 'test: poisoned ride'; END IF;
			RETURN NEW;
		END $$ LANGUAGE plpgsql`);
	await pg.query("DROP TRIGGER IF EXISTS refuse_poisoned ON ride_events");
	await pg.query(
		"CREATE CONSTRAINT TRIGGER refuse_poisoned AFTER INSERT ON ride_events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_poisoned()",
	);
	await pg.query("INSERT INTO poisoned_orders VALUES ($1)", [ride.orderId]);

	await expect(move(node.broker, ride, "accepted")).rejects.toBeTruthy();
	// A hint about an event that never committed changes nothing either.
	node.broker.emit("orders.rideEventRecorded", { orderId: ride.orderId, eventId: "evt_rolledback", kind: "status" });

	const order = await node.broker.call<{ status: string; version: number }, { orderId: string }>("orders.get", { orderId: ride.orderId });
	expect(order.status).toBe("searching");
	expect(await eventsOf(ride.orderId)).toEqual([]);

	// The next real change goes out, and it is the only thing this ride ever sent.
	await pg.query("DELETE FROM poisoned_orders");
	await move(node.broker, ride, "accepted");
	await waitFor("the committed event", () => deliveredOf(ride).length === 1);
	// Let a few more polls pass: still only that one event.
	await sleep(2_500);
	expect(hooksOf(ride).map((h) => [h.sequence, h.status])).toEqual([[1, "accepted"]]);
	expect((await pg.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE order_id = $1", [ride.orderId])).rows[0].n).toBe(1);
	await pg.query("DROP TRIGGER refuse_poisoned ON ride_events");
});

it("recovers when every PostgreSQL connection is cut during deliveries", async () => {
	const rides: TestRide[] = [];
	for (let i = 0; i < 5; i++) rides.push(await createRide(node.broker, partner, `${endpoint.url}/cut`));
	endpoint.behave((hook) => (hook.path.endsWith("/cut") ? { delayMs: 150 } : undefined));
	for (const ride of rides) await move(node.broker, ride, "accepted");

	// Cut every connection of the services, several times, while deliveries are under way.
	pg.on("error", () => undefined); // the test's own client is cut too
	const killer = await connect(bed.db.url);
	let cuts = 0;
	try {
		for (let i = 0; i < 6; i++) {
			const { rowCount } = await killer.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [
				bed.db.name,
			]);
			cuts += rowCount ?? 0;
			await sleep(120);
		}
	} finally {
		await killer.end();
	}
	expect(cuts).toBeGreaterThan(0);
	bed.pg = pg = await reconnect(pg);

	// The services reconnect: more ride changes commit and everything is delivered, in order.
	for (const ride of rides) await retryOnce(() => move(node.broker, ride, "arrived"));
	await waitFor("every event after the cuts", () => rides.every((r) => deliveredOf(r).length === 2), 30_000);
	for (const ride of rides) expect(deliveredOf(ride).map((h) => h.sequence)).toEqual([1, 2]);
	expect(orderViolations(rides.flatMap(hooksOf))).toEqual([]);
	const ids = (await pg.query("SELECT id FROM ride_events WHERE order_id = ANY($1)", [rides.map((r) => r.orderId)])).rows.map((r) => r.id as string);
	await waitFor("every delivery recorded", async () => Object.values(await states(ids)).every((v) => v.state === "delivered"));
});

it("signs with the partner's own secret: another partner's endpoint cannot verify it", async () => {
	const other = await createPartner(node.broker, "Other partner");
	const ride = await createRide(node.broker, other, `${endpoint.url}/other`);
	endpoint.behave(() => undefined);
	await move(node.broker, ride, "accepted");
	await waitFor("delivery", () => endpoint.received.some((h) => h.orderId === ride.orderId));
	const hook = endpoint.received.find((h) => h.orderId === ride.orderId)!;
	expect(hook.signatureValid).toBe(false); // this endpoint verifies with the first partner's secret
	expect(new Webhook(other.webhookSecret).verify(hook.raw, hook.headers)).toMatchObject({ orderId: ride.orderId, status: "accepted" });
});

it("exposes delivery metrics: tries by outcome, end-to-end latency, pending count and oldest pending age", async () => {
	const metrics = node.broker.metrics;
	const attempts = metrics.getMetric("webhook.attempts.total")!;
	expect(attempts.get({ outcome: "delivered", kind: "status" })?.value).toBeGreaterThan(0);
	expect(attempts.get({ outcome: "HTTP_5XX", kind: "status" })?.value).toBeGreaterThan(0);
	expect(attempts.get({ outcome: "TIMEOUT", kind: "status" })?.value).toBeGreaterThan(0);
	const latency = metrics.getMetric("webhook.delivery.latency")!.get({ kind: "status" }) as { count?: number } | null;
	expect(latency?.count).toBeGreaterThan(0);
	// The gauges are refreshed every 5 s from the database.
	await waitFor("the pending gauges", () => metrics.getMetric("webhook.pending.count")?.get()?.value !== undefined, 10_000, 100);
	expect(metrics.getMetric("webhook.pending.count")!.get()!.value).toBeGreaterThanOrEqual(0);
	expect(metrics.getMetric("webhook.pending.oldest.age")!.get()!.value).toBeGreaterThanOrEqual(0);
});

/** The test's own pg client was cut too. */
async function reconnect(old: Client): Promise<Client> {
	await old.end().catch(() => undefined);
	return connect(bed.db.url);
}

/** A ride change whose first try hit a cut connection: try once more (it committed nothing). */
async function retryOnce(fn: () => Promise<void>): Promise<void> {
	try {
		await fn();
	} catch {
		await fn();
	}
}
