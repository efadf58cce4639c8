import type { ErrorCode, ErrorDetail } from "./types";

/** A documented code, or one added to the API after this SDK was built (codes are only ever added). */
export type RideErrorCode = ErrorCode | (string & {});

/** Base class of every error this SDK throws. */
export class RideError extends Error {
	override name = "RideError";
}

/** What made a `RideApiError`: the HTTP answer and the body read from it. */
export interface ApiErrorInit {
	status: number;
	headers: Headers;
	body: unknown;
}

/** Statuses retried when the answer carries no error envelope (a proxy's or load balancer's page). */
const RETRYABLE_BARE_STATUSES = new Set([429, 502, 503, 504]);

/**
 * A 4xx/5xx answer of the API: its error envelope (`code`, `message`,
 * `details`, `retryable`) with our request id. Switch on `code`; `message`
 * is for people.
 */
export class RideApiError extends RideError {
	override name = "RideApiError";
	readonly status: number;
	readonly code: RideErrorCode;
	/** One `{ field, message }` per problem on validation errors; empty otherwise. */
	readonly details: ErrorDetail[];
	/** The same request may succeed later (the envelope's `retryable`). */
	readonly retryable: boolean;
	/** `Ride-Request-Id`: our id of the request; quote it when you contact us. */
	readonly requestId: string | null;
	/** `X-Request-Id`: your correlation id as echoed (ours when you sent none). */
	readonly clientRequestId: string | null;
	/** `Retry-After` in milliseconds, when the answer said when to retry. */
	readonly retryAfterMs: number | null;
	readonly headers: Headers;

	constructor({ status, headers, body }: ApiErrorInit) {
		const envelope = isEnvelope(body) ? body : undefined;
		super(envelope?.message ?? `HTTP ${status} without the API's error envelope`);
		this.status = status;
		this.headers = headers;
		this.code = envelope?.code ?? "HTTP_ERROR";
		this.details = envelope?.details ?? [];
		this.retryable = envelope ? envelope.retryable === true : RETRYABLE_BARE_STATUSES.has(status);
		this.requestId = headers.get("ride-request-id");
		this.clientRequestId = headers.get("x-request-id");
		this.retryAfterMs = parseRetryAfter(headers.get("retry-after"));
	}
}

/** No answer: the connection failed, or no answer came within the timeout. */
export class RideConnectionError extends RideError {
	override name = "RideConnectionError";
	/** The per-attempt timeout ended the call (the request may have been processed). */
	readonly timedOut: boolean;

	constructor(message: string, options: { cause: unknown; timedOut: boolean }) {
		super(message, { cause: options.cause });
		this.timedOut = options.timedOut;
	}
}

function isEnvelope(body: unknown): body is { code: string; message: string; details?: ErrorDetail[]; retryable?: boolean } {
	if (typeof body !== "object" || body === null) return false;
	const b = body as Record<string, unknown>;
	return typeof b.code === "string" && typeof b.message === "string" && (b.details === undefined || Array.isArray(b.details));
}

/** `Retry-After` as milliseconds from now: delay-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
	if (value === null || value.trim() === "") return null;
	const text = value.trim();
	if (/^\d+$/.test(text)) return Number(text) * 1000;
	const at = Date.parse(text);
	return Number.isNaN(at) ? null : Math.max(0, at - now);
}
