import { createPartner, createRide, move, startPartnerEndpoint, type PartnerEndpoint, type TestPartner } from "../../helpers/webhooks";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";

/**
 * One receiver shared by two partners (one host:port, a path each), on the
 * server PostgreSQL: the per-host share (WEBHOOK_HOST_CONCURRENCY) and the
 * circuit breaker are per (partner, host), so partner A's slow or failing
 * path never holds or pauses partner B's deliveries to the same host.
 */

let bed: Testbed;
let endpoint: PartnerEndpoint;

beforeAll(async () => {
	bed = await startTestbed("whshared", {
		services: ["partners", "riders", "pricing", "orders", "notifications"],
		env: {
			WEBHOOK_ALLOW_PRIVATE: "true",
			WEBHOOK_POLL_MS: "50",
			WEBHOOK_TIMEOUT_MS: "10000",
			WEBHOOK_HOST_CONCURRENCY: "1",
			WEBHOOK_BREAKER_FAILURES: "2",
			// Open far longer than any wait below: a pause that reached partner B would fail the test.
			WEBHOOK_BREAKER_OPEN_MS: "600000",
			WEBHOOK_RETRY_SCHEDULE_MS: Array.from({ length: 30 }, () => "100").join(","),
		},
	});
	endpoint = await startPartnerEndpoint("whsec_dGVzdA==");
});

afterAll(async () => {
	await endpoint?.close();
	await bed?.stop();
});

async function partners(): Promise<[TestPartner, TestPartner]> {
	return [await createPartner(bed.node.broker, "Partner A"), await createPartner(bed.node.broker, "Partner B")];
}

it("partner A's try hanging on the shared host does not hold partner B's share of it", async () => {
	const [a, b] = await partners();
	endpoint.behave((hook) => (hook.path === "/hooks/slow-a" ? { hang: true } : undefined));
	const rideA = await createRide(bed.node.broker, a, `${endpoint.url}/slow-a`);
	await move(bed.node.broker, rideA, "accepted");
	await waitFor("A's try in flight", () => endpoint.received.some((h) => h.orderId === rideA.orderId), 10_000, 20);

	const rideB = await createRide(bed.node.broker, b, `${endpoint.url}/b`);
	await move(bed.node.broker, rideB, "accepted");
	await waitFor("B's event delivered", () => endpoint.delivered().some((h) => h.orderId === rideB.orderId), 15_000, 20);
	// B went out while A's only try was still hanging (host cap 1 per partner and host, not per host).
	const triesOfA = endpoint.received.filter((h) => h.orderId === rideA.orderId);
	expect(triesOfA).toHaveLength(1);
	expect(triesOfA[0]).toMatchObject({ answered: 0, abandoned: false });
});

it("partner A's failing path opens A's breaker for the host only; partner B keeps being delivered there", async () => {
	const [a, b] = await partners();
	endpoint.behave((hook) => (hook.path === "/hooks/down-a" ? { drop: true } : undefined));
	const rideA = await createRide(bed.node.broker, a, `${endpoint.url}/down-a`);
	await move(bed.node.broker, rideA, "accepted");
	const host = `127.0.0.1:${endpoint.port}`;
	await waitFor(
		"A's breaker open",
		async () =>
			(
				await bed.pg
					.query("SELECT 1 FROM webhook_partner_hosts WHERE partner_id = $1 AND host = $2 AND open_until > now()", [a.partnerId, host])
					.catch(() => ({ rows: [] }))
			).rows.length === 1,
		15_000,
		20,
	);

	const rideB = await createRide(bed.node.broker, b, `${endpoint.url}/b`);
	await move(bed.node.broker, rideB, "accepted");
	await move(bed.node.broker, rideB, "arrived");
	await waitFor("B's events delivered", () => endpoint.delivered().filter((h) => h.orderId === rideB.orderId).length === 2, 15_000, 20);
	// A stays paused (no try while open), and B's answers did not close A's breaker.
	const { rows } = await bed.pg.query("SELECT partner_id, opens, open_until > now() AS open FROM webhook_partner_hosts WHERE host = $1", [host]);
	expect(rows.find((r) => r.partner_id === a.partnerId)).toMatchObject({ opens: 1, open: true });
	expect(rows.find((r) => r.partner_id === b.partnerId)).toBeUndefined();
});
