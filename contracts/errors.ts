/**
 * The error table of the partner contract, written once: every code with its
 * HTTP status, whether the same request may succeed later, and what it means.
 * `lib/errors.ts` (the ApiError services throw), the gateway's error mapping
 * and the OpenAPI document derive from it; a test checks docs/API.md
 * against it. Plain data only.
 */
import { PARAMS_MAX_DEPTH } from "./common";
import { QUOTE_MATCH_RADIUS_METRES } from "./constants";
import { IDEMPOTENCY_TTL_MS } from "./orders";

export interface ErrorDetail {
	field: string;
	message: string;
}

/** The JSON body of every 4xx/5xx answer. */
export interface ErrorEnvelope {
	code: ErrorCode | string;
	message: string;
	details?: ErrorDetail[];
	retryable: boolean;
}

export interface ErrorSpec {
	status: number;
	/**
	 * `true`: the same request may succeed later. `"with-retry-after"`: only
	 * when the thrower says when (`data.retryAfter`, sent as `Retry-After`).
	 */
	retryable: boolean | "with-retry-after";
	/**
	 * How the gateway names an error that arrives with this status:
	 * `"only"` — this code, whatever the thrower called it;
	 * `"fallback"` — this code when the error carries no usable one.
	 */
	forStatus?: "only" | "fallback";
	/** Shown to partners (OpenAPI, docs/API.md). Internal codes get a clean envelope but are not documented. */
	documented: boolean;
	/** For partners: when the code is answered. */
	meaning: string;
}

/** Listed by status; the order within a status is the order the documents list them in. */
export const ERRORS = {
	INVALID_JSON: {
		status: 400,
		retryable: false,
		documented: true,
		meaning: "The body is not valid JSON.",
	},
	VALIDATION_ERROR: {
		status: 400,
		retryable: false,
		forStatus: "fallback",
		documented: true,
		meaning: `A field is missing, unknown (misspelled), of the wrong type or out of range (including an unknown \`serviceType\`, a string containing U+0000 or an unpaired surrogate, nesting deeper than ${PARAMS_MAX_DEPTH} levels, a value the database cannot store, a body that is not a JSON object, or a bad \`Idempotency-Key\` header). \`details\` names each field.`,
	},
	INVALID_WEBHOOK_URL: {
		status: 400,
		retryable: false,
		documented: true,
		meaning:
			"`webhookURL` is not an absolute http(s) URL, or is refused by the SSRF policy (private, loopback, link-local or metadata address in production).",
	},
	PICKUP_TIME_OUT_OF_RANGE: {
		status: 400,
		retryable: false,
		documented: true,
		meaning:
			"`pickupAt` (create-order, fare-estimate) is sooner than the minimum lead or further ahead than the maximum (by default 30 minutes to 7 days); nothing was booked.",
	},
	UNKNOWN_API_VERSION: {
		status: 400,
		retryable: false,
		documented: true,
		meaning: "The `Ride-Version` header names no version this API knows; `details` lists the known ones. Nothing was done.",
	},
	UNAUTHORIZED: {
		status: 401,
		retryable: false,
		forStatus: "only",
		documented: true,
		meaning: "No API key, a malformed `Authorization` header, or an unknown or disabled key.",
	},
	FORBIDDEN: {
		status: 403,
		retryable: false,
		forStatus: "fallback",
		documented: false,
		meaning: "An internal action refused in this mode (e.g. reading a rider's OTP outside the simulated fleet).",
	},
	SANDBOX_ONLY: {
		status: 403,
		retryable: false,
		documented: true,
		meaning: "A sandbox control (`/ride/sandbox/advance`) with a live key: sandbox controls steer simulated drivers and serve test keys only.",
	},
	ORDER_NOT_FOUND: {
		status: 404,
		retryable: false,
		documented: true,
		meaning: "Unknown `orderId`, or one that belongs to another partner.",
	},
	NOT_FOUND: {
		status: 404,
		retryable: false,
		forStatus: "fallback",
		documented: true,
		meaning: "Unknown route, or a method other than the documented one (e.g. `GET` on a `POST` route).",
	},
	DRIVER_NOT_FOUND: {
		status: 404,
		retryable: false,
		documented: false,
		meaning: "Unknown driver (driver and fleet calls).",
	},
	RIDE_NOT_ACTIVE: {
		status: 409,
		retryable: false,
		documented: true,
		meaning: "Cancel of a ride that is `dropped` or `no_driver_found`; a sandbox advance of a ride that has ended.",
	},
	RIDE_NOT_CANCELLABLE: {
		status: 409,
		retryable: false,
		documented: true,
		meaning: "A cancel preview or a confirmed cancel (`confirmFee`) of a `started` ride: the rider is on board; the trip ends with the drop.",
	},
	CANCELLATION_FEE_CHANGED: {
		status: 409,
		retryable: false,
		documented: true,
		meaning:
			"A confirmed cancel whose fee is now higher than `confirmFee` (the driver came near or arrived since the preview); nothing changed. `details` carries the new fee (`cancellationFee.amount`, `cancellationFee.currency`, `cancellationFee.rule`): confirm again with it.",
	},
	RIDE_NOT_COMPLETED: {
		status: 409,
		retryable: false,
		documented: true,
		meaning: "Feedback before the ride is `dropped`.",
	},
	FEEDBACK_ALREADY_SUBMITTED: {
		status: 409,
		retryable: false,
		documented: true,
		meaning: "A second feedback for the same ride.",
	},
	SANDBOX_UNAVAILABLE: {
		status: 409,
		retryable: false,
		documented: true,
		meaning: "A sandbox control on a deployment that runs no simulated fleet (`FLEET_MODE=live`): test rides there wait for test drivers.",
	},
	SANDBOX_NOT_MANUAL: {
		status: 409,
		retryable: false,
		documented: true,
		meaning: 'A sandbox advance of a ride not booked in manual mode (`"metadata": { "sandbox": "manual" }`): other sandbox rides move by themselves.',
	},
	SANDBOX_TARGET_UNREACHABLE: {
		status: 409,
		retryable: false,
		documented: true,
		meaning:
			"A sandbox advance whose `to` the ride cannot reach from its status: a status it already passed, `no_driver_found` once a driver accepted, `driver_drop_out` once the ride started.",
	},
	RIDER_HAS_ACTIVE_RIDE: {
		status: 409,
		retryable: false,
		documented: true,
		meaning:
			"A sandbox advance of a manual `scheduled` ride while its rider has an active ride (`searching` … `started`): the ride keeps waiting, as a scheduled ride that comes due then waits; nothing changed. Advance it again once that ride has ended.",
	},
	IDEMPOTENCY_KEY_IN_USE: {
		status: 409,
		retryable: true,
		documented: true,
		meaning: "The first call with this `Idempotency-Key` is still running; retry shortly (`retryable: true`).",
	},
	CONFLICT: {
		status: 409,
		retryable: "with-retry-after",
		forStatus: "fallback",
		documented: true,
		meaning:
			"The ride (or the rider's rides) kept changing under concurrent updates and the call gave up; nothing was changed. Retry after `Retry-After` seconds (`retryable: true`). Rare; not in the contract's table.",
	},
	INVALID_TRANSITION: {
		status: 409,
		retryable: false,
		documented: false,
		meaning: "A ride status move its actor may not make (driver and fleet calls).",
	},
	OTP_LOCKED: {
		status: 409,
		retryable: false,
		documented: false,
		meaning:
			"Too many OTP tries for this ride: starting it with an OTP is refused until an operator unlocks it (orders.unlockOtp); the driver may drop out, the partner may cancel (driver and fleet calls).",
	},
	LOCATION_IMPLAUSIBLE: {
		status: 422,
		retryable: false,
		documented: false,
		meaning:
			"The position implies a speed no vehicle drives (over DRIVER_MAX_SPEED_KMH since the driver's last known position, beyond DRIVER_JUMP_TOLERANCE_M); nothing was recorded (driver calls).",
	},
	NOT_AT_PICKUP: {
		status: 409,
		retryable: false,
		documented: false,
		meaning:
			"The driver's last known position is farther than DRIVER_ARRIVAL_RADIUS_M from the pickup: send a position at the pickup first (driver calls).",
	},
	DRIVER_WAITS_FULL: {
		status: 503,
		retryable: true,
		documented: false,
		meaning: "This dispatch instance holds as many waiting drivers as DRIVER_MAX_WAITS allows; retry after Retry-After (driver calls).",
	},
	DRIVER_NOT_AVAILABLE: {
		status: 409,
		retryable: false,
		documented: false,
		meaning: "The driver is on a ride (driver and fleet calls).",
	},
	PAYLOAD_TOO_LARGE: {
		status: 413,
		retryable: false,
		forStatus: "only",
		documented: true,
		meaning: "The body is larger than the limit.",
	},
	UNSUPPORTED_MEDIA_TYPE: {
		status: 415,
		retryable: false,
		forStatus: "only",
		documented: true,
		meaning:
			"The body is not sent as `application/json` (UTF-8), or is compressed (`Content-Encoding`). Not in the contract's table: added by this gateway.",
	},
	QUOTE_INVALID: {
		status: 422,
		retryable: false,
		documented: true,
		meaning: `Unknown, foreign or mismatched \`quoteId\` (other service type, pickup/drop more than ${QUOTE_MATCH_RADIUS_METRES} m from the quoted one, or another \`pickupAt\`: a quote for a pickup time books only that time, a quote without one only a ride now).`,
	},
	QUOTE_EXPIRED: {
		status: 422,
		retryable: false,
		documented: true,
		meaning: "The quote's validity has passed.",
	},
	IDEMPOTENCY_KEY_REUSED: {
		status: 422,
		retryable: false,
		documented: true,
		meaning: `The \`Idempotency-Key\` was used within ${IDEMPOTENCY_TTL_MS / 3_600_000} h with a different body.`,
	},
	INVALID_OTP: {
		status: 422,
		retryable: false,
		documented: false,
		meaning: "The OTP does not match the ride (driver and fleet calls).",
	},
	RATE_LIMITED: {
		status: 429,
		retryable: true,
		forStatus: "only",
		documented: true,
		meaning: "The partner's rate limit is exhausted; wait `Retry-After` seconds (`retryable: true`).",
	},
	INTERNAL_ERROR: {
		status: 500,
		retryable: false,
		documented: true,
		meaning: "Anything else. The body never carries a stack trace, SQL or internal names.",
	},
	SERVICE_UNAVAILABLE: {
		status: 503,
		retryable: true,
		documented: true,
		meaning:
			"An internal service is down or did not answer in time; retry after `Retry-After` seconds (`retryable: true`). A create-order retry should carry the same `Idempotency-Key`.",
	},
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

export function isErrorCode(code: string): code is ErrorCode {
	return Object.prototype.hasOwnProperty.call(ERRORS, code);
}

/** The documented codes by HTTP status, ascending, in table order. */
export function documentedCodesByStatus(): Record<number, ErrorCode[]> {
	const out: Record<number, ErrorCode[]> = {};
	for (const code of ERROR_CODES) {
		const spec: ErrorSpec = ERRORS[code];
		if (spec.documented) (out[spec.status] ??= []).push(code);
	}
	return out;
}

/** Status → code for errors that carry that status (see `ErrorSpec.forStatus`). */
export function codesForStatus(kind: "only" | "fallback"): Record<number, ErrorCode> {
	const out: Record<number, ErrorCode> = {};
	for (const code of ERROR_CODES) {
		const spec: ErrorSpec = ERRORS[code];
		if (spec.forStatus === kind) out[spec.status] = code;
	}
	return out;
}

/**
 * fastest-validator's messages as partners read them: each names the field
 * as written in the body ("pickup.lat must be less than or equal to 90").
 * Every node's broker validator uses them (moleculer.config.ts), so a
 * validation error reads the same whichever node raised it. Kinds not listed
 * (arrayUnique, arrayEnum, objectMinProps, objectMaxProps) keep the
 * library's text. `stringUnsafe`, `objectDepth` and the per-field
 * `objectStrict` are our own rules (lib/validator.ts), applied to every
 * action's params.
 */
export const VALIDATION_MESSAGES: Record<string, string> = {
	required: "{field} is required",
	string: "{field} must be a string",
	stringEmpty: "{field} must not be empty",
	stringMin: "{field} length must be greater than or equal to {expected} characters long",
	stringMax: "{field} length must be less than or equal to {expected} characters long",
	stringLength: "{field} length must be {expected} characters long",
	stringPattern: "{field} fails to match the required pattern",
	stringContains: "{field} must contain the '{expected}' text",
	stringEnum: "{field} does not match any of the allowed values",
	stringNumeric: "{field} must be a numeric string",
	stringAlpha: "{field} must be an alphabetic string",
	stringAlphanum: "{field} must be an alphanumeric string",
	stringAlphadash: "{field} must be an alphadash string",
	stringHex: "{field} must be a hex string",
	stringSingleLine: "{field} must be a single line string",
	stringBase64: "{field} must be a base64 string",
	number: "{field} must be a number",
	numberMin: "{field} must be greater than or equal to {expected}",
	numberMax: "{field} must be less than or equal to {expected}",
	numberEqual: "{field} must be equal to {expected}",
	numberNotEqual: "{field} can't be equal to {expected}",
	numberInteger: "{field} must be an integer",
	numberPositive: "{field} must be a positive number",
	numberNegative: "{field} must be a negative number",
	array: "{field} must be an array",
	arrayEmpty: "{field} must not be an empty array",
	arrayMin: "{field} must contain at least {expected} items",
	arrayMax: "{field} must contain less than or equal to {expected} items",
	arrayLength: "{field} must contain {expected} items",
	arrayContains: "{field} must contain the '{expected}' item",
	tuple: "{field} must be an array",
	tupleEmpty: "{field} must not be an empty array",
	tupleLength: "{field} must contain {expected} items",
	boolean: "{field} must be a boolean",
	currency: "{field} must be a valid currency format",
	date: "{field} must be a Date",
	dateMin: "{field} must be greater than or equal to {expected}",
	dateMax: "{field} must be less than or equal to {expected}",
	// The library's text reads "value 'scooty, cab' does not match": say what is allowed instead.
	enumValue: "{field} must be one of: {expected}",
	equalValue: "{field} value must be equal to '{expected}'",
	equalField: "{field} value must be equal to '{expected}' field value",
	forbidden: "{field} is forbidden",
	function: "{field} must be a function",
	email: "{field} must be a valid e-mail",
	emailEmpty: "{field} must not be empty",
	emailMin: "{field} length must be greater than or equal to {expected} characters long",
	emailMax: "{field} length must be less than or equal to {expected} characters long",
	luhn: "{field} must be a valid checksum luhn",
	mac: "{field} must be a valid MAC address",
	object: "{field} must be an Object",
	url: "{field} must be a valid URL",
	urlEmpty: "{field} must not be empty",
	uuid: "{field} must be a valid UUID",
	uuidVersion: "{field} must be a valid UUID version provided",
	classInstanceOf: "{field} must be an instance of the '{expected}' class",
	objectID: "{field} must be an valid ObjectID",
	record: "{field} must be an Object",
	// lib/validator.ts: an unknown key of a strict object, named by its own path.
	objectStrict: "{field} is not a known field",
	// lib/validator.ts: strings PostgreSQL cannot store, in values and keys.
	stringUnsafe: "{field} must not contain U+0000 or unpaired surrogate characters",
	objectDepth: `{field} is nested too deeply (at most ${PARAMS_MAX_DEPTH} levels)`,
};
