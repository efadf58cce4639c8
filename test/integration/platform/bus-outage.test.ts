import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { PartnerApi, type HttpAnswer } from "../../helpers/http";
import { hasNatsServer, startNatsServer, type OwnNatsServer } from "../../helpers/nats-server";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { rideRequest } from "../../helpers/rides";
import { waitFor } from "../../helpers/wait";
import { createPartner, orderViolations, startPartnerEndpoint, type PartnerEndpoint } from "../../helpers/webhooks";

/**
 * Degraded mode: the bus goes away. A nats-server of the test's own carries
 * the platform split in three (gateway + partners; riders, pricing, orders
 * and notifications; dispatch with the simulated fleet, so ride steps cross
 * the bus too); it is killed with SIGKILL while rides are under way and started
 * again on its port. During the outage every partner call is answered at
 * once with 503 SERVICE_UNAVAILABLE, `Retry-After` and `retryable: true`,
 * although the broker's request timeout is 30 s; when NATS is back calls
 * succeed again, every ride booked before it finishes and every status
 * webhook arrives, in order.
 */

const SIM_ENV = {
	FLEET_MODE: "simulated",
	SIM_SPEED: "300",
	SIM_CITIES: "12.9716,77.5946",
	FLEET_DRIVERS_PER_CITY: "6",
	FLEET_SEED_RADIUS_M: "1500",
	FLEET_TICK_MS: "100",
	DISPATCH_TICK_MS: "50",
	DISPATCH_SWEEP_MS: "1000",
	// A ride step that failed with the bus is taken up again within seconds (as in the cluster test).
	DISPATCH_TRANSITION_LEASE_MS: "3000",
	DISPATCH_OFFER_TIMEOUT_MS: "4000",
	WEBHOOK_RETRY_SCHEDULE_MS: "200,500,1000,1000,1000",
	// Far above how long any call may take here: an answer during the outage can only come from failing fast.
	REQUEST_TIMEOUT_MS: "30000",
};
/** A bound on each call during the outage, a third of the request timeout: the test fails rather than waits. */
const CALL_BOUND_MS = 10_000;
const RIDES = 4;

const describeIfNats = hasNatsServer ? describe : describe.skip;

describeIfNats("bus outage: calls fail fast, rides resume", () => {
	let db: TestDatabase;
	let nats: OwnNatsServer;
	let core: TestNode | undefined;
	let sim: TestNode | undefined;
	let front: TestNode | undefined;
	let endpoint: PartnerEndpoint | undefined;
	let api: PartnerApi;

	beforeAll(async () => {
		db = await createTestDatabase("busoutage");
		nats = await startNatsServer(undefined);
		const namespace = uniqueNamespace("busout");
		const env = { ...SIM_ENV, TRANSPORTER: nats.url, NAMESPACE: namespace };
		core = await startTestNode({
			databaseUrl: db.url,
			services: ["riders", "pricing", "orders", "notifications"],
			env: { ...env, NODE_ID: `${namespace}-core` },
		});
		sim = await startTestNode({ databaseUrl: db.url, services: ["dispatch", "fleet"], env: { ...env, NODE_ID: `${namespace}-sim` } });
		front = await startTestNode({ databaseUrl: db.url, services: ["gateway", "partners"], env: { ...env, NODE_ID: `${namespace}-front` } });
		const partner = await createPartner(front.broker, "Bus outage partner");
		endpoint = await startPartnerEndpoint(partner.webhookSecret);
		api = new PartnerApi(front.baseUrl!, partner.apiKey);
		await waitFor("the fleet seeded and the gateway ready", async () => (await api.get("/health/ready")).status === 200, 30_000, 200);
	}, 60_000);

	afterAll(async () => {
		await endpoint?.close().catch(() => undefined);
		await front?.stop().catch(() => undefined);
		await sim?.stop().catch(() => undefined);
		await core?.stop().catch(() => undefined);
		await nats?.stop("SIGKILL").catch(() => undefined);
		await db?.drop().catch(() => undefined);
	}, 30_000);

	const statusOf = async (orderId: string): Promise<string> => {
		const r = await api.post<{ status: string }>("/ride/status", { orderId });
		return r.status === 200 ? r.body.status : `http ${r.status}`;
	};

	/** A partner call with a bound: an answer, or an error naming the call (never a hang). */
	async function bounded(what: string, call: () => Promise<HttpAnswer>): Promise<HttpAnswer & { what: string }> {
		let timer: NodeJS.Timeout | undefined;
		const bound = new Promise<never>(
			(_, reject) => (timer = setTimeout(() => reject(new Error(`${what} not answered in ${CALL_BOUND_MS} ms`)), CALL_BOUND_MS)),
		);
		try {
			return { ...(await Promise.race([call(), bound])), what };
		} finally {
			clearTimeout(timer);
		}
	}

	test("503 + Retry-After at once during the outage; every ride finishes after it, nothing lost", async () => {
		const ids: string[] = [];
		for (let n = 0; n < RIDES; n++) {
			const created = await api.post<{ orderId: string }>("/ride/create-order", rideRequest(`${endpoint!.url}/hooks/${n}`, n), {
				"Idempotency-Key": `busout-${n}-${Date.now()}`,
			});
			expect([n, created.status]).toEqual([n, 201]);
			ids.push(created.body.orderId);
		}
		await waitFor("a ride under way", async () => (await Promise.all(ids.map(statusOf))).some((s) => s !== "searching"), 20_000, 100);

		await nats.stop("SIGKILL");
		// The outage as a partner sees it: every kind of call, at once, several times.
		const calls = async (round: number) =>
			Promise.all([
				bounded(`fare-estimate ${round}`, () =>
					api.post("/ride/fare-estimate", { pickup: { lat: 12.97, lng: 77.59 }, drop: { lat: 12.95, lng: 77.61 } }),
				),
				bounded(`create-order ${round}`, () => api.post("/ride/create-order", rideRequest(`${endpoint!.url}/hooks/x`, 100 + round))),
				bounded(`status ${round}`, () => api.post("/ride/status", { orderId: ids[0] })),
				bounded(`cancel ${round}`, () => api.post("/ride/cancel", { orderId: ids[0] })),
			]);
		const during = [...(await calls(0)), ...(await calls(1)), ...(await calls(2))];
		for (const a of during) {
			const body = a.body as { code?: string; retryable?: boolean };
			expect([a.what, a.status, body.code, body.retryable]).toEqual([a.what, 503, "SERVICE_UNAVAILABLE", true]);
			expect([a.what, Number(a.headers.get("retry-after")) > 0]).toEqual([a.what, true]);
		}

		nats = await startNatsServer(undefined, {}, nats.port);
		await waitFor(
			"calls served again",
			async () => (await api.post("/ride/fare-estimate", { pickup: { lat: 12.97, lng: 77.59 }, drop: { lat: 12.95, lng: 77.61 } })).status === 200,
			15_000,
			100,
		);

		await waitFor(
			"every ride booked before the outage dropped",
			async () => (await Promise.all(ids.map(statusOf))).every((s) => s === "dropped"),
			40_000,
			250,
		);
		// Nothing lost: every status event of every ride reached the partner, in order.
		await waitFor(
			"every status webhook delivered",
			async () => {
				for (const orderId of ids) {
					const statuses = (await api.allEvents<{ eventId: string; status: string }>(orderId)).filter((e) => e.status !== "location_updated");
					const delivered = new Set(endpoint!.delivered().map((h) => h.eventId));
					if (!statuses.every((e) => delivered.has(e.eventId))) return false;
				}
				return true;
			},
			20_000,
			250,
		);
		for (const orderId of ids) {
			const hooks = endpoint!.delivered().filter((h) => h.orderId === orderId && h.status !== "location_updated");
			expect(hooks.map((h) => h.status).slice(-1)).toEqual(["dropped"]);
			expect(hooks.map((h) => h.status)).toEqual(expect.arrayContaining(["accepted", "arrived", "started", "dropped"]));
		}
		expect(orderViolations(endpoint!.received)).toEqual([]);
	}, 120_000);
});
