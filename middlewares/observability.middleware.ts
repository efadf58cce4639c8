import { AsyncLocalStorage } from "node:async_hooks";
import { inspect } from "node:util";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { ActionHandler, Context, Middleware, Service, ServiceBroker } from "moleculer";

/**
 * Observability shared by every process:
 *
 * - a log context (request id, order id) carried through every local action
 *   and event handler with AsyncLocalStorage, so any `this.logger.info(…)`
 *   inside a handler is tagged without the handler passing anything along.
 *   The request id is `ctx.meta.requestId` (the gateway's own UUID for the
 *   request) and falls back to Moleculer's own `ctx.requestID`, which
 *   crosses NATS with every call and event; a caller's `X-Request-Id` is
 *   `clientRequestId` beside it.
 * - the JSON log formatter (production) that writes that context as fields;
 * - platform figures that are cheapest to count where they happen: ride
 *   status changes, counted as orders emits `orders.statusChanged`; HTTP
 *   requests by route and status, counted on the gateway's server.
 */

export interface LogContext {
	requestId?: string;
	/** The caller's own X-Request-Id (gateway: `meta.clientRequestId`), beside ours. */
	clientRequestId?: string;
	orderId?: string;
}

const storage = new AsyncLocalStorage<LogContext>();

/**
 * Adds fields to the running handler's log context, e.g. the new `orderId`
 * right after create-order made it. No-op outside a handler.
 */
export function bindLogContext(fields: LogContext): void {
	const store = storage.getStore();
	if (!store) return;
	if (fields.requestId) store.requestId = fields.requestId;
	if (fields.orderId) store.orderId = fields.orderId;
}

const ORDER_ID = /^ord_[A-Za-z0-9_-]{1,100}$/;
/**
 * The order id travels to called services and event handlers in a context
 * header, not in `ctx.meta`: Moleculer merges a callee's meta back into its
 * caller's, which would leave one order's id on a loop that goes on to the next.
 */
export const ORDER_ID_HEADER = "x-order-id";

const isOrderId = (v: unknown): v is string => typeof v === "string" && ORDER_ID.test(v);

function contextOf(ctx: Context): LogContext {
	const outer = storage.getStore();
	const meta = (ctx.meta ?? {}) as Record<string, unknown>;
	const params = (ctx.params ?? {}) as Record<string, unknown>;
	const headers = ((ctx as Context & { headers?: Record<string, unknown> }).headers ?? {}) as Record<string, unknown>;
	const requestId = typeof meta.requestId === "string" ? meta.requestId : (ctx.requestID ?? outer?.requestId);
	let orderId: string | undefined;
	if (params && typeof params === "object" && isOrderId(params.orderId)) orderId = params.orderId;
	else if (isOrderId(headers[ORDER_ID_HEADER])) orderId = headers[ORDER_ID_HEADER];
	else orderId = outer?.orderId;
	const clientRequestId = typeof meta.clientRequestId === "string" ? meta.clientRequestId : outer?.clientRequestId;
	return { requestId: requestId ?? undefined, clientRequestId, orderId };
}

/** Call/emit options with the running handler's order id as a header (when it has one). */
function withOrderHeader(opts: unknown): unknown {
	const orderId = storage.getStore()?.orderId;
	if (!orderId) return opts;
	const o = (opts ?? {}) as { headers?: Record<string, unknown> };
	if (o.headers?.[ORDER_ID_HEADER]) return opts;
	return { ...o, headers: { ...o.headers, [ORDER_ID_HEADER]: orderId } };
}

/** Counter of ride status changes, labelled by the status the ride moved to. */
export const RIDE_STATUS_METRIC = "rides_status_changes_total";
/** Gateway HTTP requests by route ("POST /ride/create-order", or "unmatched") and status. */
export const HTTP_REQUESTS_METRIC = "http_requests_total";
export const HTTP_DURATION_METRIC = "http_request_duration_seconds";

interface GatewayLike {
	server?: Server;
	resolveAlias?: (url: string, method?: string) => { alias: { fullPath: string } } | false | null;
}

/** Counts every answered request on the gateway's HTTP server; the route label is the alias, never the raw path. */
function countHttpRequests(service: Service): void {
	const gateway = service as unknown as GatewayLike;
	const { broker } = service;
	if (!gateway.server || typeof gateway.server.on !== "function") return;
	gateway.server.on("request", (req: IncomingMessage & { originalUrl?: string }, res: ServerResponse) => {
		const started = process.hrtime.bigint();
		const method = req.method ?? "GET";
		const path = (req.originalUrl ?? req.url ?? "/").split("?")[0];
		res.once("finish", () => {
			let route = "unmatched";
			try {
				const found = gateway.resolveAlias?.(path, method);
				if (found) route = `${method} ${found.alias.fullPath}`;
			} catch {
				/* keep "unmatched" */
			}
			const seconds = Number(process.hrtime.bigint() - started) / 1e9;
			broker.metrics.increment(HTTP_REQUESTS_METRIC, { route, status: String(res.statusCode) });
			broker.metrics.observe(HTTP_DURATION_METRIC, seconds, { route });
		});
	});
}

export const ObservabilityMiddleware: Middleware = {
	name: "Observability",

	created(broker: ServiceBroker) {
		if (!broker.isMetricsEnabled()) return;
		broker.metrics.register({
			type: "counter",
			name: RIDE_STATUS_METRIC,
			labelNames: ["status"],
			description: "Ride status changes committed by orders, by the new status",
		});
		broker.metrics.register({
			type: "counter",
			name: HTTP_REQUESTS_METRIC,
			labelNames: ["route", "status"],
			description: "Gateway HTTP requests by route and status code",
		});
		broker.metrics.register({
			type: "histogram",
			name: HTTP_DURATION_METRIC,
			labelNames: ["route"],
			unit: "seconds",
			buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
			description: "Gateway HTTP request duration by route",
		});
	},

	serviceStarted(service: Service) {
		if (service.name === "gateway" && service.broker.isMetricsEnabled()) countHttpRequests(service);
	},

	localAction(next: ActionHandler): ActionHandler {
		return function withLogContext(this: unknown, ctx: Context) {
			return storage.run(contextOf(ctx), () => next.call(this as never, ctx));
		};
	},

	localEvent(next: (ctx: Context) => Promise<unknown>) {
		return function withLogContext(this: unknown, ctx: Context) {
			return storage.run(contextOf(ctx), () => next.call(this as never, ctx));
		};
	},

	call(next: (actionName: string, params: unknown, opts: unknown) => Promise<unknown>) {
		return function callWithOrder(this: ServiceBroker, actionName: string, params: unknown, opts: unknown) {
			return next.call(this, actionName, params, withOrderHeader(opts));
		};
	},

	emit(next: (eventName: string, payload: unknown, opts: unknown) => Promise<unknown>) {
		return function countingEmit(this: ServiceBroker, eventName: string, payload: unknown, opts: unknown) {
			if (eventName === "orders.statusChanged" && this.isMetricsEnabled()) {
				const to = (payload as { to?: unknown } | null)?.to;
				if (typeof to === "string") this.metrics.increment(RIDE_STATUS_METRIC, { status: to });
			}
			return next.call(this, eventName, payload, withOrderHeader(opts));
		};
	},
} as unknown as Middleware;

// ---------------------------------------------------------------------------
// JSON log lines

const SECRET_KEY = /secret|password|passwd|api[-_]?key|authorization|token|otp/i;

/** Errors as name, message and code only: never a stack trace or SQL in the logs. */
function errorFields(err: Error): Record<string, unknown> {
	const e = err as Error & { code?: unknown; type?: unknown };
	const out: Record<string, unknown> = { name: e.name, message: e.message };
	if (e.code !== undefined) out.code = e.code;
	if (typeof e.type === "string") out.type = e.type;
	return out;
}

function sanitise(value: unknown, depth = 0): unknown {
	if (value instanceof Error) return errorFields(value);
	if (value === null || typeof value !== "object") return value;
	if (depth >= 4) return "[object]";
	if (Array.isArray(value)) return value.slice(0, 50).map((v) => sanitise(v, depth + 1));
	const out: Record<string, unknown> = {};
	for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? "[redacted]" : sanitise(v, depth + 1);
	return out;
}

function render(arg: unknown): string {
	if (typeof arg === "string") return arg;
	if (arg instanceof Error) {
		const f = errorFields(arg);
		return `${String(f.name)}: ${String(f.message)}${f.type ? ` (${String(f.type)})` : ""}`;
	}
	if (arg !== null && typeof arg === "object") {
		try {
			return JSON.stringify(sanitise(arg));
		} catch {
			return inspect(arg, { depth: 1, breakLength: Infinity });
		}
	}
	return String(arg);
}

/**
 * Formatter for Moleculer's Console logger: one JSON object per line with
 * time, level, message, node, service, and the request and order ids of the
 * handler that logged it.
 */
const RESERVED = new Set(["time", "level", "msg", "nodeID", "ns", "mod", "svc", "err"]);
const CONTEXT_KEYS = ["requestId", "clientRequestId", "orderId"] as const;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
	v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Error) && Object.getPrototypeOf(v) === Object.prototype;

export function jsonLogFormatter(type: string, args: unknown[], bindings?: Record<string, unknown>): string[] {
	// Plain objects become fields of the line (queryable), everything else the message.
	const fields: Record<string, unknown> = {};
	const words: string[] = [];
	for (const arg of args) {
		if (isPlainObject(arg)) {
			for (const [k, v] of Object.entries(sanitise(arg) as Record<string, unknown>)) fields[RESERVED.has(k) ? `field_${k}` : k] = v;
		} else words.push(render(arg));
	}
	const entry: Record<string, unknown> = {
		time: new Date().toISOString(),
		level: type,
		msg: words.join(" "),
		...fields,
	};
	if (bindings) {
		entry.nodeID = bindings.nodeID;
		if (bindings.ns) entry.ns = bindings.ns;
		entry.mod = bindings.mod;
		if (bindings.svc) entry.svc = bindings.svc;
	}
	// The handler's context wins; an object's own requestId/orderId fills in outside handlers (the gateway's HTTP layer).
	const store = storage.getStore();
	for (const key of CONTEXT_KEYS) {
		const fromContext = store?.[key];
		if (fromContext) {
			if (key in entry && entry[key] !== fromContext) entry[`field_${key}`] = entry[key];
			entry[key] = fromContext;
		}
	}
	const err = args.find((a): a is Error => a instanceof Error);
	if (err) entry.err = errorFields(err);
	return [JSON.stringify(entry)];
}
