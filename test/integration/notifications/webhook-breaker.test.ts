import { startWebhookTestbed, waitFor, createRide, move, orderViolations, type WebhookTestbed, type TestRide } from "../../helpers/webhooks";

/**
 * The per-host circuit breaker, with a real endpoint that stops answering:
 * after WEBHOOK_BREAKER_FAILURES timeouts in a row the host is paused (state
 * in webhook_partner_hosts per partner and host, shared by every instance), then a single half-open probe
 * goes out; its answer closes the breaker and the waiting events follow, in
 * order.
 */

let bed: WebhookTestbed;

beforeAll(async () => {
	bed = await startWebhookTestbed("whbreak", {
		WEBHOOK_TIMEOUT_MS: "300",
		WEBHOOK_POLL_MS: "50",
		WEBHOOK_BREAKER_FAILURES: "3",
		WEBHOOK_BREAKER_OPEN_MS: "1500",
		WEBHOOK_RETRY_SCHEDULE_MS: Array.from({ length: 30 }, () => "100").join(","),
	});
});

afterAll(async () => {
	await bed?.stop();
});

it("pauses a host that keeps timing out, probes it once, and closes again on its answer", async () => {
	const { node, pg, endpoint, partner } = bed;
	endpoint.behave(() => ({ hang: true }));
	const rides: TestRide[] = [];
	for (let i = 0; i < 4; i++) rides.push(await createRide(node.broker, partner, endpoint.url));
	await Promise.all(rides.map((r) => move(node.broker, r, "accepted")));

	await waitFor(
		"the breaker open",
		async () => {
			const { rows } = await pg.query("SELECT opens, open_until FROM webhook_partner_hosts WHERE open_until IS NOT NULL");
			return rows.length === 1 && rows[0].opens >= 1;
		},
		20_000,
		20,
	);
	const beforeOpen = endpoint.received.length;
	endpoint.behave(() => ({ status: 200 }));
	await Promise.all(rides.map((r) => move(node.broker, r, "arrived")));

	await waitFor("every event delivered", () => endpoint.delivered().length === rides.length * 2, 30_000, 20);
	const after = endpoint.received.slice(beforeOpen);
	const probe = after.find((h) => h.answered === 200)!;
	// Half-open: the probe went out alone; nothing else reached the host before its answer.
	expect(after.filter((h) => h !== probe && h.receivedAt < probe.answeredAt)).toEqual([]);
	const { rows } = await pg.query("SELECT partner_id, host, failures, opens, open_until FROM webhook_partner_hosts");
	expect(rows).toEqual([{ partner_id: partner.partnerId, host: `127.0.0.1:${endpoint.port}`, failures: 0, opens: 0, open_until: null }]);
	expect(orderViolations(endpoint.received)).toEqual([]);
	// Timeouts were tries (recorded), the pause was not: the status events are still in their first round, none failed.
	const failed = await pg.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE state = 'failed'");
	expect(failed.rows[0].n).toBe(0);
});
