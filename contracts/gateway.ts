/**
 * The partner API's routes: every public endpoint, the action it calls, the
 * params that action validates (the request body) and the error codes it
 * answers besides the common ones. The gateway's aliases, the OpenAPI
 * document, the drift test and the HTTP tests read this one table.
 * Plain data only.
 */
import type { ErrorCode } from "./errors";
import { cancelParams, createOrderParams, eventsParams, feedbackParams, statusParams } from "./orders";
import { estimateParams } from "./pricing";

export interface RideRoute {
	/** Path below `/ride`. */
	path: string;
	method: "POST";
	action: string;
	/** The action's params: the request body. */
	params: Record<string, unknown>;
	/** Error codes of this endpoint beyond COMMON_RIDE_ERRORS. */
	errors: readonly ErrorCode[];
}

export const RIDE_BASE_PATH = "/ride";

/**
 * What every action called through `/ride/*` finds in `ctx.meta`, and what it
 * may set there for the HTTP answer.
 */
export interface PartnerCallMeta {
	/** The partner of the API key; never taken from the body. */
	partnerId?: string;
	/** The request's `X-Request-Id` (the caller's or generated). */
	requestId?: string;
	/** The `Idempotency-Key` header, checked for shape. */
	idempotencyKey?: string;
	/** A 2xx status for the answer (default 200). */
	$statusCode?: number;
	/** Extra response headers (plain names, string or number values). */
	$responseHeaders?: Record<string, unknown>;
}

/** Errors every `/ride/*` endpoint can answer, before the endpoint's own. */
export const COMMON_RIDE_ERRORS: readonly ErrorCode[] = [
	"INVALID_JSON",
	"VALIDATION_ERROR",
	"UNAUTHORIZED",
	"PAYLOAD_TOO_LARGE",
	"UNSUPPORTED_MEDIA_TYPE",
	"RATE_LIMITED",
	"INTERNAL_ERROR",
	"SERVICE_UNAVAILABLE",
];

export const RIDE_ROUTES: readonly RideRoute[] = [
	{ path: "/fare-estimate", method: "POST", action: "pricing.estimate", params: estimateParams, errors: [] },
	{
		path: "/create-order",
		method: "POST",
		action: "orders.create",
		params: createOrderParams,
		errors: ["INVALID_WEBHOOK_URL", "IDEMPOTENCY_KEY_IN_USE", "CONFLICT", "QUOTE_INVALID", "QUOTE_EXPIRED", "IDEMPOTENCY_KEY_REUSED"],
	},
	{ path: "/cancel", method: "POST", action: "orders.cancel", params: cancelParams, errors: ["ORDER_NOT_FOUND", "RIDE_NOT_ACTIVE", "CONFLICT"] },
	{
		path: "/feedback",
		method: "POST",
		action: "orders.feedback",
		params: feedbackParams,
		errors: ["ORDER_NOT_FOUND", "RIDE_NOT_COMPLETED", "FEEDBACK_ALREADY_SUBMITTED"],
	},
	{ path: "/status", method: "POST", action: "orders.status", params: statusParams, errors: ["ORDER_NOT_FOUND"] },
	{ path: "/events", method: "POST", action: "orders.events", params: eventsParams, errors: ["ORDER_NOT_FOUND"] },
];

/** All error codes of one `/ride` endpoint. */
export function endpointErrorCodes(route: RideRoute): ErrorCode[] {
	return [...COMMON_RIDE_ERRORS, ...route.errors];
}
