/**
 * What a trace span may carry about a call. With TRACING on, Moleculer copies
 * every action's and event's params and meta into its spans by default, and
 * the exporters send them out of the process (Zipkin, a collector, the
 * console): API keys (partners.authenticate), OTPs (dispatch start), riders'
 * names and phone numbers, webhook URLs and secrets, locations.
 *
 * Redacted by default, allow-listed by name: a value is kept only when its key
 * is one of the safe identifiers and enumerations below (or added by the
 * operator with TRACING_TAGS_ALLOW); every other leaf becomes "[REDACTED]"
 * (the key stays, so a span still shows the shape of the call). Objects and
 * arrays are walked, a bounded depth and width. Meta keeps allow-listed keys
 * only. Pure: no Moleculer import, unit-tested on its own.
 */

export const REDACTED = "[REDACTED]";

/** Ids and enumerations: safe to leave the process, and what one searches traces by. */
export const DEFAULT_TRACE_ALLOW = [
	"orderId",
	"orderIds",
	"requestId",
	"partnerId",
	"quoteId",
	"riderId",
	"driverId",
	"eventId",
	"eventIds",
	"deliveryId",
	"serviceType",
	"status",
	"forStatus",
	"fromStatus",
	"toStatus",
	"kind",
	"type",
	"action",
	"actor",
	"version",
	"limit",
	"offset",
	"cursor",
	"since",
	"radiusM",
	"count",
	"attempt",
	"outcome",
] as const;

/** Keys never kept, whatever the allow-list says (a misconfigured TRACING_TAGS_ALLOW cannot leak these). */
const NEVER = /key|secret|token|otp|password|pass$|phone|authorization|signature|seed|creds/i;

const MAX_DEPTH = 4;
const MAX_ITEMS = 20;

export interface TraceRedactor {
	params(value: unknown): unknown;
	meta(value: unknown): Record<string, unknown> | undefined;
}

export function createTraceRedactor(extraAllow: readonly string[] = []): TraceRedactor {
	const allow = new Set<string>([...DEFAULT_TRACE_ALLOW, ...extraAllow].filter((k) => !NEVER.test(k)));

	const walk = (value: unknown, key: string | undefined, depth: number): unknown => {
		if (value === null || value === undefined) return value;
		if (Array.isArray(value)) {
			if (depth >= MAX_DEPTH) return REDACTED;
			// An allow-listed key holding a list of ids keeps its items (eventIds).
			const items = value.slice(0, MAX_ITEMS).map((v) => walk(v, key, depth + 1));
			return value.length > MAX_ITEMS ? [...items, `…${value.length - MAX_ITEMS} more`] : items;
		}
		if (typeof value === "object") {
			// Only plain data is walked: a request, socket, Buffer or class instance is redacted whole.
			const proto = Object.getPrototypeOf(value) as unknown;
			if ((proto !== Object.prototype && proto !== null) || depth >= MAX_DEPTH) return REDACTED;
			const out: Record<string, unknown> = {};
			for (const [k, v] of Object.entries(value as Record<string, unknown>).slice(0, MAX_ITEMS * 2)) out[k] = walk(v, k, depth + 1);
			return out;
		}
		const kept = key !== undefined && allow.has(key) && (typeof value === "string" || typeof value === "number" || typeof value === "boolean");
		if (!kept) return REDACTED;
		return typeof value === "string" && value.length > 200 ? `${value.slice(0, 200)}…` : value;
	};

	return {
		params: (value) => walk(value, undefined, 0),
		meta(value) {
			if (value === null || typeof value !== "object") return undefined;
			const out: Record<string, unknown> = {};
			for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
				if (allow.has(k) && (typeof v === "string" || typeof v === "number" || typeof v === "boolean")) out[k] = v;
			}
			return out;
		},
	};
}
