import { DEFAULT_QUOTE_TTL_SECONDS, DEFAULT_SEARCH_RADIUS_METRES, OTP_DIGITS } from "../../../contracts/constants";
import { DELIVERY_STATES, LOCATION_TTL_MS, WEBHOOK_TIMEOUT_MS } from "../../../contracts/notifications";
import {
	ACTIVE_STATUSES,
	CANCELLATION_RULES,
	DEFAULT_CANCEL_GRACE_SECONDS,
	DRIVER_NEAR_ETA_SECONDS,
	DRIVER_NEAR_METRES,
	DROP_TOLERANCE_METRES,
	EVENTS_PAGE_MAX_BYTES,
	FINAL_FARE_BASES,
	RIDE_STATUSES,
	TERMINAL_STATUSES,
} from "../../../contracts/orders";
import { KEY_MODES } from "../../../contracts/partners";
import { ERROR_CODES_BY_STATUS } from "./error-responses";
import { codeList, seconds } from "./format";
import type { JsonSchema } from "./json-schema";

/**
 * The response side of the document: hand-written JSON Schema (the services
 * declare no reply schemas), with enums and numbers from contracts/.
 */

export const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const nullable = (schema: JsonSchema): JsonSchema => ({ oneOf: [schema, { type: "null" }] });

const ETA_TO_PICKUP: JsonSchema = {
	type: "integer",
	minimum: 0,
	description:
		"While the driver is on its way (`accepted`, and its `location_updated` events): seconds until it reaches the pickup, as last estimated; 0 once `arrived`.",
};

const isoTime: JsonSchema = { type: "string", format: "date-time", description: "ISO-8601 UTC, e.g. 2026-11-22T10:15:30.123Z." };

export function responseSchemas(): Record<string, JsonSchema> {
	return {
		RideStatus: {
			type: "string",
			enum: [...RIDE_STATUSES],
			description:
				`Active: ${codeList(ACTIVE_STATUSES)}. Terminal: ${codeList(TERMINAL_STATUSES)}. ` +
				"`scheduled` (only for rides booked with `pickupAt`): waiting for its dispatch time, then → searching (at the dispatch lead before the pickup time), → customer_cancelled (POST /ride/cancel, free), or → no_driver_found (the rider was on another ride until too late). " +
				"searching → accepted → arrived → started → dropped; any active state → customer_cancelled (POST /ride/cancel); " +
				"searching → no_driver_found (dispatch timeout; for a scheduled ride before its pickup time at the latest); accepted/arrived → searching when the driver drops out (dispatched again, no webhook). " +
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
				quoteId: {
					type: "string",
					pattern: "^qt_",
					description: `Opaque; pass it to create-order to get this fare. Valid for ${DEFAULT_QUOTE_TTL_SECONDS / 60} minutes by default (\`QUOTE_TTL_SECONDS\`).`,
				},
				serviceType: ref("ServiceType"),
				totalAmount: { type: "number", minimum: 0, description: "Major units of `currency`, at most 2 decimals.", example: 61 },
				currency: { type: "string", pattern: "^[A-Z]{3}$", description: "ISO 4217.", example: "INR" },
				eta: {
					type: ["integer", "null"],
					minimum: 0,
					description: `Seconds until the nearest available driver of this type (within ${DEFAULT_SEARCH_RADIUS_METRES / 1000} km by default) can reach the pickup; \`null\` when none is available nearby.`,
					example: 180,
				},
				expiresAt: isoTime,
				fareBreakdown: ref("FareBreakdown"),
				distance: {
					type: "integer",
					minimum: 0,
					description: "Extension: this quote's trip distance in metres (the same road distance for every type).",
				},
				duration: {
					type: "integer",
					minimum: 0,
					description:
						"Extension: this quote's trip duration in seconds (average speeds differ per type; the top-level `duration` is the first quote's).",
				},
			},
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
			required: [
				"orderId",
				"otp",
				"status",
				"serviceType",
				"pickup",
				"drop",
				"fare",
				"distance",
				"duration",
				"driver",
				"metadata",
				"createdAt",
				"updatedAt",
			],
			properties: {
				orderId: { type: "string", pattern: "^ord_" },
				otp: {
					type: "string",
					pattern: `^[0-9]{${OTP_DIGITS}}$`,
					description: `${OTP_DIGITS} digits from a cryptographic random source; the rider tells it to the driver, and the ride starts only with it.`,
				},
				status: ref("RideStatus"),
				serviceType: ref("ServiceType"),
				pickup: ref("Place"),
				drop: ref("Place"),
				fare: ref("Fare"),
				distance: { type: "integer", minimum: 0, description: "Metres." },
				duration: { type: "integer", minimum: 0, description: "Seconds." },
				driver: { ...nullable(ref("Driver")), description: "`null` until a driver accepts." },
				metadata: nullable(ref("Metadata")),
				pickupAt: { ...isoTime, description: "Only on rides booked with `pickupAt`: the pickup time (ISO-8601 UTC, whole seconds)." },
				createdAt: isoTime,
				updatedAt: isoTime,
				cancellationFee: { ...ref("CancellationFee"), description: "Once `customer_cancelled`: what the cancel cost." },
				finalFare: { ...ref("FinalFare"), description: "Once `dropped`: what the ride cost." },
				etaToPickupSeconds: ETA_TO_PICKUP,
			},
		},
		CancellationFee: {
			type: "object",
			description:
				`What a cancel costs under the cancellation policy. \`rule\`: \`searching\`, \`scheduled\` (free: no driver yet); \`grace_period\` (free: within ${DEFAULT_CANCEL_GRACE_SECONDS} s of the driver's acceptance by default); ` +
				`\`driver_far\` (free: the driver is more than ${DRIVER_NEAR_METRES} m from the pickup and its ETA above ${DRIVER_NEAR_ETA_SECONDS} s); \`driver_near\`, \`driver_arrived\` (the service type's fixed fee); ` +
				"`ride_started` (a plain cancel of a started ride: the fare booked).",
			required: ["amount", "currency", "rule"],
			properties: {
				amount: { type: "number", minimum: 0, description: "Major units of `currency`, at most 2 decimals.", example: 50 },
				currency: { type: "string", pattern: "^[A-Z]{3}$", example: "INR" },
				rule: { type: "string", enum: [...CANCELLATION_RULES] },
			},
		},
		FinalFare: {
			type: "object",
			description:
				`What a dropped ride cost: \`tripFare\` + \`waitingCharge\`. The quote holds when the driver drops within ${DROP_TOLERANCE_METRES} m of the booked drop, whatever the route (\`basis: quote\`); a ride ended elsewhere is metered on the distance driven with the booked terms, never above the quote (\`basis: metered\`). ` +
				"Waiting at the pickup beyond the service type's free minutes is charged per second.",
			required: [
				"totalAmount",
				"currency",
				"basis",
				"quotedAmount",
				"tripFare",
				"waitingCharge",
				"fareBreakdown",
				"distance",
				"duration",
				"waitingSeconds",
				"chargedWaitingSeconds",
			],
			properties: {
				totalAmount: { type: "number", minimum: 0, description: "Major units, at most 2 decimals.", example: 186 },
				currency: { type: "string", pattern: "^[A-Z]{3}$", example: "INR" },
				basis: { type: "string", enum: [...FINAL_FARE_BASES] },
				quotedAmount: { type: "number", minimum: 0, description: "The fare booked (`fare.totalAmount`)." },
				tripFare: { type: "number", minimum: 0, description: "The trip: the quote, or the metered fare." },
				waitingCharge: { type: "number", minimum: 0 },
				fareBreakdown: { ...ref("FareBreakdown"), description: "How `tripFare` was made (the quote's breakdown, or the metered one)." },
				distance: { type: "integer", minimum: 0, description: "Metres driven from `started` to `dropped`, measured from the driver's positions." },
				duration: { type: "integer", minimum: 0, description: "Seconds from `started` to `dropped`." },
				waitingSeconds: { type: "integer", minimum: 0, description: "Seconds from `arrived` to `started`." },
				chargedWaitingSeconds: { type: "integer", minimum: 0, description: "Of those, the seconds beyond the free waiting." },
			},
		},
		ActiveRideOrder: {
			description:
				"The rider already has an active ride: the existing Order plus `code`. Holds under concurrency: simultaneous create-order calls for one rider make exactly one ride. " +
				"Booking with `pickupAt`, the rider's waiting `scheduled` ride instead (one per rider besides the active one).",
			allOf: [ref("Order"), { type: "object", required: ["code"], properties: { code: { type: "string", const: "USER_HAVE_ACTIVE_RIDE" } } }],
		},
		CancelResult: {
			type: "object",
			required: ["code", "orderId", "status"],
			properties: {
				code: { type: "string", const: "RIDE_CANCELLED" },
				orderId: { type: "string" },
				status: { type: "string", const: "customer_cancelled" },
				cancellationFee: { ...ref("CancellationFee"), description: "What the cancel cost (on every cancel made under the policy)." },
			},
		},
		CancelPreview: {
			type: "object",
			description:
				"`preview: true`: what a cancel now would cost. Nothing changed; confirm with `confirmFee` = `cancellationFee.amount` and a `reasonCode`.",
			required: ["code", "orderId", "status", "cancellationFee"],
			properties: {
				code: { type: "string", const: "CANCEL_PREVIEW" },
				orderId: { type: "string" },
				status: { ...ref("RideStatus"), description: "The ride's status now (still active)." },
				cancellationFee: ref("CancellationFee"),
			},
		},
		CancelAnswer: {
			description: "`RIDE_CANCELLED` (a plain or confirmed cancel, now or before) or `CANCEL_PREVIEW` (`preview: true`).",
			oneOf: [ref("CancelResult"), ref("CancelPreview")],
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
			enum: [...RIDE_STATUSES, "location_updated"],
			description:
				"`location_updated` is a location event, not a ride state. `scheduled` and `searching` are sent only for rides booked with `pickupAt` (booked, and dispatch started); going back to `searching` after a driver drops out sends no event.",
		},
		WebhookEvent: {
			type: "object",
			description:
				"The body of every webhook. `sequence` increases by one per event of the order; status events arrive in order; the only gaps are superseded location events. " +
				"`driver` is present from `accepted` on; `location` on `location_updated` (and the latest one on status events); `eta` is seconds to the pickup before `arrived` and to the drop after `started`.",
			required: ["eventId", "orderId", "status", "sequence", "occurredAt", "mode", "metadata"],
			properties: {
				eventId: { type: "string", pattern: "^evt_", description: "Also the `webhook-id` header. De-duplicate on it: delivery is at least once." },
				orderId: { type: "string", pattern: "^ord_" },
				status: ref("WebhookStatus"),
				sequence: { type: "integer", minimum: 1 },
				occurredAt: isoTime,
				mode: {
					type: "string",
					enum: [...KEY_MODES],
					description:
						"The mode of the key that booked the ride (also the `Ride-Mode` header). Signed with that mode's secret only: refuse a body whose `mode` is not the one your endpoint serves.",
				},
				apiVersion: {
					type: "string",
					pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
					description:
						"The API version this body is rendered in: in a webhook, the partner's pinned version (also the `Ride-Version` header); in a `/ride/events` payload, the version the request was served in.",
				},
				driver: ref("Driver"),
				location: ref("DriverLocation"),
				eta: { type: "integer", minimum: 0 },
				pickupAt: { ...isoTime, description: "Only for rides booked with `pickupAt`: the pickup time." },
				etaToPickupSeconds: ETA_TO_PICKUP,
				cancellationFee: { ...ref("CancellationFee"), description: "On `customer_cancelled`: what the cancel cost." },
				finalFare: { ...ref("FinalFare"), description: "On `dropped`: what the ride cost." },
				metadata: nullable(ref("Metadata")),
			},
		},
		DeliveryState: {
			type: "object",
			required: ["state", "attempts", "lastStatus", "lastError"],
			properties: {
				state: {
					type: "string",
					enum: [...DELIVERY_STATES],
					description:
						`\`pending\`: not delivered yet (never tried, or waiting for its next retry). \`delivered\`: a 2xx arrived within ${seconds(WEBHOOK_TIMEOUT_MS)}. \`failed\`: the last retry failed; operators can replay it. ` +
						`Only \`location_updated\` events can also be \`superseded\` (a newer location of the ride replaced it before it went out) or \`expired\` (not delivered within ${seconds(LOCATION_TTL_MS)} of being made): both are final and never sent. ` +
						"The contract names only the first three; the other two are final states of location events that were never sent.",
				},
				attempts: { type: "integer", minimum: 0, description: "HTTP attempts made so far." },
				lastStatus: {
					type: ["integer", "null"],
					description: "HTTP status of the last attempt; `null` before any, or when it got no answer (timeout, connection error).",
				},
				lastError: {
					type: ["string", "null"],
					description: "Why the last attempt failed (e.g. `TIMEOUT`, `CONNECTION`, `HTTP_5XX`); `null` when it succeeded or before any.",
				},
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
			required: ["events", "nextCursor"],
			properties: {
				events: {
					type: "array",
					items: ref("RideEventRecord"),
					description: `In \`sequence\` order, at most \`limit\`, and at most ${EVENTS_PAGE_MAX_BYTES / 1024} KiB serialised (a page of large events ends early, with \`nextCursor\` after its last event).`,
				},
				nextCursor: { type: ["string", "null"], description: "Send as `cursor` for the next page; `null` when this page is the last." },
			},
		},
		ErrorDetail: {
			type: "object",
			required: ["field", "message"],
			properties: {
				field: {
					type: "string",
					description: "Path of the field in the body, e.g. `pickup.lat`, `user.phone`, `tags[0]`; a header name for header problems.",
					example: "pickup.lat",
				},
				message: { type: "string" },
			},
		},
		Error: {
			type: "object",
			description:
				"Every 4xx/5xx answer. `details` on validation problems, and on `409 CANCELLATION_FEE_CHANGED` (the new fee: `cancellationFee.amount`, `.currency`, `.rule`). Never a stack trace, SQL or internal names.",
			required: ["code", "message", "retryable"],
			properties: {
				code: { type: "string", enum: Object.values(ERROR_CODES_BY_STATUS).flat() },
				message: { type: "string", description: "For people; do not parse it." },
				details: { type: "array", items: ref("ErrorDetail") },
				retryable: {
					type: "boolean",
					description: "`true` when the same request may succeed later (429, 503, 409 IDEMPOTENCY_KEY_IN_USE, 409 CONFLICT).",
				},
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
