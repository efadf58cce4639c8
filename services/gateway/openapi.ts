import type { DocumentedLimits } from "./gateway.settings";
import { RIDE_BASE_PATH, RIDE_ROUTES } from "./routes";

/**
 * The OpenAPI 3.1 document of the partner API, built from the contract
 * (../../../shared/API.md) and the gateway's own settings (limits). Served at
 * `GET /openapi.json` and rendered to HTML at `GET /docs`. Where the contract
 * is silent, the choice made is written into the descriptions below.
 */

export type JsonSchema = Record<string, unknown>;
export interface OpenApiDocument {
	openapi: string;
	info: Record<string, unknown>;
	paths: Record<string, Record<string, unknown>>;
	components: Record<string, Record<string, unknown>>;
	webhooks: Record<string, unknown>;
	[key: string]: unknown;
}

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const nullable = (schema: JsonSchema): JsonSchema => ({ oneOf: [schema, { type: "null" }] });

/** Every error code the API answers with, by HTTP status. */
export const ERROR_CODES_BY_STATUS: Record<number, string[]> = {
	400: ["INVALID_JSON", "VALIDATION_ERROR", "INVALID_WEBHOOK_URL"],
	401: ["UNAUTHORIZED"],
	404: ["ORDER_NOT_FOUND", "NOT_FOUND"],
	409: ["RIDE_NOT_ACTIVE", "RIDE_NOT_COMPLETED", "FEEDBACK_ALREADY_SUBMITTED", "IDEMPOTENCY_KEY_IN_USE", "CONFLICT"],
	413: ["PAYLOAD_TOO_LARGE"],
	415: ["UNSUPPORTED_MEDIA_TYPE"],
	422: ["QUOTE_INVALID", "QUOTE_EXPIRED", "IDEMPOTENCY_KEY_REUSED"],
	429: ["RATE_LIMITED"],
	500: ["INTERNAL_ERROR"],
	503: ["SERVICE_UNAVAILABLE"],
};

const ERROR_MEANINGS: Record<string, string> = {
	INVALID_JSON: "The body is not valid JSON.",
	VALIDATION_ERROR: "A field is missing, of the wrong type or out of range (including an unknown `serviceType`, a body that is not a JSON object, or a bad `Idempotency-Key` header). `details` names each field.",
	INVALID_WEBHOOK_URL: "`webhookURL` is not an absolute http(s) URL, or is refused by the SSRF policy (private, loopback, link-local or metadata address in production).",
	UNAUTHORIZED: "No API key, a malformed `Authorization` header, or an unknown or disabled key.",
	ORDER_NOT_FOUND: "Unknown `orderId`, or one that belongs to another partner.",
	NOT_FOUND: "Unknown route, or a method other than the documented one (e.g. `GET` on a `POST` route).",
	RIDE_NOT_ACTIVE: "Cancel of a ride that is `dropped` or `no_driver_found`.",
	RIDE_NOT_COMPLETED: "Feedback before the ride is `dropped`.",
	FEEDBACK_ALREADY_SUBMITTED: "A second feedback for the same ride.",
	IDEMPOTENCY_KEY_IN_USE: "The first call with this `Idempotency-Key` is still running; retry shortly (`retryable: true`).",
	CONFLICT: "The ride (or the rider's rides) kept changing under concurrent updates and the call gave up; nothing was changed. Retry after `Retry-After` seconds (`retryable: true`). Rare; not in the contract's table.",
	PAYLOAD_TOO_LARGE: "The body is larger than the limit.",
	UNSUPPORTED_MEDIA_TYPE: "The body is not sent as `application/json` (UTF-8), or is compressed (`Content-Encoding`). Not in the contract's table: added by this gateway.",
	QUOTE_INVALID: "Unknown, foreign or mismatched `quoteId` (other service type, or pickup/drop more than 200 m from the quoted one).",
	QUOTE_EXPIRED: "The quote's validity has passed.",
	IDEMPOTENCY_KEY_REUSED: "The `Idempotency-Key` was used within 24 h with a different body.",
	RATE_LIMITED: "The partner's rate limit is exhausted; wait `Retry-After` seconds (`retryable: true`).",
	INTERNAL_ERROR: "Anything else. The body never carries a stack trace, SQL or internal names.",
	SERVICE_UNAVAILABLE: "An internal service is down or did not answer in time; retry after `Retry-After` seconds (`retryable: true`). A create-order retry should carry the same `Idempotency-Key`.",
	// Business answers (HTTP 200, not errors).
	USER_HAVE_ACTIVE_RIDE: "",
};

/** Errors every `/ride/*` endpoint can answer, before the endpoint's own. */
const COMMON_RIDE_ERRORS = ["INVALID_JSON", "VALIDATION_ERROR", "UNAUTHORIZED", "PAYLOAD_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE", "RATE_LIMITED", "INTERNAL_ERROR", "SERVICE_UNAVAILABLE"];

/** The endpoint-specific error codes of every `/ride/*` route. */
export const ENDPOINT_ERRORS: Record<string, string[]> = {
	"/fare-estimate": [],
	"/create-order": ["INVALID_WEBHOOK_URL", "IDEMPOTENCY_KEY_IN_USE", "CONFLICT", "QUOTE_INVALID", "QUOTE_EXPIRED", "IDEMPOTENCY_KEY_REUSED"],
	"/cancel": ["ORDER_NOT_FOUND", "RIDE_NOT_ACTIVE", "CONFLICT"],
	"/feedback": ["ORDER_NOT_FOUND", "RIDE_NOT_COMPLETED", "FEEDBACK_ALREADY_SUBMITTED"],
	"/status": ["ORDER_NOT_FOUND"],
	"/events": ["ORDER_NOT_FOUND"],
};

function statusOf(code: string): number {
	for (const [status, codes] of Object.entries(ERROR_CODES_BY_STATUS)) if (codes.includes(code)) return Number(status);
	throw new Error(`No HTTP status for error code ${code}`);
}

/** All error codes of one `/ride` endpoint. */
export function endpointErrorCodes(path: string): string[] {
	return [...COMMON_RIDE_ERRORS, ...(ENDPOINT_ERRORS[path] ?? [])];
}

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

function errorResponses(codes: string[]): Record<string, unknown> {
	const byStatus = new Map<number, string[]>();
	for (const code of codes) {
		const status = statusOf(code);
		byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
	}
	const out: Record<string, unknown> = {};
	for (const status of [...byStatus.keys()].sort((a, b) => a - b)) {
		const list = byStatus.get(status)!;
		const headers: Record<string, unknown> = { "X-Request-Id": { $ref: "#/components/headers/XRequestId" } };
		if (status === 429 || status === 503 || list.includes("CONFLICT")) headers["Retry-After"] = { $ref: "#/components/headers/RetryAfter" };
		if (status === 401) headers["WWW-Authenticate"] = { $ref: "#/components/headers/WwwAuthenticate" };
		if (status !== 401) {
			headers["X-RateLimit-Limit"] = { $ref: "#/components/headers/RateLimitLimit" };
			headers["X-RateLimit-Remaining"] = { $ref: "#/components/headers/RateLimitRemaining" };
		}
		const examples: Record<string, unknown> = {};
		for (const code of list) {
			examples[code] = {
				summary: ERROR_MEANINGS[code],
				value: exampleError(code),
			};
		}
		out[String(status)] = {
			description: `${STATUS_TEXT[status]}: ${list.map((c) => `\`${c}\``).join(", ")}. ${list.map((c) => `${c}: ${ERROR_MEANINGS[c]}`).join(" ")}`,
			headers,
			content: {
				"application/json": {
					schema: {
						allOf: [ref("Error"), { type: "object", properties: { code: { enum: list } } }],
					},
					examples,
				},
			},
		};
	}
	return out;
}

function exampleError(code: string): Record<string, unknown> {
	switch (code) {
		case "VALIDATION_ERROR":
			return { code, message: "pickup.lat must be less than or equal to 90", details: [{ field: "pickup.lat", message: "pickup.lat must be less than or equal to 90" }], retryable: false };
		case "INVALID_JSON":
			return { code, message: "Request body is not valid JSON", retryable: false };
		case "UNAUTHORIZED":
			return { code, message: "Invalid API key", retryable: false };
		case "RATE_LIMITED":
			return { code, message: "Rate limit of 600 requests per minute exceeded; retry in 1 s", retryable: true };
		case "SERVICE_UNAVAILABLE":
			return { code, message: "A service needed for this request is unavailable; retry later", retryable: true };
		case "IDEMPOTENCY_KEY_IN_USE":
			return { code, message: "A request with this Idempotency-Key is still running", retryable: true };
		case "CONFLICT":
			return { code, message: "The ride kept changing; try again", retryable: true };
		case "INTERNAL_ERROR":
			return { code, message: "Internal server error", retryable: false };
		default:
			return { code, message: ERROR_MEANINGS[code].replace(/`/g, ""), retryable: false };
	}
}

const point: JsonSchema = {
	type: "object",
	description: "A position (WGS 84).",
	required: ["lat", "lng"],
	properties: {
		lat: { type: "number", minimum: -90, maximum: 90, example: 12.9716 },
		lng: { type: "number", minimum: -180, maximum: 180, example: 77.5946 },
	},
};

const place: JsonSchema = {
	type: "object",
	description: "A `Point` plus an optional human address.",
	required: ["lat", "lng"],
	properties: {
		lat: { type: "number", minimum: -90, maximum: 90, example: 12.9716 },
		lng: { type: "number", minimum: -180, maximum: 180, example: 77.5946 },
		address: { type: "string", maxLength: 500, example: "MG Road" },
	},
};

const isoTime: JsonSchema = { type: "string", format: "date-time", description: "ISO-8601 UTC, e.g. 2026-11-22T10:15:30.123Z." };

function schemas(): Record<string, JsonSchema> {
	return {
		Point: point,
		Place: place,
		ServiceType: { type: "string", enum: ["scooty", "cab"], description: "Exactly `scooty` or `cab`." },
		RideStatus: {
			type: "string",
			enum: ["searching", "accepted", "arrived", "started", "dropped", "customer_cancelled", "no_driver_found"],
			description:
				"Active: `searching`, `accepted`, `arrived`, `started`. Terminal: `dropped`, `customer_cancelled`, `no_driver_found`. " +
				"searching → accepted → arrived → started → dropped; any active state → customer_cancelled (POST /ride/cancel); " +
				"searching → no_driver_found (dispatch timeout); accepted/arrived → searching when the driver drops out (dispatched again, no webhook). " +
				"A ride starts only with the correct OTP.",
		},
		FareBreakdown: {
			type: "object",
			description: "How the fare was made, in major units of `currency`.",
			required: ["baseFare", "distanceFare", "timeFare", "surgeMultiplier", "tax"],
			properties: {
				baseFare: { type: "number", example: 20 },
				distanceFare: { type: "number", example: 26.17 },
				timeFare: { type: "number", example: 8 },
				surgeMultiplier: { type: "number", minimum: 1, example: 1 },
				tax: { type: "number", example: 3.05 },
			},
		},
		Quote: {
			type: "object",
			required: ["quoteId", "serviceType", "totalAmount", "currency", "eta", "expiresAt", "fareBreakdown"],
			properties: {
				quoteId: { type: "string", pattern: "^qt_", description: "Opaque; pass it to create-order to get this fare. Valid for 5 minutes (configurable)." },
				serviceType: ref("ServiceType"),
				totalAmount: { type: "number", minimum: 0, description: "Major units of `currency`, at most 2 decimals.", example: 61 },
				currency: { type: "string", pattern: "^[A-Z]{3}$", description: "ISO 4217.", example: "INR" },
				eta: { type: ["integer", "null"], minimum: 0, description: "Seconds until the nearest available driver of this type (within 5 km) can reach the pickup; `null` when none is available nearby.", example: 180 },
				expiresAt: isoTime,
				fareBreakdown: ref("FareBreakdown"),
				distance: { type: "integer", minimum: 0, description: "Extension: this quote's trip distance in metres (the same road distance for every type)." },
				duration: { type: "integer", minimum: 0, description: "Extension: this quote's trip duration in seconds (average speeds differ per type; the top-level `duration` is the first quote's)." },
			},
		},
		FareEstimateRequest: {
			type: "object",
			required: ["pickup", "drop"],
			properties: {
				pickup: ref("Point"),
				drop: ref("Point"),
				serviceType: { ...ref("ServiceType"), description: "Only this type; without it one quote per type, `scooty` first, then `cab`." },
			},
			description: "Pickup equal to drop, or a trip longer than the configured maximum, is `400 VALIDATION_ERROR`.",
		},
		FareEstimate: {
			type: "object",
			required: ["distance", "duration", "quotes"],
			properties: {
				distance: { type: "integer", minimum: 0, description: "Trip distance in metres.", example: 5234 },
				duration: { type: "integer", minimum: 0, description: "Trip duration in seconds.", example: 960 },
				quotes: { type: "array", items: ref("Quote"), minItems: 1, maxItems: 2 },
			},
		},
		User: {
			type: "object",
			description: "The rider. Identified by (partner, phone): created or updated on every create-order.",
			required: ["name", "phone"],
			properties: {
				name: { type: "string", minLength: 1, maxLength: 200, example: "Asha Rao" },
				phone: { type: "string", pattern: "^\\+[1-9][0-9]{6,14}$", description: "E.164.", example: "+919812345678" },
				email: { type: "string", format: "email", maxLength: 254, example: "asha@example.com" },
			},
		},
		Metadata: {
			type: "object",
			additionalProperties: true,
			description:
				"Any JSON object of the partner's, at most 4 KB serialised; echoed back in every order response and every webhook (`null` when none was given).\n\n" +
				"Sandbox directives (only when the server runs the simulated fleet, `FLEET_MODE=simulated`; ignored in live mode and when unknown): " +
				"`{ \"sandbox\": { \"scenario\": \"no_driver_found\" } }` ends the ride as `no_driver_found`; " +
				"`\"driver_drop_out\"` makes the first driver drop out before the start, so the ride is dispatched again and a second `accepted` names the new driver; " +
				"`\"fast\"` makes every step of the ride immediate. `\"sandbox\": \"<scenario>\"` is accepted too.",
			example: { partnerRef: "booking-8812" },
		},
		CreateOrderRequest: {
			type: "object",
			required: ["user", "serviceType", "pickup", "drop", "webhookURL"],
			properties: {
				user: ref("User"),
				serviceType: ref("ServiceType"),
				pickup: ref("Place"),
				drop: ref("Place"),
				webhookURL: {
					type: "string",
					format: "uri",
					maxLength: 2048,
					description:
						"Absolute `http`/`https` URL, stored on the ride; every webhook of the ride goes there. In production a URL resolving to a private, loopback, link-local or metadata address is refused (`400 INVALID_WEBHOOK_URL`); dev/test may allow loopback (`WEBHOOK_ALLOW_PRIVATE`).",
					example: "https://partner.example.com/hooks/rides",
				},
				quoteId: {
					type: "string",
					maxLength: 2048,
					description: "Optional. When valid, the quoted fare is honoured. Unknown, foreign or mismatched → `422 QUOTE_INVALID`; expired → `422 QUOTE_EXPIRED`. Without it the current price applies.",
				},
				metadata: ref("Metadata"),
			},
		},
		DriverLocation: {
			type: "object",
			required: ["lat", "lng"],
			properties: {
				lat: { type: "number", minimum: -90, maximum: 90 },
				lng: { type: "number", minimum: -180, maximum: 180 },
				heading: { type: "number", minimum: 0, maximum: 360, description: "Degrees clockwise from north, when known." },
			},
		},
		Driver: {
			type: "object",
			required: ["id", "name", "phone", "vehicleNumber"],
			properties: {
				id: { type: "string", pattern: "^drv_" },
				name: { type: "string" },
				phone: { type: "string", example: "+919876543210" },
				vehicleNumber: { type: "string", example: "KA01AB1234" },
				location: { ...nullable(ref("DriverLocation")), description: "Last known location once assigned." },
			},
		},
		Fare: {
			type: "object",
			required: ["totalAmount", "currency"],
			properties: {
				totalAmount: { type: "number", minimum: 0, description: "Major units of `currency`, at most 2 decimals.", example: 182 },
				currency: { type: "string", pattern: "^[A-Z]{3}$", example: "INR" },
			},
		},
		Order: {
			type: "object",
			required: ["orderId", "otp", "status", "serviceType", "pickup", "drop", "fare", "distance", "duration", "driver", "metadata", "createdAt", "updatedAt"],
			properties: {
				orderId: { type: "string", pattern: "^ord_" },
				otp: { type: "string", pattern: "^[0-9]{4}$", description: "4 digits from a cryptographic random source; the rider tells it to the driver, and the ride starts only with it." },
				status: ref("RideStatus"),
				serviceType: ref("ServiceType"),
				pickup: ref("Place"),
				drop: ref("Place"),
				fare: ref("Fare"),
				distance: { type: "integer", minimum: 0, description: "Metres." },
				duration: { type: "integer", minimum: 0, description: "Seconds." },
				driver: { ...nullable(ref("Driver")), description: "`null` until a driver accepts." },
				metadata: nullable(ref("Metadata")),
				createdAt: isoTime,
				updatedAt: isoTime,
			},
		},
		ActiveRideOrder: {
			description: "The rider already has an active ride: the existing Order plus `code`. Holds under concurrency: simultaneous create-order calls for one rider make exactly one ride.",
			allOf: [
				ref("Order"),
				{ type: "object", required: ["code"], properties: { code: { type: "string", const: "USER_HAVE_ACTIVE_RIDE" } } },
			],
		},
		OrderRef: {
			type: "object",
			required: ["orderId"],
			properties: { orderId: { type: "string", minLength: 1, maxLength: 100, pattern: "^ord_", example: "ord_8x2k…" } },
		},
		CancelRequest: {
			type: "object",
			required: ["orderId"],
			properties: {
				orderId: { type: "string", minLength: 1, maxLength: 100 },
				reason: { type: "string", maxLength: 200 },
			},
		},
		CancelResult: {
			type: "object",
			required: ["code", "orderId", "status"],
			properties: {
				code: { type: "string", const: "RIDE_CANCELLED" },
				orderId: { type: "string" },
				status: { type: "string", const: "customer_cancelled" },
			},
		},
		FeedbackRequest: {
			type: "object",
			required: ["orderId", "rating"],
			properties: {
				orderId: { type: "string", minLength: 1, maxLength: 100 },
				rating: { type: "integer", minimum: 1, maximum: 5 },
				comment: { type: "string", maxLength: 1000 },
				tags: { type: "array", maxItems: 50, items: { type: "string", maxLength: 100 } },
			},
		},
		FeedbackResult: {
			type: "object",
			required: ["code", "orderId"],
			properties: {
				code: { type: "string", const: "FEEDBACK_SUBMITTED" },
				orderId: { type: "string" },
			},
		},
		WebhookStatus: {
			type: "string",
			enum: ["accepted", "arrived", "started", "dropped", "customer_cancelled", "no_driver_found", "location_updated"],
			description: "`location_updated` is a location event, not a ride state. Going back to `searching` sends no event.",
		},
		WebhookEvent: {
			type: "object",
			description:
				"The body of every webhook. `sequence` increases by one per event of the order; status events arrive in order; the only gaps are superseded location events. " +
				"`driver` is present from `accepted` on; `location` on `location_updated` (and the latest one on status events); `eta` is seconds to the pickup before `arrived` and to the drop after `started`.",
			required: ["eventId", "orderId", "status", "sequence", "occurredAt", "metadata"],
			properties: {
				eventId: { type: "string", pattern: "^evt_", description: "Also the `webhook-id` header. De-duplicate on it: delivery is at least once." },
				orderId: { type: "string", pattern: "^ord_" },
				status: ref("WebhookStatus"),
				sequence: { type: "integer", minimum: 1 },
				occurredAt: isoTime,
				driver: ref("Driver"),
				location: ref("DriverLocation"),
				eta: { type: "integer", minimum: 0 },
				metadata: nullable(ref("Metadata")),
			},
		},
		DeliveryState: {
			type: "object",
			required: ["state", "attempts", "lastStatus", "lastError"],
			properties: {
				state: {
					type: "string",
					enum: ["pending", "delivered", "failed", "superseded", "expired"],
					description:
						"`pending`: not delivered yet (never tried, or waiting for its next retry). `delivered`: a 2xx arrived within 10 s. `failed`: the last retry failed; operators can replay it. " +
						"Only `location_updated` events can also be `superseded` (a newer location of the ride replaced it before it went out) or `expired` (not delivered within 120 s of being made): both are final and never sent. " +
						"The contract names only the first three; the other two are final states of location events that were never sent.",
				},
				attempts: { type: "integer", minimum: 0, description: "HTTP attempts made so far." },
				lastStatus: { type: ["integer", "null"], description: "HTTP status of the last attempt; `null` before any, or when it got no answer (timeout, connection error)." },
				lastError: { type: ["string", "null"], description: "Why the last attempt failed (e.g. `TIMEOUT`, `CONNECTION`, `HTTP_5XX`); `null` when it succeeded or before any." },
			},
		},
		RideEventRecord: {
			type: "object",
			description: "One webhook event of the ride and its delivery state.",
			required: ["eventId", "sequence", "status", "occurredAt", "payload", "delivery"],
			properties: {
				eventId: { type: "string", pattern: "^evt_" },
				sequence: { type: "integer", minimum: 1 },
				status: ref("WebhookStatus"),
				occurredAt: isoTime,
				payload: { ...ref("WebhookEvent"), description: "The exact webhook body." },
				delivery: ref("DeliveryState"),
			},
		},
		RideEvents: {
			type: "object",
			required: ["events"],
			properties: { events: { type: "array", items: ref("RideEventRecord"), description: "In `sequence` order." } },
		},
		ErrorDetail: {
			type: "object",
			required: ["field", "message"],
			properties: {
				field: { type: "string", description: "Path of the field in the body, e.g. `pickup.lat`, `user.phone`, `tags[0]`; a header name for header problems.", example: "pickup.lat" },
				message: { type: "string" },
			},
		},
		Error: {
			type: "object",
			description: "Every 4xx/5xx answer. `details` only on validation problems. Never a stack trace, SQL or internal names.",
			required: ["code", "message", "retryable"],
			properties: {
				code: { type: "string", enum: Object.values(ERROR_CODES_BY_STATUS).flat() },
				message: { type: "string", description: "For people; do not parse it." },
				details: { type: "array", items: ref("ErrorDetail") },
				retryable: { type: "boolean", description: "`true` when the same request may succeed later (429, 503, 409 IDEMPOTENCY_KEY_IN_USE, 409 CONFLICT)." },
			},
		},
		Health: {
			type: "object",
			required: ["status"],
			properties: {
				status: { type: "string", enum: ["live", "ready", "not_ready", "draining"] },
				checks: { type: "object", additionalProperties: { type: "string", enum: ["ok", "unavailable", "error"] } },
			},
		},
	};
}

function rideOperations(): Record<string, Record<string, unknown>> {
	const ops: Record<string, { summary: string; description: string; request: string; responses: Record<string, unknown>; idempotency?: boolean; callbacks?: boolean }> = {
		"/fare-estimate": {
			summary: "Estimate the fare",
			description: "Quotes for a trip: one per service type (`scooty` first, then `cab`), or exactly the one asked for. Writes nothing; a quote is valid for 5 minutes (configurable). Pricing is per service type (base, per km, per minute, minimum fare, tax); surge may apply.",
			request: "FareEstimateRequest",
			responses: { "200": okResponse("The quotes.", "FareEstimate") },
		},
		"/create-order": {
			summary: "Book a ride",
			description:
				"Creates or updates the rider (partner, phone) and books a ride. With a valid `quoteId` the quoted fare is honoured. " +
				"`201` with the new Order, or `200` with the rider's existing active Order plus `code: USER_HAVE_ACTIVE_RIDE`. " +
				"Send an `Idempotency-Key` to retry safely: the same key and body within 24 h return the first response again (status included).",
			request: "CreateOrderRequest",
			idempotency: true,
			callbacks: true,
			responses: {
				"201": okResponse("The new Order.", "Order"),
				"200": okResponse("The rider already has an active ride: that Order, with `code: USER_HAVE_ACTIVE_RIDE`.", "ActiveRideOrder"),
			},
		},
		"/cancel": {
			summary: "Cancel a ride",
			description: "Allowed while the ride is active (`searching`, `accepted`, `arrived`, `started`); sends the `customer_cancelled` webhook once. Cancelling a `customer_cancelled` ride again answers `200 RIDE_CANCELLED` and sends nothing (safe retries).",
			request: "CancelRequest",
			responses: { "200": okResponse("Cancelled (now or before).", "CancelResult") },
		},
		"/feedback": {
			summary: "Rate a finished ride",
			description: "Only for a `dropped` ride, once per ride.",
			request: "FeedbackRequest",
			responses: { "200": okResponse("Feedback stored.", "FeedbackResult") },
		},
		"/status": {
			summary: "Current state of a ride (extension)",
			description: "The current Order, with `driver` and its last known `location` once assigned. The polling fallback for partners that missed a webhook.",
			request: "OrderRef",
			responses: { "200": okResponse("The Order.", "Order") },
		},
		"/events": {
			summary: "Webhook events of a ride (extension)",
			description: "Every webhook event of the ride in `sequence` order, each with its delivery state (`pending`, `delivered`, `failed`), attempt count, last HTTP status and last error.",
			request: "OrderRef",
			responses: { "200": okResponse("The events.", "RideEvents") },
		},
	};
	const paths: Record<string, Record<string, unknown>> = {};
	for (const route of RIDE_ROUTES) {
		const op = ops[route.path];
		if (!op) throw new Error(`OpenAPI: no description for ${route.path}`);
		const parameters: unknown[] = [{ $ref: "#/components/parameters/XRequestId" }];
		if (op.idempotency) parameters.unshift({ $ref: "#/components/parameters/IdempotencyKey" });
		const operation: Record<string, unknown> = {
			operationId: route.path.slice(1).replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase()),
			tags: ["Rides"],
			summary: op.summary,
			description: op.description,
			security: [{ bearerAuth: [] }],
			parameters,
			requestBody: { required: true, content: { "application/json": { schema: ref(op.request) } } },
			responses: { ...op.responses, ...errorResponses(endpointErrorCodes(route.path)) },
		};
		if (op.callbacks) {
			operation.callbacks = { rideEvent: { "{$request.body#/webhookURL}": { $ref: "#/components/pathItems/RideEventWebhook" } } };
		}
		paths[`${RIDE_BASE_PATH}${route.path}`] = { [route.method.toLowerCase()]: operation };
	}
	return paths;
}

function okResponse(description: string, schema: string): Record<string, unknown> {
	return {
		description,
		headers: {
			"X-Request-Id": { $ref: "#/components/headers/XRequestId" },
			"X-RateLimit-Limit": { $ref: "#/components/headers/RateLimitLimit" },
			"X-RateLimit-Remaining": { $ref: "#/components/headers/RateLimitRemaining" },
		},
		content: { "application/json": { schema: ref(schema) } },
	};
}

function opsPaths(): Record<string, Record<string, unknown>> {
	const plain = (summary: string, description: string, responses: Record<string, unknown>) => ({
		get: { tags: ["Operations"], summary, description, security: [], responses },
	});
	const health = (description: string) => ({ description, content: { "application/json": { schema: ref("Health") } } });
	return {
		"/health/live": plain("Liveness", "200 while the process is up.", { "200": health("Alive: `{ \"status\": \"live\" }`.") }),
		"/health/ready": plain(
			"Readiness",
			"200 only when this gateway is not draining and every service it needs (partners, pricing, riders, orders) is registered and answers a database check. 503 otherwise (with `Retry-After`), and from the moment a graceful shutdown starts.",
			{ "200": health("Ready."), "503": health("Not ready (`not_ready`) or shutting down (`draining`); `checks` says which service failed.") },
		),
		"/openapi.json": plain("This document", "The OpenAPI 3.1 document of the API.", { "200": { description: "OpenAPI document.", content: { "application/json": { schema: { type: "object" } } } } }),
		"/docs": plain("API reference page", "This document rendered as one self-contained HTML page.", { "200": { description: "HTML.", content: { "text/html": { schema: { type: "string" } } } } }),
	};
}

function describeApi(config: DocumentedLimits): string {
	const kb = config.bodyLimitBytes % 1024 === 0 ? `${config.bodyLimitBytes / 1024} KB` : `${config.bodyLimitBytes} bytes`;
	const rate = config.rateLimitPerMinute > 0
		? `${config.rateLimitPerMinute} requests per minute per partner with bursts of up to ${config.rateLimitBurst} (\`RATE_LIMIT_PER_MINUTE\`, \`RATE_LIMIT_BURST\`; defaults 600 and the per-minute value)`
		: "off on this deployment (`RATE_LIMIT_PER_MINUTE=0`)";
	return [
		"Book and track rides for your customers. Everything is JSON over HTTP; every partner endpoint is `POST` under `/ride`. Field names are camelCase, times are ISO-8601 UTC, money is a number in major units of `currency` (at most 2 decimals), ids are opaque strings with a type prefix (`ord_`, `qt_`, `evt_`, `rdr_`, `drv_`).",
		"## Authentication and tenancy",
		"- Every `/ride/*` call carries `Authorization: Bearer <apiKey>`. Missing, malformed or unknown key: `401 UNAUTHORIZED` (with `WWW-Authenticate: Bearer`).",
		"- Everything (riders, orders, quotes, events) belongs to the partner that created it. Another partner's `orderId` or `quoteId` behaves exactly like an unknown one.",
		"- API keys are created by operators (`npm run partner -- create --name Acme`) and shown once; they are stored only as hashes. Each partner also gets a webhook signing secret (`whsec_…`).",
		"## Requests",
		`- Bodies are JSON objects sent as \`application/json\` (UTF-8), at most ${kb} (\`BODY_LIMIT\`): larger → \`413 PAYLOAD_TOO_LARGE\`. Not JSON → \`400 INVALID_JSON\`; JSON but not an object → \`400 VALIDATION_ERROR\`.`,
		"- A body sent with another `Content-Type` (or charset), or compressed with `Content-Encoding`, is refused with `415 UNSUPPORTED_MEDIA_TYPE` (the contract is silent here; this code is the gateway's addition). A request with no body at all is read as `{}`, so validation names the missing fields.",
		"- Query strings are ignored; only the body counts. The partner comes from the API key, never from the body.",
		"- `X-Request-Id`: send one (1–128 of `A-Z a-z 0-9 . _ : -`) or get a generated one; it is echoed on every response, success or error, and appears in our logs.",
		"- Unknown routes, and any method but `POST` on a `/ride` route, answer `404 NOT_FOUND` (before authentication).",
		"## Rate limits",
		`- ${rate}, as a token bucket. Every authenticated \`/ride/*\` request counts, whatever its outcome. Over the limit: \`429 RATE_LIMITED\` with \`Retry-After\` (seconds).`,
		"- `X-RateLimit-Limit` (requests per minute) and `X-RateLimit-Remaining` (requests you may make right now) are sent on every authenticated `/ride/*` answer.",
		"- The buckets live in each gateway instance's memory: behind a load balancer with N gateway replicas a partner can reach up to N times the rate, and a restart refills the bucket.",
		"## Errors",
		"- Every 4xx/5xx answer is `{ code, message, details?, retryable }`. Switch on `code`, not on `message`. `retryable: true` marks answers where the same request may succeed later (`429`, `503`, `409 IDEMPOTENCY_KEY_IN_USE`, `409 CONFLICT`).",
		`- \`503 SERVICE_UNAVAILABLE\` (with \`Retry-After: ${config.unavailableRetryAfterSeconds}\`) when a service behind the gateway is down or does not answer in time. For create-order such an answer is ambiguous: retry with the same \`Idempotency-Key\`.`,
		"- `USER_HAVE_ACTIVE_RIDE`, `RIDE_CANCELLED` and `FEEDBACK_SUBMITTED` are success answers (HTTP 200), not errors.",
		"## Webhooks",
		"- Ride events are POSTed to the ride's `webhookURL` (see `webhooks` / the create-order callback): signed with Standard Webhooks headers `webhook-id` (= `eventId`), `webhook-timestamp` (unix seconds), `webhook-signature` (`v1,` + base64 HMAC-SHA256 over `id.timestamp.body` with your `whsec_` secret).",
		"- Answer any 2xx within 10 s. Anything else (3xx included, redirects are never followed) is retried with up to 10% jitter 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h after the first try; `Retry-After` on 429/503 is honoured. After the last try the event is `failed` (see `/ride/events`) and no longer holds back later events.",
		"- Delivery is at least once: de-duplicate on `eventId`. Status events of an order arrive in `sequence` order. A `location_updated` event is only worth its newest value: a pending one is superseded by a newer one and dropped 120 s after it was made. While a ride is moving one goes out every 5 s (default).",
	].join("\n");
}

export function buildOpenApiDocument(config: DocumentedLimits): OpenApiDocument {
	const webhookPathItem = {
		post: {
			summary: "Ride event",
			description: "Sent to the ride's `webhookURL` for every status change and, while the ride moves, for location updates.",
			parameters: [
				{ name: "webhook-id", in: "header", required: true, schema: { type: "string", pattern: "^evt_" }, description: "The `eventId`; the same on every attempt." },
				{ name: "webhook-timestamp", in: "header", required: true, schema: { type: "string", pattern: "^[0-9]+$" }, description: "Unix seconds of this attempt." },
				{ name: "webhook-signature", in: "header", required: true, schema: { type: "string" }, description: "`v1,` + base64 HMAC-SHA256 over `webhook-id.webhook-timestamp.body` keyed with the partner's `whsec_` secret (base64 part decoded)." },
			],
			requestBody: { required: true, content: { "application/json": { schema: ref("WebhookEvent") } } },
			responses: {
				"200": { description: "Delivered (any 2xx within 10 s counts)." },
				"201": { description: "Delivered." },
				default: { description: "Anything else, or no answer within 10 s: retried on the schedule; `Retry-After` on 429/503 is honoured." },
			},
		},
	};
	return {
		openapi: "3.1.0",
		info: {
			title: "Partner Ride API",
			version: "1.0.0",
			description: describeApi(config),
		},
		servers: [
			{ url: "/", description: "This gateway" },
			{ url: "http://localhost:3000", description: "Local default (`PORT`)" },
		],
		tags: [
			{ name: "Rides", description: "The partner endpoints. All `POST`, all authenticated." },
			{ name: "Operations", description: "Health probes and this documentation. Not authenticated." },
		],
		security: [{ bearerAuth: [] }],
		paths: { ...rideOperations(), ...opsPaths() },
		webhooks: { rideEvent: { $ref: "#/components/pathItems/RideEventWebhook" } },
		components: {
			schemas: schemas(),
			securitySchemes: {
				bearerAuth: { type: "http", scheme: "bearer", description: "`Authorization: Bearer <apiKey>`; one key per partner, created by operators." },
			},
			parameters: {
				IdempotencyKey: {
					name: "Idempotency-Key",
					in: "header",
					required: false,
					schema: { type: "string", minLength: 1, maxLength: 255 },
					description:
						"Scoped to the partner. A repeat with the same key and body within 24 h returns the first response again; the same key with a different body → `422 IDEMPOTENCY_KEY_REUSED`; a repeat while the first is still running → `409 IDEMPOTENCY_KEY_IN_USE`. Visible ASCII only; an empty or longer key → `400 VALIDATION_ERROR`.",
				},
				XRequestId: {
					name: "X-Request-Id",
					in: "header",
					required: false,
					schema: { type: "string", pattern: "^[A-Za-z0-9._:\\-]{1,128}$" },
					description: "Your correlation id; echoed in the response. Anything else is replaced by a generated UUID.",
				},
			},
			headers: {
				XRequestId: { description: "The request's id (yours or generated).", schema: { type: "string" } },
				RateLimitLimit: { description: "Sustained requests per minute allowed to this partner on this gateway instance.", schema: { type: "integer" } },
				RateLimitRemaining: { description: "Requests this partner may make right now before being limited.", schema: { type: "integer" } },
				RetryAfter: { description: "Seconds to wait before retrying.", schema: { type: "integer", minimum: 1 } },
				WwwAuthenticate: { description: "`Bearer realm=\"ride-api\"`.", schema: { type: "string" } },
			},
			pathItems: { RideEventWebhook: webhookPathItem },
		},
	};
}
