import { freePort, httpRequest, type HttpAnswer } from "../../helpers/http";
import { processesFor, startPlatform, type Platform } from "../../helpers/processes";
import { rideRequest } from "../../helpers/rides";
import { waitFor } from "../../helpers/wait";

/**
 * Graceful shutdown under load, every service in its own process over NATS:
 * SIGTERM to one of two orders processes and to one of two notifications
 * processes while partners keep booking and cancelling. No request the
 * gateway accepted may fail, and no webhook may be lost; the stopped
 * processes exit 0 and come back. Then SIGTERM to the gateway itself:
 * readiness fails first while requests are still answered, requests in
 * flight finish, and it exits 0.
 */

interface Outcome {
	what: string;
	status: number;
	code?: string;
}

describe("SIGTERM during load", () => {
	let platform: Platform;
	let healthPort: number;

	beforeAll(async () => {
		healthPort = await freePort();
		platform = await startPlatform({
			label: "shutdown",
			env: {
				FLEET_MODE: "live",
				WEBHOOK_TIMEOUT_MS: "3000",
				WEBHOOK_LEASE_MS: "8000",
				WEBHOOK_RETRY_SCHEDULE_MS: "200,500,1000,2000",
			},
			gatewayEnv: {
				HEALTH_PORT: String(healthPort),
				// As a load balancer would need: keep answering for a moment after readiness fails.
				SHUTDOWN_DELAY_MS: "1500",
			},
			processes: processesFor({ pricing: 1, riders: 1, orders: 2, dispatch: 1, notifications: 2 }),
		});
		// Every webhook takes a moment to answer, so some are always in flight when notifications stops.
		platform.endpoint.behave(() => ({ status: 200, delayMs: 600 }));
	}, 240_000);

	afterAll(() => platform?.stop(), 60_000);

	test("no accepted request fails and no webhook is lost while orders and notifications processes stop and restart", async () => {
		const { api, cluster, endpoint } = platform;
		const outcomes: Outcome[] = [];
		const cancelled: string[] = [];
		let running = true;
		let rideNo = 0;
		const record = (what: string, a: HttpAnswer) => {
			outcomes.push({ what, status: a.status, code: (a.body as { code?: string }).code });
			return a;
		};

		async function worker(): Promise<void> {
			while (running) {
				const n = rideNo++;
				const created = record("create-order", await api.post("/ride/create-order", rideRequest(`${endpoint.url}/hooks`, n)));
				if (created.status !== 201) continue;
				const orderId = (created.body as { orderId: string }).orderId;
				record("status", await api.post("/ride/status", { orderId }));
				const cancel = record("cancel", await api.post("/ride/cancel", { orderId }));
				if (cancel.status === 200) cancelled.push(orderId);
			}
		}

		const workers = Array.from({ length: 4 }, () => worker());
		try {
			await waitFor("some load", () => cancelled.length >= 10, 60_000);

			// orders-1 stops gracefully in the middle of the load; its twin takes over.
			const ordersExit = await cluster.kill("orders-1", "SIGTERM");
			expect(ordersExit).toBe(0);
			const afterOrders = cancelled.length;
			await waitFor("load goes on", () => cancelled.length >= afterOrders + 10, 60_000);

			// notifications-1 stops with webhook attempts in flight; they finish, its claims are released.
			await waitFor("webhooks in flight", () => endpoint.received.filter((h) => h.answered === 0).length >= 2, 30_000, 10);
			const notificationsExit = await cluster.kill("notifications-1", "SIGTERM");
			expect(notificationsExit).toBe(0);
			expect(cluster.get("notifications-1").output()).toMatch(/ServiceBroker is stopped/);

			// Both come back and join the load.
			await Promise.all([cluster.restart("orders-1"), cluster.restart("notifications-1")]);
			const afterRestart = cancelled.length;
			await waitFor("load with everyone back", () => cancelled.length >= afterRestart + 10, 60_000);
		} finally {
			running = false;
			await Promise.all(workers);
		}

		// No request the gateway accepted failed.
		const failed = outcomes.filter((o) => !(o.status === 200 || o.status === 201));
		expect(failed).toEqual([]);
		expect(outcomes.filter((o) => o.what === "create-order").length).toBeGreaterThanOrEqual(30);

		// No webhook lost: every cancelled ride's customer_cancelled webhook was delivered, signed.
		await waitFor(
			"every customer_cancelled webhook",
			() => {
				const delivered = new Set(
					endpoint
						.delivered()
						.filter((h) => h.status === "customer_cancelled")
						.map((h) => h.orderId),
				);
				return cancelled.every((id) => delivered.has(id));
			},
			60_000,
			200,
		);
		const hooks = endpoint.delivered().filter((h) => h.status === "customer_cancelled");
		expect(hooks.every((h) => h.signatureValid)).toBe(true);
		expect(new Set(hooks.map((h) => h.orderId)).size).toBe(cancelled.length);
	}, 300_000);

	test("the gateway drains on SIGTERM: readiness fails first, requests keep being answered, then it exits 0", async () => {
		const { api, cluster, endpoint, gatewayPort } = platform;
		const created = await api.post<{ orderId: string }>("/ride/create-order", rideRequest(`${endpoint.url}/hooks`, 9999));
		expect(created.status).toBe(201);
		const { orderId } = created.body;
		expect((await api.get("/health/ready")).status).toBe(200);

		const gateway = cluster.get("gateway");
		// Requests already on their way when the signal arrives.
		const inFlight = Array.from({ length: 8 }, () => api.post("/ride/status", { orderId }));
		gateway.child.kill("SIGTERM");

		// Readiness fails first, on the API port and on the health port…
		const drainingReady = await waitFor(
			"gateway readiness 503",
			async () => {
				const r = await api.get("/health/ready");
				return r.status === 503 ? r : null;
			},
			5_000,
			20,
		);
		expect(drainingReady.body).toMatchObject({ status: "draining" });
		const health = await httpRequest(`http://127.0.0.1:${healthPort}/health/ready`);
		expect(health.status).toBe(503);
		expect(health.body).toMatchObject({ status: "draining" });
		// …while the API still answers (the load balancer is catching up).
		const during = await api.post<{ status: string }>("/ride/status", { orderId });
		expect(during.status).toBe(200);
		expect(during.headers.get("connection")).toBe("close");

		const answers = await Promise.all(inFlight);
		expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));

		expect(await gateway.exited).toBe(0);
		expect(gateway.output()).toMatch(/SIGTERM received, shutting down gracefully/);
		// Afterwards nothing listens on the port any more.
		await expect(httpRequest(`http://127.0.0.1:${gatewayPort}/health/live`)).rejects.toThrow();
	}, 60_000);
});
