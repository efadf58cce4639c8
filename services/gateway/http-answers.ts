import type { ServerResponse } from "node:http";

/**
 * How the gateway writes a JSON answer, and which response headers a service
 * may ask for (`ctx.meta.$responseHeaders`). Pure apart from the response
 * object it is given.
 */

const HEADER_NAME = /^[A-Za-z0-9-]{1,64}$/;

/** A service's `$responseHeaders`, kept only when they are plain names with string or number values (never Content-Type). */
export function serviceResponseHeaders(requested: unknown): Record<string, string> {
	const headers: Record<string, string> = {};
	if (typeof requested !== "object" || requested === null || Array.isArray(requested)) return headers;
	for (const [k, v] of Object.entries(requested)) {
		if ((typeof v === "string" || typeof v === "number") && HEADER_NAME.test(k) && k.toLowerCase() !== "content-type") headers[k] = String(v);
	}
	return headers;
}

/** A 2xx a service picked with `ctx.meta.$statusCode` (orders: 201), else 200. */
export function successStatus(requested: unknown): number {
	return typeof requested === "number" && requested >= 200 && requested < 300 ? requested : 200;
}

/** Our request id as a response header (API.md): the trace id, `requestId` in our logs. */
export const RIDE_REQUEST_ID_HEADER = "Ride-Request-Id";

/** What the gateway keeps of a request's ids on its context (moleculer-web puts the context on `res.$ctx`). */
interface RequestIds {
	requestID?: string | null;
	meta?: { clientRequestId?: unknown };
}

/**
 * The request-id headers of an answer: `X-Request-Id` echoes the caller's
 * (when sane) or, without one, carries ours; `Ride-Request-Id` is always ours.
 * Replaces moleculer-web's `X-Request-ID`, which is our id only.
 */
export function setRequestIdHeaders(res: ServerResponse): void {
	const ctx = (res as ServerResponse & { $ctx?: RequestIds }).$ctx;
	if (!ctx?.requestID || res.headersSent) return;
	const client = ctx.meta?.clientRequestId;
	res.removeHeader("X-Request-ID");
	res.setHeader("X-Request-Id", typeof client === "string" ? client : ctx.requestID);
	res.setHeader(RIDE_REQUEST_ID_HEADER, ctx.requestID);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
	if (res.headersSent) return;
	const payload = JSON.stringify(body);
	res.statusCode = status;
	setRequestIdHeaders(res);
	for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
	res.setHeader("Content-Type", "application/json; charset=utf-8");
	res.setHeader("Content-Length", Buffer.byteLength(payload));
	if (!res.hasHeader("Cache-Control")) res.setHeader("Cache-Control", "no-store");
	res.setHeader("X-Content-Type-Options", "nosniff");
	res.end(payload);
}
