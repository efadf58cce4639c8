import type { Client } from "pg";
import { uniqueNamespace, type TestNode } from "../../helpers/node";
import { Cluster, processesFor } from "../../helpers/processes";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import {
	completeRide,
	createPartner,
	createRide,
	move,
	orderViolations,
	recordLocation,
	startPartnerEndpoint,
	type PartnerEndpoint,
	type ReceivedWebhook,
	type TestRide,
} from "../../helpers/webhooks";

/**
 * Fairness between partners, through two real notifications processes:
 * partner A's endpoint answers after 9.5 s (within the 10 s deadline, so
 * nothing fails and no breaker opens) and A has 100 moving rides; partner
 * B's status webhooks still go out at once. The assertion is about order,
 * not time: every one of B's events is accepted before A's endpoint has
 * answered even once. The two processes have 32 status slots each (64 in
 * all, as one default instance): with the old global FIFO claim A's 100
 * status events took every slot and B waited for A's answers.
 *
 * Also: the per-partner cap (WEBHOOK_PARTNER_CONCURRENCY, 16 per kind) holds
 * across both processes (counted at A's endpoint).
 */

const A_RIDES = 100;
const A_DELAY_MS = 9_500;
const PARTNER_CAP = 16;
const B_RIDES = 5;

let bed: Testbed;
let pg: Client;
let node: TestNode;
let notifications: Cluster;
const endpoints: PartnerEndpoint[] = [];
const namespace = uniqueNamespace("fair");

beforeAll(async () => {
	bed = await startTestbed("whfair", { services: ["partners", "riders", "pricing", "orders"], nats: { namespace }, env: { NODE_ID: `${namespace}-main` } });
	({ node, pg } = bed);
	// A try's timeout well above A's 9.5 s: on a loaded machine a try abandoned at 10 s would free its slot while
	// A's endpoint still holds the request, and the endpoint would count more in flight than notifications has.
	notifications = new Cluster(
		"fair",
		bed.db.url,
		{ WEBHOOK_CONCURRENCY: "32", WEBHOOK_PARTNER_CONCURRENCY: String(PARTNER_CAP), WEBHOOK_TIMEOUT_MS: "30000" },
		namespace,
	);
	await notifications.startAll(processesFor({ notifications: 2 }));
});

afterAll(async () => {
	// Endpoints first: A's requests still waiting end at once instead of holding the stop for their 9.5 s.
	for (const e of endpoints) await e.close();
	await notifications?.stopAll();
	await bed?.stop();
});

/** The largest number of requests of `kind` that were at the endpoint at the same moment (unanswered ones count until now). */
function maxConcurrent(hooks: ReceivedWebhook[], kind: "status" | "location"): number {
	const points: Array<[number, number]> = [];
	for (const h of hooks) {
		if ((h.status === "location_updated") !== (kind === "location")) continue;
		points.push([h.receivedAt, 1], [h.answeredAt || h.receivedAt + 60_000, -1]);
	}
	points.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
	let now = 0;
	let max = 0;
	for (const [, d] of points) max = Math.max(max, (now += d));
	return max;
}

it("a partner whose endpoint answers after 9.5 s with 100 moving rides does not hold back another partner's status webhooks", async () => {
	const partnerA = await createPartner(node.broker, "Slow partner");
	const partnerB = await createPartner(node.broker, "Quick partner");
	const a = await startPartnerEndpoint(partnerA.webhookSecret);
	const b = await startPartnerEndpoint(partnerB.webhookSecret);
	endpoints.push(a, b);
	a.behave(() => ({ delayMs: A_DELAY_MS }));

	// A: 100 rides (creating one sends nothing), then all of them move at once: 100 status events, then positions.
	const ridesA: TestRide[] = await Promise.all(Array.from({ length: A_RIDES }, () => createRide(node.broker, partnerA, `${a.url}/a`)));
	await Promise.all(ridesA.map((r) => move(node.broker, r, "accepted")));
	await Promise.all(ridesA.map((r) => recordLocation(node.broker, r, 12.97)));
	await waitFor("A's slow requests in flight", () => a.received.length >= PARTNER_CAP, 15_000, 20);

	// B: ordinary rides through their whole life, while A's requests are all still waiting.
	const ridesB: TestRide[] = await Promise.all(Array.from({ length: B_RIDES }, () => createRide(node.broker, partnerB, `${b.url}/b`)));
	await Promise.all(ridesB.map((r) => completeRide(node.broker, r)));
	const bEvents = B_RIDES * 4;
	await waitFor("B's status events delivered", () => b.delivered().length === bEvents, 30_000, 20);
	const bDoneAt = Math.max(...b.delivered().map((h) => h.answeredAt));

	const firstAnswerOfA = a.received.filter((h) => h.answered > 0).map((h) => h.answeredAt);
	// The point of the test: B never waited for A's slow endpoint.
	expect(firstAnswerOfA.filter((t) => t <= bDoneAt)).toEqual([]);
	expect(a.received.length).toBeGreaterThanOrEqual(PARTNER_CAP);
	expect(orderViolations(b.received)).toEqual([]);
	for (const ride of ridesB)
		expect(
			b
				.delivered()
				.filter((h) => h.orderId === ride.orderId)
				.map((h) => h.status),
		).toEqual(["accepted", "arrived", "started", "dropped"]);

	// A is served too, never more than its cap per kind at once across both processes.
	await waitFor("some of A's events answered", () => a.delivered().length >= PARTNER_CAP, 30_000, 50);
	expect(maxConcurrent(a.received, "status")).toBeLessThanOrEqual(PARTNER_CAP);
	expect(maxConcurrent(a.received, "location")).toBeLessThanOrEqual(PARTNER_CAP);
	expect(a.concurrentDuplicates).toEqual([]);
	const { rows } = await pg.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE partner_id = $1 AND state = 'failed'", [partnerA.partnerId]);
	expect(rows[0].n).toBe(0);
	const aByThen = a.received.filter((h) => h.receivedAt <= bDoneAt).length;
	console.log(
		`webhook-fairness: B's ${bEvents} events done ${bDoneAt - Math.min(...a.received.map((h) => h.receivedAt))} ms after A's first request; A had ${aByThen} requests waiting by then`,
	);
});
