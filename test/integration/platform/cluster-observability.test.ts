import { ServiceBroker, type Context, type ServiceSchema } from "moleculer";
import { buildBrokerConfig } from "../../../moleculer.config";
import { jsonLogFormatter } from "../../../middlewares/observability.middleware";
import { TEST_NATS_URL } from "../../helpers/db";
import { freePort, httpRequest } from "../../helpers/http";
import { uniqueNamespace } from "../../helpers/node";
import { waitFor } from "../../helpers/wait";

/**
 * Observability across nodes, over the real NATS, with the production broker
 * configuration (moleculer.config.ts): JSON log lines carry the request id and
 * the order id into other services' handlers; Prometheus metrics (Moleculer's
 * and the platform's own) on METRICS_PORT with several services in one
 * process; TRACING=true joins one request's spans across nodes.
 *
 * The two small services here are probes of the middleware, not stand-ins for
 * platform services.
 */

/** What the probes use of `this`. */
interface Logging {
	logger: { info: (...a: unknown[]) => void };
}

interface Span {
	traceID: string;
	name: string;
	service?: { name: string };
}

const probeA: ServiceSchema = {
	name: "probeA",
	actions: {
		start: {
			access: "internal",
			params: { orderId: "string" },
			async handler(this: Logging, ctx: Context<{ orderId: string }>) {
				this.logger.info("probeA handling");
				await ctx.emit("probe.happened", { n: 1 });
				return ctx.call("probeB.work", { n: 2 });
			},
		},
	},
};

const received: Array<{ where: string; done: boolean }> = [];
const probeB: ServiceSchema = {
	name: "probeB",
	actions: {
		work: {
			access: "internal",
			params: { n: "number" },
			handler(this: Logging) {
				this.logger.info("probeB working", { apiKey: "rk_must_not_be_logged", n: 2 });
				received.push({ where: "action", done: true });
				return { ok: true };
			},
		},
	},
	events: {
		"probe.happened"(this: Logging) {
			this.logger.info("probeB heard the event");
			received.push({ where: "event", done: true });
		},
	},
};

const spans: Span[] = [];
const collector: ServiceSchema = {
	name: "spanCollector",
	events: {
		"$tracing.spans"(ctx: Context<Span[]>) {
			spans.push(...ctx.params);
		},
	},
};

describe("observability across nodes (NATS)", () => {
	const namespace = uniqueNamespace("obs");
	let a: ServiceBroker;
	let b: ServiceBroker;
	let metricsPort: number;
	const lines: string[] = [];
	const spies: jest.SpyInstance[] = [];

	beforeAll(async () => {
		// Moleculer's Console logger writes through console.*: keep every line it prints.
		for (const method of ["log", "info", "warn", "error", "debug"] as const) {
			spies.push(jest.spyOn(console, method).mockImplementation((...args: unknown[]) => void lines.push(args.join(" "))));
		}
		metricsPort = await freePort();
		const common = {
			TRANSPORTER: TEST_NATS_URL,
			NAMESPACE: namespace,
			LOG_FORMAT: "json",
			LOGLEVEL: "info",
			TRACING: "true",
			TRACING_EXPORTER: "Event",
		};
		a = new ServiceBroker({ ...buildBrokerConfig({ ...common, NODE_ID: `${namespace}-a`, METRICS_PORT: String(metricsPort) }) });
		b = new ServiceBroker({ ...buildBrokerConfig({ ...common, NODE_ID: `${namespace}-b`, METRICS_PORT: "0" }) });
		a.createService(probeA);
		a.createService(collector);
		b.createService(probeB);
		await Promise.all([a.start(), b.start()]);
		await a.waitForServices(["probeB"], 10_000);
		await b.waitForServices(["spanCollector"], 10_000);
	});

	afterAll(async () => {
		await Promise.all([a?.stop(), b?.stop()]);
		for (const s of spies) s.mockRestore();
	});

	test("log lines in another service's handlers carry the request id and the order id", async () => {
		const orderId = "ord_obs0000000000000001";
		await a.call("probeA.start", { orderId }, { meta: { requestId: "req-obs-1" } });
		await waitFor("probeB to hear the event", () => received.some((r) => r.where === "event"), 10_000);

		const json = lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
		const find = (msg: string) => json.find((j) => String(j.msg).startsWith(msg));
		for (const msg of ["probeA handling", "probeB working", "probeB heard the event"]) {
			const line = find(msg);
			expect(line).toMatchObject({ level: "info", requestId: "req-obs-1", orderId });
			expect(typeof line?.time).toBe("string");
		}
		expect(find("probeB working")).toMatchObject({ nodeID: `${namespace}-b`, svc: "probeB" });
		// A logged object's fields become fields of the line; secrets among them are redacted.
		expect(find("probeB working")).toMatchObject({ msg: "probeB working", n: 2, apiKey: "[redacted]" });
		expect(lines.join("\n")).not.toContain("rk_must_not_be_logged");
	});

	test("a second request does not inherit the first one's order id", async () => {
		lines.length = 0;
		await a.call("probeB.work", { n: 3 }, { meta: { requestId: "req-obs-2" } });
		const line = lines
			.filter((l) => l.startsWith("{"))
			.map((l) => JSON.parse(l) as Record<string, unknown>)
			.find((j) => String(j.msg).startsWith("probeB working"));
		expect(line).toMatchObject({ requestId: "req-obs-2" });
		expect(line?.orderId).toBeUndefined();
	});

	test("outside a handler (the gateway's HTTP layer), a logged object's request id fills the field; errors lose their stacks", () => {
		const err = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED", sql: "SELECT secret FROM x" });
		const [line] = jsonLogFormatter("warn", ["Request answered 503", { requestId: "req-http-1", path: "/ride/status", status: 503 }, err], {
			nodeID: "n1",
			mod: "gateway",
			svc: "gateway",
		});
		const parsed = JSON.parse(line) as Record<string, unknown>;
		expect(parsed).toMatchObject({ level: "warn", requestId: "req-http-1", path: "/ride/status", status: 503, nodeID: "n1", svc: "gateway" });
		expect(parsed.err).toEqual({ name: "Error", message: "connect ECONNREFUSED", code: "ECONNREFUSED" });
		expect(line).not.toMatch(/SELECT|at Object|\.ts:\d+/);
	});

	test("Prometheus metrics on METRICS_PORT: Moleculer's per action, and rides by status", async () => {
		await a.emit("orders.statusChanged", { orderId: "ord_obs0000000000000002", partnerId: "ptn_x", from: "searching", to: "accepted", driverId: "drv_x" });
		await a.emit("orders.statusChanged", { orderId: "ord_obs0000000000000002", partnerId: "ptn_x", from: "accepted", to: "arrived", driverId: "drv_x" });
		const text = await waitFor(
			"the arrived ride in the metrics",
			async () => {
				const page = (await httpRequest(`http://127.0.0.1:${metricsPort}/metrics`)).text;
				return /rides_status_changes_total\{[^}]*status="arrived"[^}]*\} 1/.test(page) && page;
			},
			10_000,
		);
		expect(text).toMatch(/rides_status_changes_total\{[^}]*status="accepted"[^}]*\} 1/);
		expect(text).toMatch(/moleculer_request_total\{[^}]*action="probeA.start"/);
		// Both of this node's services are reported by the one endpoint.
		expect(text).toMatch(/moleculer_broker_local_services_total\{[^}]*\} [2-9]/);
	});

	test("TRACING=true: the spans of one request on both nodes share its trace id", async () => {
		spans.length = 0;
		const ctxRequestId = "trace-obs-3";
		await a.call("probeA.start", { orderId: "ord_obs0000000000000003" }, { requestID: ctxRequestId });
		// The Event exporter flushes every 5 s.
		await waitFor("probeB's span in the request's trace", () => spans.some((s) => s.name.includes("probeB.work") && s.traceID === ctxRequestId), 20_000);
		const names = spans.filter((s) => s.traceID === ctxRequestId).map((s) => s.name);
		expect(names).toEqual(expect.arrayContaining([expect.stringContaining("probeA.start"), expect.stringContaining("probeB.work")]));
	});
});
