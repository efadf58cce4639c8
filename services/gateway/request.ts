import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { REQUEST_ID_MAX_LENGTH } from "../../contracts/constants";
import { IDEMPOTENCY_KEY_MAX_LENGTH } from "../../contracts/orders";
import { findUnsafeInput } from "../../lib/input-safety";
import { unsafeIssue } from "../../lib/validator";
import { ApiError } from "../../lib/errors";

/**
 * What the gateway reads from a partner's HTTP request before any service is
 * called: the API key, the request id, the Idempotency-Key and the JSON body.
 */

const MAX_API_KEY_LENGTH = 500;
/** RFC 6750 b64token. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

export type BearerResult = { ok: true; apiKey: string } | { ok: false; reason: "missing" | "malformed" };

export function parseBearer(header: string | string[] | undefined): BearerResult {
	if (header === undefined || header === "") return { ok: false, reason: "missing" };
	if (Array.isArray(header)) return { ok: false, reason: "malformed" };
	const m = BEARER.exec(header);
	if (!m || m[1].length > MAX_API_KEY_LENGTH) return { ok: false, reason: "malformed" };
	return { ok: true, apiKey: m[1] };
}

/** The `X-Request-Id` values kept as they are. */
export const REQUEST_ID_PATTERN = new RegExp(`^[A-Za-z0-9._:\\-]{1,${REQUEST_ID_MAX_LENGTH}}$`);

/**
 * The Bearer credential of a request (an API key on `/ride`, a driver token
 * on `/driver`), or 401 UNAUTHORIZED saying what is wrong with the header.
 */
export function requireBearer(header: string | string[] | undefined, credential: "apiKey" | "token", what: string): string {
	const bearer = parseBearer(header);
	if (bearer.ok) return bearer.apiKey;
	throw new ApiError(
		"UNAUTHORIZED",
		bearer.reason === "missing"
			? `Missing ${what}: send Authorization: Bearer <${credential}>`
			: `Malformed Authorization header: expected Bearer <${credential}>`,
	);
}

/**
 * The caller's `X-Request-Id` when it is a sane token, else undefined. It is
 * echoed back and logged as `clientRequestId`, never used as our request
 * (trace) id: a caller could otherwise reuse one id for many requests, or
 * pick another partner's, and tangle our logs and traces.
 */
export function clientRequestIdFrom(header: string | string[] | undefined): string | undefined {
	return typeof header === "string" && REQUEST_ID_PATTERN.test(header) ? header : undefined;
}

/** Our id of a request: the trace id, `requestId` in every log line, `Ride-Request-Id` on the answer. */
export function newRequestId(): string {
	return randomUUID();
}

/** Visible ASCII and spaces, not starting or ending with a space. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/** `Idempotency-Key` → the key, undefined when absent; 400 VALIDATION_ERROR when unusable. */
export function idempotencyKeyFrom(header: string | string[] | undefined): string | undefined {
	if (header === undefined) return undefined;
	const problem = Array.isArray(header)
		? "must be sent once"
		: header.length === 0
			? "must not be empty"
			: header.length > IDEMPOTENCY_KEY_MAX_LENGTH
				? `must be at most ${IDEMPOTENCY_KEY_MAX_LENGTH} characters`
				: !IDEMPOTENCY_KEY.test(header)
					? "must be visible ASCII characters"
					: undefined;
	if (problem === undefined) return header as string;
	throw new ApiError("VALIDATION_ERROR", `Idempotency-Key ${problem}`, {
		details: [{ field: "Idempotency-Key", message: `Idempotency-Key ${problem}` }],
	});
}

/**
 * Whether a Content-Type announces JSON the gateway can read:
 * `application/json` or `application/*+json`, UTF-8 (or no charset).
 */
export function jsonMediaTypeProblem(contentType: string | undefined): string | undefined {
	// What nearly every client sends, answered without splitting.
	if (contentType === "application/json" || contentType === "application/json; charset=utf-8") return undefined;
	if (contentType === undefined || contentType.trim() === "") return "Content-Type must be application/json";
	const [mediaType, ...params] = contentType.split(";").map((s) => s.trim().toLowerCase());
	const isJson = mediaType === "application/json" || /^application\/[a-z0-9.+-]+\+json$/.test(mediaType);
	if (!isJson) return `Content-Type ${mediaType} is not supported; send application/json`;
	for (const p of params) {
		const [k, v] = p.split("=").map((s) => s.trim().replace(/^"|"$/g, ""));
		if (k === "charset" && v !== "utf-8" && v !== "utf8") return `charset ${v} is not supported; send UTF-8`;
	}
	return undefined;
}

function hasBody(req: IncomingMessage): boolean {
	const length = req.headers["content-length"];
	if (length !== undefined) return Number(length) > 0;
	return req.headers["transfer-encoding"] !== undefined;
}

function tooLarge(limit: number): ApiError {
	return new ApiError("PAYLOAD_TOO_LARGE", `Request body is larger than ${limit} bytes`);
}

/** JSON.parse that drops `__proto__` keys, so a body can never reach an object's prototype. */
export function parseJsonObject(text: string): unknown {
	let value: unknown;
	try {
		// The reviver (slow) only when a `__proto__` key is possible: spelt out, or hidden behind a \u escape.
		value =
			text.includes("__proto__") || text.includes("\\u")
				? JSON.parse(text, (key, v: unknown) => (key === "__proto__" ? undefined : v))
				: JSON.parse(text);
	} catch {
		throw new ApiError("INVALID_JSON", "Request body is not valid JSON");
	}
	if (typeof value !== "object" || value === null || Array.isArray(value)) {
		throw new ApiError("VALIDATION_ERROR", "The request body must be a JSON object", {
			details: [{ field: "body", message: "must be a JSON object" }],
		});
	}
	refuseUnsafeInput(value);
	return value;
}

/**
 * U+0000, unpaired surrogates (in values or keys) and too-deep nesting are
 * refused before any service is called: PostgreSQL cannot store such strings,
 * and a deep body would overflow the serialiser on its way over NATS. Every
 * node's validator applies the same rule (lib/validator.ts) to internal calls.
 */
export function refuseUnsafeInput(body: unknown): void {
	const issues = findUnsafeInput(body).map(unsafeIssue);
	if (issues.length === 0) return;
	const details = issues.map((i) => ({ field: i.field ?? "body", message: i.message ?? "is invalid" }));
	const message = details.length > 1 ? `${details[0].message} (and ${details.length - 1} more)` : details[0].message;
	throw new ApiError("VALIDATION_ERROR", message, { details });
}

/**
 * Reads a JSON object body of at most `limit` bytes.
 *
 * - No body at all → `{}` (the action's validation then names what is missing).
 * - A body with another media type, charset or a Content-Encoding → 415 UNSUPPORTED_MEDIA_TYPE.
 * - Over the limit (by Content-Length, or while streaming) → 413 PAYLOAD_TOO_LARGE;
 *   Node discards the rest of the body after the answer.
 * - Not JSON → 400 INVALID_JSON; JSON but not an object → 400 VALIDATION_ERROR.
 */
export function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
	if (!hasBody(req)) return Promise.resolve({});
	const problem = jsonMediaTypeProblem(req.headers["content-type"]);
	if (problem) return Promise.reject(new ApiError("UNSUPPORTED_MEDIA_TYPE", problem));
	const encoding = req.headers["content-encoding"];
	if (encoding !== undefined && encoding.toLowerCase() !== "identity") {
		return Promise.reject(new ApiError("UNSUPPORTED_MEDIA_TYPE", `Content-Encoding ${encoding} is not supported`));
	}
	const declared = Number(req.headers["content-length"]);
	if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));

	return new Promise((resolve, reject) => {
		const chunks: Buffer[] = [];
		let size = 0;
		let settled = false;
		const finish = (err: Error | null, value?: unknown) => {
			if (settled) return;
			settled = true;
			req.off("data", onData);
			req.off("end", onEnd);
			req.off("error", onError);
			req.off("aborted", onAborted);
			if (err) reject(err);
			else resolve(value);
		};
		const onData = (chunk: Buffer) => {
			size += chunk.length;
			if (size > limit) {
				chunks.length = 0;
				finish(tooLarge(limit));
				// Keep reading and discarding so the answer reaches the client.
				req.resume();
				return;
			}
			chunks.push(chunk);
		};
		const onEnd = () => {
			if (size === 0) return finish(null, {});
			try {
				finish(null, parseJsonObject(Buffer.concat(chunks, size).toString("utf8")));
			} catch (err) {
				finish(err as Error);
			}
		};
		const onError = () => finish(new ApiError("INVALID_JSON", "Request body could not be read"));
		const onAborted = () => finish(new ApiError("INVALID_JSON", "Request body was aborted"));
		req.on("data", onData);
		req.on("end", onEnd);
		req.on("error", onError);
		req.on("aborted", onAborted);
	});
}
