import type { HttpAnswer } from "../../helpers/http";
import { processesFor, startPlatform, type Platform } from "../../helpers/processes";
import { rideRequest } from "../../helpers/rides";
import { sleep, waitFor } from "../../helpers/wait";
import { orderViolations } from "../../helpers/webhooks";

/**
 * Issue 5's cluster test: every service in its own OS process over the real
 * NATS and PostgreSQL — two dispatch and two notifications processes among
 * them, plus the simulated fleet — runs the full partner flow to `dropped`
 * with webhooks received at a local endpoint and verified with
 * `standardwebhooks`. Mid-flow, one process of every kind is killed with
 * SIGKILL (a crash: no graceful anything) and started again; every ride still
 * completes and every status webhook arrives, in order, with nothing lost.
 */

const STATUS_FLOW = ["accepted", "arrived", "started", "dropped"];

interface EventView {
	eventId: string;
	sequence: number;
	status: string;
	delivery: { state: string; attempts: number };
}

describe("cluster: separate processes, crashes mid-flow, nothing lost", () => {
	let platform: Platform;
	const retried503: string[] = [];

	beforeAll(async () => {
		platform = await startPlatform({
			label: "cluster",
			env: {
				FLEET_MODE: "simulated",
				// Rides take about half a minute of real time: long enough to crash things mid-ride.
				SIM_SPEED: "30",
				SIM_CITIES: "12.9716,77.5946",
				FLEET_DRIVERS_PER_CITY: "12",
				// Quick recovery after a crash: claims and leases of a killed process expire in seconds.
				WEBHOOK_TIMEOUT_MS: "2000",
				WEBHOOK_LEASE_MS: "7000",
				WEBHOOK_RETRY_SCHEDULE_MS: "200,500,1000,2000,3000,5000,5000,5000",
				DISPATCH_TRANSITION_LEASE_MS: "3000",
				DISPATCH_OFFER_TIMEOUT_MS: "4000",
				DISPATCH_SWEEP_MS: "1000",
				DISPATCH_INDEX_REFRESH_MS: "1000",
			},
			processes: processesFor({ pricing: 1, riders: 1, orders: 1, dispatch: 2, notifications: 2, fleet: 1 }),
		});
	}, 240_000);

	afterAll(() => platform?.stop(), 60_000);

	async function statusOf(orderId: string): Promise<string> {
		// A status read right after a crash may meet the dead node and get the contract's fast 503: retried like any call.
		const r = await withRetryOn503(`status ${orderId}`, () => platform.api.post<{ status: string }>("/ride/status", { orderId }));
		if (r.status !== 200) throw new Error(`status ${r.status}: ${JSON.stringify(r.body)}`);
		return r.body.status;
	}

	/**
	 * What a careful partner does: a 503 SERVICE_UNAVAILABLE is retryable (the
	 * contract says so), and create-order is retried with the same
	 * Idempotency-Key, so a retry never makes a second ride. Right after a
	 * crash, calls routed to the dead node fail until its peers notice it is
	 * gone (heartbeat timeout); nothing else may fail.
	 */
	async function withRetryOn503<T>(what: string, call: () => Promise<HttpAnswer<T>>): Promise<HttpAnswer<T>> {
		const deadline = Date.now() + 90_000;
		for (;;) {
			const answer = await call();
			if (answer.status !== 503) return answer;
			retried503.push(what);
			if (Date.now() > deadline) return answer;
			await sleep(500);
		}
	}

	async function createRides(from: number, count: number): Promise<string[]> {
		const { api, cluster, endpoint } = platform;
		const ids: string[] = [];
		for (let n = from; n < from + count; n++) {
			const req = rideRequest(`${endpoint.url}/hooks/${n}`, n);
			// Half of them with a quote, the way most partners book.
			let quoteId: string | undefined;
			if (n % 2 === 0) {
				const est = await withRetryOn503(`fare-estimate ${n}`, () =>
					api.post<{ quotes: Array<{ quoteId: string }> }>("/ride/fare-estimate", {
						pickup: req.pickup,
						drop: req.drop,
						serviceType: req.serviceType,
					}),
				);
				expect([n, est.status]).toEqual([n, 200]);
				quoteId = est.body.quotes[0].quoteId;
			}
			const body = { ...req, ...(quoteId ? { quoteId } : {}) };
			const created = await withRetryOn503(`create-order ${n}`, () =>
				api.post<{ orderId: string; status: string }>("/ride/create-order", body, { "Idempotency-Key": `${cluster.namespace}-create-${n}` }),
			);
			expect([n, created.status]).toEqual([n, 201]);
			ids.push(created.body.orderId);
		}
		return ids;
	}

	async function crashAndRestart(labels: string[]): Promise<void> {
		const { cluster } = platform;
		await Promise.all(labels.map((l) => cluster.kill(l, "SIGKILL")));
		await Promise.all(labels.map((l) => cluster.restart(l)));
	}

	test("the full flow to dropped survives a crash of one process of every kind", async () => {
		const { api, cluster, endpoint } = platform;
		try {
			const first = await createRides(0, 6);
			// Mid-flow: every ride of the first batch has a driver.
			await waitFor("first batch accepted", async () => (await Promise.all(first.map(statusOf))).every((s) => s !== "searching"), 60_000, 200);

			// Wave 1: the back end crashes while rides are moving.
			const beforeWave1 = await Promise.all(first.map(statusOf));
			await crashAndRestart(["orders", "dispatch-1", "notifications-1", "fleet"]);
			const second = await createRides(6, 3);

			// Wave 2: the front crashes (no HTTP calls from here until it is back).
			const beforeWave2 = await Promise.all([...first, ...second].map(statusOf));
			await crashAndRestart(["gateway", "pricing", "riders"]);
			await waitFor("gateway ready again", async () => (await api.get("/health/ready")).status === 200, 60_000, 200);

			const all = [...first, ...second];
			await waitFor("every ride dropped", async () => (await Promise.all(all.map(statusOf))).every((s) => s === "dropped"), 180_000, 500);

			// Every status event of every ride was delivered to the partner, signed, in order.
			const eventsOf = (orderId: string) => api.allEvents<EventView>(orderId);
			await waitFor(
				"every status webhook delivered",
				async () => {
					for (const orderId of all) {
						const statusEvents = (await eventsOf(orderId)).filter((e) => e.status !== "location_updated");
						if (!statusEvents.every((e) => e.delivery.state === "delivered")) return false;
						const delivered = new Set(
							endpoint
								.delivered()
								.filter((h) => h.orderId === orderId)
								.map((h) => h.eventId),
						);
						if (!statusEvents.every((e) => delivered.has(e.eventId))) return false;
					}
					return true;
				},
				60_000,
				250,
			);

			for (const orderId of all) {
				const statusEvents = (await eventsOf(orderId)).filter((e) => e.status !== "location_updated");
				const statuses = statusEvents.map((e) => e.status);
				// A driver may have dropped out during the crashes: then a second `accepted` follows.
				for (const s of STATUS_FLOW) expect([orderId, statuses.includes(s)]).toEqual([orderId, true]);
				expect(statuses[statuses.length - 1]).toBe("dropped");
				const hooks = endpoint.delivered().filter((h) => h.orderId === orderId && h.status !== "location_updated");
				expect(hooks.map((h) => h.status)).toEqual(statuses);
				const seqs = hooks.map((h) => h.sequence);
				expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
			}
			// The crashes really hit rides in flight.
			expect(beforeWave1.filter((st) => ["accepted", "arrived", "started"].includes(st)).length).toBeGreaterThan(0);
			expect(beforeWave2.filter((st) => st !== "dropped").length).toBeGreaterThan(0);
			console.log(
				`cluster: rides before wave 1 ${beforeWave1.join(",")}; before wave 2 ${beforeWave2.join(",")}; 503 retries: ${retried503.length}; webhooks received ${endpoint.received.length}`,
			);
			expect(endpoint.received.length).toBeGreaterThan(0);
			expect(endpoint.received.filter((h) => !h.signatureValid)).toEqual([]);
			expect(orderViolations(endpoint.received)).toEqual([]);
			expect(endpoint.concurrentDuplicates).toEqual([]);
		} catch (err) {
			throw new Error(`${(err as Error).message}\n${cluster.tails()}`);
		}
	}, 420_000);
});
