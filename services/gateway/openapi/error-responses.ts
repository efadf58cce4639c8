import { DEFAULT_RATE_LIMIT_PER_MINUTE, RATE_LIMITED_RETRY_AFTER_SECONDS } from "../../../contracts/constants";
import { documentedCodesByStatus, ERRORS, type ErrorCode } from "../../../contracts/errors";
import { INTERNAL_ERROR_MESSAGE, UNAVAILABLE_MESSAGE } from "../errors";
import type { JsonSchema } from "./json-schema";
import { API_VERSION_HEADER, API_VERSIONS } from "../../../contracts/versions";
import { knownVersions } from "../../../lib/api-versions";

/**
 * The error responses of the document, from the error table in
 * contracts/errors.ts: statuses, codes and meanings. Only the example
 * messages are written here.
 */

/** Every documented error code by HTTP status. */
export const ERROR_CODES_BY_STATUS: Record<number, ErrorCode[]> = documentedCodesByStatus();

const STATUS_TEXT: Record<number, string> = {
	400: "Bad request",
	401: "Unauthorized",
	404: "Not found",
	409: "Conflict",
	413: "Payload too large",
	415: "Unsupported media type",
	422: "Unprocessable",
	429: "Too many requests",
	500: "Internal error",
	503: "Service unavailable",
};

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

/** Example bodies; codes not listed use their meaning as the message. */
const EXAMPLE_MESSAGES: Partial<Record<ErrorCode, string>> = {
	INVALID_JSON: "Request body is not valid JSON",
	UNAUTHORIZED: "Invalid API key",
	RATE_LIMITED: `Rate limit of ${DEFAULT_RATE_LIMIT_PER_MINUTE} requests per minute exceeded; retry in ${RATE_LIMITED_RETRY_AFTER_SECONDS} s`,
	SERVICE_UNAVAILABLE: UNAVAILABLE_MESSAGE,
	IDEMPOTENCY_KEY_IN_USE: "A request with this Idempotency-Key is still running",
	CONFLICT: "The ride kept changing; try again",
	INTERNAL_ERROR: INTERNAL_ERROR_MESSAGE,
};

function exampleError(code: ErrorCode): Record<string, unknown> {
	const spec = ERRORS[code];
	const retryable = spec.retryable !== false;
	if (code === "UNKNOWN_API_VERSION") {
		const message = `${API_VERSION_HEADER} must be one of: ${knownVersions(API_VERSIONS).join(", ")}`;
		return { code, message: `Unknown API version "2020-01-01"; ${message}`, details: [{ field: API_VERSION_HEADER, message }], retryable };
	}
	if (code === "VALIDATION_ERROR") {
		const message = "pickup.lat must be less than or equal to 90";
		return { code, message, details: [{ field: "pickup.lat", message }], retryable };
	}
	return { code, message: EXAMPLE_MESSAGES[code] ?? spec.meaning.replace(/`/g, ""), retryable };
}

/** The error responses of an operation answering `codes`, grouped by status; `versioned`: a `/ride` route (answers carry `Ride-Version`). */
export function errorResponses(codes: readonly ErrorCode[], versioned = false): Record<string, unknown> {
	const byStatus = new Map<number, ErrorCode[]>();
	for (const code of codes) {
		const status = ERRORS[code].status;
		byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
	}
	const out: Record<string, unknown> = {};
	for (const status of [...byStatus.keys()].sort((a, b) => a - b)) {
		const list = byStatus.get(status)!;
		const headers: Record<string, unknown> = {
			"X-Request-Id": { $ref: "#/components/headers/XRequestId" },
			"Ride-Request-Id": { $ref: "#/components/headers/RideRequestId" },
		};
		// Retryable answers say when: the gateway (429, 503) or the service (409) sends Retry-After.
		if (list.some((c) => ERRORS[c].retryable !== false)) headers["Retry-After"] = { $ref: "#/components/headers/RetryAfter" };
		if (status === 401) headers["WWW-Authenticate"] = { $ref: "#/components/headers/WwwAuthenticate" };
		else {
			headers["X-RateLimit-Limit"] = { $ref: "#/components/headers/RateLimitLimit" };
			headers["X-RateLimit-Remaining"] = { $ref: "#/components/headers/RateLimitRemaining" };
			// Every answer after authentication names the version it was served in (not UNKNOWN_API_VERSION's).
			if (versioned) headers[API_VERSION_HEADER] = { $ref: "#/components/headers/RideVersion" };
		}
		const examples: Record<string, unknown> = {};
		for (const code of list) examples[code] = { summary: ERRORS[code].meaning, value: exampleError(code) };
		out[String(status)] = {
			description: `${STATUS_TEXT[status]}: ${list.map((c) => `\`${c}\``).join(", ")}. ${list.map((c) => `${c}: ${ERRORS[c].meaning}`).join(" ")}`,
			headers,
			content: {
				"application/json": {
					schema: { allOf: [ref("Error"), { type: "object", properties: { code: { enum: list } } }] },
					examples,
				},
			},
		};
	}
	return out;
}
