import { Webhook } from "standardwebhooks";
import {
	createRide,
	move,
	startPartnerEndpoint,
	startWebhookTestbed,
	waitFor,
	type PartnerEndpoint,
	type ReceivedWebhook,
	type WebhookTestbed,
} from "../../helpers/webhooks";

/**
 * Test and live webhooks cannot be confused, through the real services
 * (partners, orders, notifications) on the server PostgreSQL and real
 * partner endpoints:
 *  - a test ride's webhook is signed with the partner's test secret only and
 *    a live ride's with its live secret only, so a test webhook (what a leaked
 *    test key can produce, with chosen metadata) never verifies at the
 *    partner's production endpoint, nor the reverse;
 *  - the body's `mode` and the `Ride-Mode` header say the ride's mode;
 *  - delivery slots are per (partner, mode): test deliveries holding every
 *    test slot (a hanging test endpoint) do not hold back the same partner's
 *    live deliveries.
 */

const PARTNER_CAP = 2;

let bed: WebhookTestbed;
const endpoints: PartnerEndpoint[] = [];

beforeAll(async () => {
	// Tries wait up to 30 s: a hung test try holds its slot for the whole test.
	bed = await startWebhookTestbed("whmodes", { WEBHOOK_PARTNER_CONCURRENCY: String(PARTNER_CAP), WEBHOOK_TIMEOUT_MS: "30000" });
}, 60_000);

afterAll(async () => {
	for (const e of endpoints) await e.close();
	await bed?.stop();
});

const verifies = (secret: string, hook: ReceivedWebhook): boolean => {
	try {
		new Webhook(secret).verify(hook.raw, hook.headers);
		return true;
	} catch {
		return false;
	}
};

async function endpoint(): Promise<PartnerEndpoint> {
	// Answers 200 whatever the signature (the first test checks signatures itself).
	const e = await startPartnerEndpoint(bed.partner.webhookSecret);
	endpoints.push(e);
	return e;
}

it("a test ride's webhook verifies with the test secret only, a live ride's with the live secret only; body and Ride-Mode say the mode", async () => {
	const { test, live } = bed.partner.webhookSecrets;
	expect(test).not.toBe(live);
	const target = await endpoint();

	const testRide = await createRide(bed.node.broker, bed.partner, target.url, "test");
	const liveRide = await createRide(bed.node.broker, bed.partner, target.url, "live");
	await move(bed.node.broker, testRide, "accepted");
	await move(bed.node.broker, liveRide, "accepted");
	const testHook = await waitFor("the test ride's webhook", () => target.received.find((h) => h.orderId === testRide.orderId));
	const liveHook = await waitFor("the live ride's webhook", () => target.received.find((h) => h.orderId === liveRide.orderId));

	expect({ test: verifies(test, testHook), live: verifies(live, testHook) }).toEqual({ test: true, live: false });
	expect({ test: verifies(test, liveHook), live: verifies(live, liveHook) }).toEqual({ test: false, live: true });
	expect({ body: testHook.body.mode, header: testHook.rideMode }).toEqual({ body: "test", header: "test" });
	expect({ body: liveHook.body.mode, header: liveHook.rideMode }).toEqual({ body: "live", header: "live" });

	// /ride/events shows the same payload, mode included.
	const events = await bed.node.broker.call<{ events: Array<{ payload: Record<string, unknown> }> }, { orderId: string }>(
		"orders.events",
		{ orderId: liveRide.orderId },
		{ meta: { partnerId: bed.partner.partnerId, mode: "live" } },
	);
	expect(events.events.map((e) => e.payload.mode)).toEqual(events.events.map(() => "live"));
});

it("test deliveries filling their slots do not hold back the same partner's live deliveries", async () => {
	// The test endpoint never answers: every test try holds its slot until its 30 s timeout.
	const testTarget = await endpoint();
	testTarget.behave(() => ({ hang: true }));
	const liveTarget = await endpoint();

	const testRides = await Promise.all(Array.from({ length: PARTNER_CAP * 2 }, () => createRide(bed.node.broker, bed.partner, testTarget.url, "test")));
	for (const ride of testRides) await move(bed.node.broker, ride, "accepted");
	await waitFor("every test slot taken", () => testTarget.received.length >= PARTNER_CAP || undefined);

	const liveRide = await createRide(bed.node.broker, bed.partner, liveTarget.url, "live");
	await move(bed.node.broker, liveRide, "accepted");
	const delivered = await waitFor("the live webhook delivered", () => liveTarget.delivered().find((h) => h.orderId === liveRide.orderId), 20_000);
	expect(delivered.body.mode).toBe("live");
	// Ordered, not timed: the live webhook got through while the test tries still held their slots (none ended,
	// none answered), and no more test tries than the cap were ever let out.
	expect(testTarget.received.filter((h) => h.answered !== 0 || h.abandoned)).toEqual([]);
	expect(testTarget.received.length).toBe(PARTNER_CAP);
});
