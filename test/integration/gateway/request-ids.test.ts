import type { Context, ServiceSchema } from "moleculer";
import { PartnerApi, type HttpAnswer } from "../../helpers/http";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";

/**
 * Request ids and what production logs keep, through the real gateway,
 * partners and orders with NODE_ENV=production (JSON log lines) and tracing
 * on (the Event exporter):
 *
 * - our own UUID is the request id: the trace id of its spans, `requestId` in
 *   every log line, `Ride-Request-Id` on the answer;
 * - a caller's sane `X-Request-Id` is echoed back in `X-Request-Id` and
 *   logged as `clientRequestId`, never used as the trace id (two requests
 *   with one caller id are two traces);
 * - an unexpected failure (orders' table gone: a real SQL error) is logged
 *   with its name and message, never a stack trace.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A V8 stack frame as Error.stack prints it. */
const STACK_FRAME = /\n\s+at |\bat [^\s]+ \([^)]*:\d+:\d+\)/;

let bed: Testbed;
let api: PartnerApi;
const lines: string[] = [];
const traceIds: string[] = [];

const collector: ServiceSchema = {
	name: "spanCollector",
	events: {
		"$tracing.spans"(ctx: Context<Array<{ traceID: string }>>) {
			for (const span of ctx.params) traceIds.push(span.traceID);
		},
	},
};

beforeAll(async () => {
	// Moleculer's Console logger writes through console.*: keep every line it prints.
	for (const method of ["log", "info", "warn", "error", "debug"] as const) {
		jest.spyOn(console, method).mockImplementation((...args: unknown[]) => void lines.push(args.join(" ")));
	}
	bed = await startTestbed("requestids", {
		services: ["gateway", "partners", "orders"],
		env: { NODE_ENV: "production", LOGLEVEL: "debug", TRACING: "true", TRACING_EXPORTER: "Event" },
	});
	bed.node.broker.createService(collector);
	await bed.node.broker.waitForServices(["spanCollector"], 10_000);
	const { apiKey } = await bed.node.broker.call<{ apiKey: string }, unknown>("partners.create", { name: "Ids" });
	api = new PartnerApi(bed.node.baseUrl!, apiKey);
}, 60_000);

afterAll(async () => {
	await bed?.stop();
	jest.restoreAllMocks();
});

const logLines = () => lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);

async function status(clientId?: string): Promise<HttpAnswer> {
	return api.post("/ride/status", { orderId: "ord_doesnotexist000000000" }, clientId === undefined ? {} : { "X-Request-Id": clientId });
}

it("answers with our id in Ride-Request-Id and echoes the caller's in X-Request-Id", async () => {
	const a = await status("partner-req-1");
	const b = await status("partner-req-1");
	for (const r of [a, b]) {
		expect(r.status).toBe(404);
		expect(r.headers.get("x-request-id")).toBe("partner-req-1");
		expect(r.headers.get("ride-request-id")).toMatch(UUID);
	}
	// One caller id, two requests: two ids of ours.
	expect(a.headers.get("ride-request-id")).not.toBe(b.headers.get("ride-request-id"));
	// No caller id (or an unusable one): X-Request-Id carries ours.
	for (const r of [await status(), await status("not a sane id")]) {
		expect(r.headers.get("x-request-id")).toMatch(UUID);
		expect(r.headers.get("x-request-id")).toBe(r.headers.get("ride-request-id"));
	}
});

it("traces and logs under our id, with the caller's as clientRequestId", async () => {
	const r = await status("partner-req-2");
	const ours = r.headers.get("ride-request-id")!;
	// The spans of the request (gateway, partners.authenticate, orders.status) carry our id as their trace id.
	await waitFor("the request's spans", () => traceIds.includes(ours), 15_000);
	expect(traceIds).not.toContain("partner-req-2");
	const tagged = logLines().filter((l) => l.clientRequestId === "partner-req-2");
	expect(tagged.length).toBeGreaterThan(0);
	for (const line of tagged) expect(line.requestId).toBe(ours);
	expect(logLines().some((l) => l.requestId === "partner-req-2")).toBe(false);
});

it("logs an unexpected failure without a stack trace in production", async () => {
	// A real failure nobody planned for: orders' table is gone.
	await bed.pg.query("ALTER TABLE orders RENAME TO orders_gone");
	try {
		const r = await status("partner-req-3");
		expect(r.status).toBe(500);
		expect(r.body).toMatchObject({ code: "INTERNAL_ERROR" });
		const failed = logLines().find((l) => l.msg === "Request failed" && [l.clientRequestId, l.requestId].includes("partner-req-3"));
		expect(failed).toMatchObject({ level: "error", error: { name: expect.any(String), message: expect.any(String) } });
		expect((failed!.error as Record<string, unknown>).stack).toBeUndefined();
		// Nothing any logger printed carries a stack frame.
		bed.node.broker.logger.error("A direct error", new Error("with a stack"));
		bed.node.broker.logger.warn("A nested error", { cause: new TypeError("nested") });
		expect(lines.filter((l) => STACK_FRAME.test(l))).toEqual([]);
		expect(failed).toMatchObject({ requestId: r.headers.get("ride-request-id"), clientRequestId: "partner-req-3" });
	} finally {
		await bed.pg.query("ALTER TABLE orders_gone RENAME TO orders");
	}
});
