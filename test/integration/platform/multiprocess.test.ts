import { freePort, httpRequest } from "../../helpers/http";
import { runNodeScript, startPlatform, type Platform } from "../../helpers/processes";
import { rideRequest } from "../../helpers/rides";
import { waitFor } from "../../helpers/wait";

/**
 * Issue 2's process test: the gateway (with partners) and every service as
 * separate OS processes over the real NATS and the server PostgreSQL, the
 * partner flow quote → create → status → cancel through HTTP, the webhook
 * received and verified. One process (pricing) runs the compiled build
 * (`npm run build` + `npm run start:prod`), the way the container image runs.
 * Every process must then stop cleanly on SIGTERM.
 */

describe("every service in its own process over NATS", () => {
	let platform: Platform;
	const ports = { gatewayMetrics: 0, ordersMetrics: 0, ordersHealth: 0, dispatchHealth: 0 };

	beforeAll(async () => {
		// The production build (what `npm run build` does), for the compiled process.
		const build = await runNodeScript(["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"]);
		if (build.code !== 0) throw new Error(`tsc -p tsconfig.build.json failed:\n${build.out.slice(0, 3000)}`);
		const assets = await runNodeScript(["scripts/copy-build-assets.mjs"]);
		if (assets.code !== 0) throw new Error(assets.out);

		for (const k of Object.keys(ports) as Array<keyof typeof ports>) ports[k] = await freePort();
		platform = await startPlatform({
			label: "multiproc",
			env: { FLEET_MODE: "live" },
			gatewayEnv: { METRICS_PORT: String(ports.gatewayMetrics) },
			processes: [
				{ label: "pricing", services: "pricing", compiled: true },
				{ label: "riders", services: "riders" },
				{
					label: "orders",
					services: "orders",
					env: { METRICS_PORT: String(ports.ordersMetrics), HEALTH_PORT: String(ports.ordersHealth), LOG_FORMAT: "json" },
				},
				{ label: "dispatch", services: "dispatch", env: { HEALTH_PORT: String(ports.dispatchHealth) } },
				{ label: "notifications", services: "notifications" },
			],
		});
	}, 240_000);

	afterAll(() => platform?.stop(), 60_000);

	test("quote → create → status → cancel through HTTP, with the webhook delivered and verified", async () => {
		const { api, endpoint } = platform;
		const request = rideRequest(`${endpoint.url}/hooks`, 1);
		const estimate = await api.post<{ quotes: Array<{ quoteId: string; serviceType: string; totalAmount: number }> }>("/ride/fare-estimate", {
			pickup: request.pickup,
			drop: request.drop,
			serviceType: request.serviceType,
		});
		expect(estimate.status).toBe(200);
		expect(estimate.body.quotes).toHaveLength(1);
		const quote = estimate.body.quotes[0];

		const created = await api.post<{ orderId: string; status: string; fare: { totalAmount: number } }>("/ride/create-order", {
			...request,
			quoteId: quote.quoteId,
		});
		expect(created.status).toBe(201);
		expect(created.body.status).toBe("searching");
		expect(created.body.fare.totalAmount).toBe(quote.totalAmount);
		const { orderId } = created.body;

		const status = await api.post<{ orderId: string; status: string; metadata: unknown }>("/ride/status", { orderId });
		expect(status.status).toBe(200);
		expect(status.body).toMatchObject({ orderId, status: "searching", metadata: { partnerRef: "cluster-1" } });

		const cancelled = await api.post("/ride/cancel", { orderId, reason: "changed plans" }, { "X-Request-Id": "req-multiprocess-cancel" });
		expect(cancelled.status).toBe(200);
		expect(cancelled.body).toEqual({
			code: "RIDE_CANCELLED",
			orderId,
			status: "customer_cancelled",
			// Free: searching, or accepted within the grace period.
			cancellationFee: expect.objectContaining({ amount: 0, currency: "INR" }),
		});
		expect(cancelled.headers.get("x-request-id")).toBe("req-multiprocess-cancel");

		const after = await api.post<{ status: string }>("/ride/status", { orderId });
		expect(after.body.status).toBe("customer_cancelled");

		const hook = await waitFor(
			"the customer_cancelled webhook",
			() => endpoint.delivered().find((h) => h.orderId === orderId && h.status === "customer_cancelled"),
			30_000,
		);
		expect(hook.signatureValid).toBe(true);
		expect(hook.body).toMatchObject({ orderId, status: "customer_cancelled", metadata: { partnerRef: "cluster-1" } });

		const events = await waitFor("the event marked delivered", async () => {
			const r = await api.post<{ events: Array<{ status: string; delivery: { state: string } }> }>("/ride/events", { orderId });
			const state = r.body.events.find((e) => e.status === "customer_cancelled")?.delivery.state;
			return state === "delivered" ? r.body.events : null;
		});
		expect(events.length).toBeGreaterThanOrEqual(1);
	});

	test("each process runs only its own services, and the calls crossed NATS", () => {
		const { cluster } = platform;
		const started = (label: string, svc: string) => cluster.get(label).output().includes(`Service '${svc}' started`);
		expect(started("gateway", "gateway") && started("gateway", "partners")).toBe(true);
		expect(started("orders", "orders")).toBe(true);
		for (const [label, notHere] of [
			["gateway", "orders"],
			["orders", "gateway"],
			["pricing", "orders"],
			["orders", "pricing"],
			["notifications", "orders"],
		] as const) {
			expect([label, notHere, started(label, notHere)]).toEqual([label, notHere, false]);
		}
		const pids = new Set([...cluster.procs.values()].map((p) => p.child.pid));
		expect(pids.size).toBe(6);
		// The compiled build served pricing.
		expect(cluster.get("pricing").child.spawnargs).toContain("dist/bin/server.js");
	});

	test("a non-gateway process serves /health/live, /health/ready and Prometheus metrics with the ride figures", async () => {
		for (const port of [ports.ordersHealth, ports.dispatchHealth]) {
			const live = await httpRequest(`http://127.0.0.1:${port}/health/live`);
			expect(live.status).toBe(200);
			const ready = await httpRequest(`http://127.0.0.1:${port}/health/ready`);
			expect(ready.status).toBe(200);
			expect(ready.body).toMatchObject({ status: "ready" });
		}
		const metrics = (await httpRequest(`http://127.0.0.1:${ports.ordersMetrics}/metrics`)).text;
		expect(metrics).toMatch(/rides_status_changes_total\{[^}]*status="customer_cancelled"[^}]*\} 1/);
		expect(metrics).toMatch(/moleculer_request_total\{[^}]*action="orders\.create"/);

		// The gateway counts requests by route and status code (never by raw path).
		const gatewayMetrics = (await httpRequest(`http://127.0.0.1:${ports.gatewayMetrics}/metrics`)).text;
		expect(gatewayMetrics).toMatch(/http_requests_total\{[^}]*route="POST \/ride\/create-order"[^}]*status="201"[^}]*\} 1/);
		expect(gatewayMetrics).toMatch(/http_requests_total\{[^}]*route="POST \/ride\/cancel"[^}]*status="200"[^}]*\} 1/);
		expect(gatewayMetrics).toMatch(/http_request_duration_seconds_bucket\{[^}]*route="POST \/ride\/fare-estimate"/);
	});

	test("orders logs JSON lines (LOG_FORMAT=json)", () => {
		const lines = platform.cluster
			.get("orders")
			.output()
			.split("\n")
			.filter((l) => l.trim().length > 0);
		const started = lines.find((l) => l.includes("started successfully"));
		expect(started).toBeDefined();
		const parsed = JSON.parse(started!) as Record<string, unknown>;
		expect(parsed).toMatchObject({ level: "info", mod: "broker" });
		expect(lines.every((l) => l.startsWith("{"))).toBe(true);
	});

	test("every process exits 0 on SIGTERM (graceful shutdown)", async () => {
		const { cluster } = platform;
		const codes = await Promise.all([...cluster.procs.keys()].map(async (label) => [label, await cluster.kill(label, "SIGTERM")] as const));
		expect(codes).toEqual([...cluster.procs.keys()].map((label) => [label, 0]));
	}, 60_000);
});
