/**
 * The partner API's routes: every public endpoint, the action it calls, the
 * params that action validates (the request body) and the error codes it
 * answers besides the common ones. The gateway's aliases, the OpenAPI
 * document, the drift test and the HTTP tests read this one table.
 * Plain data only.
 */
import type { ErrorCode } from "./errors";
import type { KeyMode } from "./partners";
import { cancelParams, createOrderParams, eventsParams, feedbackParams, statusParams } from "./orders";
import { estimateParams } from "./pricing";
import { sandboxAdvanceParams } from "./sandbox";
import {
	driverCancelParams,
	driverLocationsParams,
	driverOffersParams,
	driverOfflineParams,
	driverOnlineParams,
	driverOrderParams,
	driverArrivedParams,
	driverStartParams,
} from "./driver";

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

/** The request and answer header naming the API version (contracts/versions.ts; API.md, "Versions"). */
export { API_VERSION_HEADER } from "./versions";

/**
 * What every action called through `/ride/*` finds in `ctx.meta`, and what it
 * may set there for the HTTP answer.
 */
export interface PartnerCallMeta {
	/** The partner of the API key; never taken from the body. */
	partnerId?: string;
	/** The API key's mode (`test` or `live`); never taken from the body. Absent = `test`. */
	mode?: KeyMode;
	/** Our id of the request (a UUID, also the trace id and the `Ride-Request-Id` answer header). */
	requestId?: string;
	/** The caller's `X-Request-Id`, when it sent a sane one: logged beside requestId, echoed back, never the trace id. */
	clientRequestId?: string;
	/** The `Idempotency-Key` header, checked for shape. */
	idempotencyKey?: string;
	/**
	 * The API version the request is served in (the `Ride-Version` header, else the partner's pin; contracts/versions.ts).
	 * The gateway has already translated the body into the core version's shape and translates the answer back.
	 */
	apiVersion?: string;
	/** A 2xx status for the answer (default 200). */
	$statusCode?: number;
	/** Extra response headers (plain names, string or number values). */
	$responseHeaders?: Record<string, unknown>;
}

/** Errors every `/ride/*` endpoint can answer, before the endpoint's own. */
export const COMMON_RIDE_ERRORS: readonly ErrorCode[] = [
	"INVALID_JSON",
	"VALIDATION_ERROR",
	"UNKNOWN_API_VERSION",
	"UNAUTHORIZED",
	"PAYLOAD_TOO_LARGE",
	"UNSUPPORTED_MEDIA_TYPE",
	"RATE_LIMITED",
	"INTERNAL_ERROR",
	"SERVICE_UNAVAILABLE",
];

export const RIDE_ROUTES: readonly RideRoute[] = [
	{ path: "/fare-estimate", method: "POST", action: "pricing.estimate", params: estimateParams, errors: ["PICKUP_TIME_OUT_OF_RANGE"] },
	{
		path: "/create-order",
		method: "POST",
		action: "orders.create",
		params: createOrderParams,
		errors: [
			"INVALID_WEBHOOK_URL",
			"PICKUP_TIME_OUT_OF_RANGE",
			"IDEMPOTENCY_KEY_IN_USE",
			"CONFLICT",
			"QUOTE_INVALID",
			"QUOTE_EXPIRED",
			"IDEMPOTENCY_KEY_REUSED",
		],
	},
	{
		path: "/cancel",
		method: "POST",
		action: "orders.cancel",
		params: cancelParams,
		errors: ["ORDER_NOT_FOUND", "RIDE_NOT_ACTIVE", "RIDE_NOT_CANCELLABLE", "CANCELLATION_FEE_CHANGED", "CONFLICT"],
	},
	{
		path: "/feedback",
		method: "POST",
		action: "orders.feedback",
		params: feedbackParams,
		errors: ["ORDER_NOT_FOUND", "RIDE_NOT_COMPLETED", "FEEDBACK_ALREADY_SUBMITTED"],
	},
	{ path: "/status", method: "POST", action: "orders.status", params: statusParams, errors: ["ORDER_NOT_FOUND"] },
	{ path: "/events", method: "POST", action: "orders.events", params: eventsParams, errors: ["ORDER_NOT_FOUND"] },
	{
		path: "/sandbox/advance",
		method: "POST",
		action: "orders.sandboxAdvance",
		params: sandboxAdvanceParams,
		errors: [
			"SANDBOX_ONLY",
			"ORDER_NOT_FOUND",
			"RIDE_NOT_ACTIVE",
			"CONFLICT",
			"SANDBOX_UNAVAILABLE",
			"SANDBOX_NOT_MANUAL",
			"SANDBOX_TARGET_UNREACHABLE",
			"RIDER_HAS_ACTIVE_RIDE",
		],
	},
];

/** All error codes of one `/ride` endpoint. */
export function endpointErrorCodes(route: RideRoute): ErrorCode[] {
	return [...COMMON_RIDE_ERRORS, ...route.errors];
}

// ---- the driver API (`/driver/*`, driver apps; see contracts/driver.ts) -------------

export const DRIVER_BASE_PATH = "/driver";

export interface DriverRoute {
	/** Path below `/driver`. */
	path: string;
	method: "GET" | "POST";
	action: string;
	/** The action's params: the request body (a GET has none). */
	params: Record<string, unknown>;
	/** Error codes of this endpoint beyond COMMON_DRIVER_ERRORS. */
	errors: readonly ErrorCode[];
}

/** What every action called through `/driver/*` finds in `ctx.meta`. */
export interface DriverCallMeta {
	/** The driver of the token; never taken from the body. */
	driverId?: string;
	requestId?: string;
	$statusCode?: number;
	$responseHeaders?: Record<string, unknown>;
}

/** Errors every `/driver/*` endpoint can answer, before the endpoint's own. */
export const COMMON_DRIVER_ERRORS: readonly ErrorCode[] = COMMON_RIDE_ERRORS.filter((code) => code !== "UNKNOWN_API_VERSION");

const RIDE_STEP_ERRORS: readonly ErrorCode[] = ["ORDER_NOT_FOUND", "CONFLICT", "INVALID_TRANSITION"];

export const DRIVER_ROUTES: readonly DriverRoute[] = [
	{ path: "/online", method: "POST", action: "dispatch.driverGoOnline", params: driverOnlineParams, errors: [] },
	{ path: "/offline", method: "POST", action: "dispatch.driverGoOffline", params: driverOfflineParams, errors: ["DRIVER_NOT_AVAILABLE", "CONFLICT"] },
	{ path: "/location", method: "POST", action: "dispatch.driverReportLocations", params: driverLocationsParams, errors: ["LOCATION_IMPLAUSIBLE"] },
	{ path: "/offers", method: "GET", action: "dispatch.driverOffers", params: driverOffersParams, errors: ["DRIVER_WAITS_FULL"] },
	{ path: "/offers", method: "POST", action: "dispatch.driverOffers", params: driverOffersParams, errors: ["DRIVER_WAITS_FULL"] },
	{ path: "/accept", method: "POST", action: "dispatch.driverAccept", params: driverOrderParams, errors: ["ORDER_NOT_FOUND", "CONFLICT"] },
	{ path: "/decline", method: "POST", action: "dispatch.driverDecline", params: driverOrderParams, errors: ["ORDER_NOT_FOUND", "CONFLICT"] },
	{
		path: "/arrived",
		method: "POST",
		action: "dispatch.driverArrived",
		params: driverArrivedParams,
		errors: [...RIDE_STEP_ERRORS, "NOT_AT_PICKUP", "LOCATION_IMPLAUSIBLE"],
	},
	{ path: "/start", method: "POST", action: "dispatch.driverStart", params: driverStartParams, errors: [...RIDE_STEP_ERRORS, "INVALID_OTP", "OTP_LOCKED"] },
	{ path: "/drop", method: "POST", action: "dispatch.driverDrop", params: driverOrderParams, errors: RIDE_STEP_ERRORS },
	{ path: "/cancel", method: "POST", action: "dispatch.driverCancel", params: driverCancelParams, errors: RIDE_STEP_ERRORS },
];
