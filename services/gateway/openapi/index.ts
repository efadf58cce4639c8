import { ACTIVE_STATUSES, IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_TTL_MS } from "../../../contracts/orders";
import { endpointErrorCodes, RIDE_BASE_PATH, RIDE_ROUTES } from "../../../contracts/gateway";
import { LOCATION_TTL_MS, WEBHOOK_TIMEOUT_MS } from "../../../contracts/notifications";
import {
	DEFAULT_LOCATION_INTERVAL_MS,
	DEFAULT_QUOTE_TTL_SECONDS,
	DEFAULT_RATE_LIMIT_PER_MINUTE,
	REQUEST_ID_MAX_LENGTH,
	SERVICE_RETRY_AFTER_SECONDS,
	WEBHOOK_RETRY_JITTER,
} from "../../../contracts/constants";
import type { DocumentedLimits } from "../gateway.settings";
import { REQUEST_ID_PATTERN } from "../request";
import { errorResponses } from "./error-responses";
import { requestSchemaName, requestSchemas } from "./requests";
import { codeList, hours, retrySchedule, seconds } from "./format";
import { ref, responseSchemas } from "./responses";
import { driverPaths, driverRequestSchemas, driverResponseSchemas } from "./driver-paths";
import { API_VERSION_HEADER, API_VERSIONS } from "../../../contracts/versions";
import { knownVersions } from "../../../lib/api-versions";

export { ERROR_CODES_BY_STATUS } from "./error-responses";

/** The known versions as the documents list them: `2026-12-01`, … */
function versionList(): string {
	return knownVersions(API_VERSIONS)
		.map((v) => `\`${v}\``)
		.join(", ");
}

/**
 * The OpenAPI 3.1 document of the partner API, built from contracts/ (the
 * route table, the actions' params, the error table, the contract numbers)
 * and the gateway's own settings (limits). Served at `GET /openapi.json`,
 * rendered to HTML at `GET /docs`, committed as docs/openapi.json
 * (scripts/generate-openapi.ts). Where the contract is silent, the choice
 * made is written into the descriptions.
 */

export interface OpenApiDocument {
	openapi: string;
	info: Record<string, unknown>;
	paths: Record<string, Record<string, unknown>>;
	components: Record<string, Record<string, unknown>>;
	webhooks: Record<string, unknown>;
	[key: string]: unknown;
}

/** A route's prose: summary, description and its success answers as [status, description, schema]. */
interface RouteDoc {
	summary: string;
	description: string;
	ok: Array<[status: string, description: string, schema: string]>;
	idempotency?: boolean;
	callbacks?: boolean;
}

function rideOperations(): Record<string, Record<string, unknown>> {
	const ops: Record<string, RouteDoc> = {
		"/fare-estimate": {
			summary: "Estimate the fare",
			description: `Quotes for a trip: one per service type (\`scooty\` first, then \`cab\`), or exactly the one asked for. Writes nothing; a quote is valid for ${DEFAULT_QUOTE_TTL_SECONDS / 60} minutes by default (\`QUOTE_TTL_SECONDS\`). Pricing is per service type (base, per km, per minute, minimum fare, tax); surge may apply.`,
			ok: [["200", "The quotes.", "FareEstimate"]],
		},
		"/create-order": {
			summary: "Book a ride",
			description:
				"Creates or updates the rider (partner, phone) and books a ride. With a valid `quoteId` the quoted fare is honoured. " +
				"`201` with the new Order, or `200` with the rider's existing active Order plus `code: USER_HAVE_ACTIVE_RIDE`. " +
				`Send an \`Idempotency-Key\` to retry safely: the same key and body within ${hours(IDEMPOTENCY_TTL_MS)} return the first response again (status included).`,
			idempotency: true,
			callbacks: true,
			ok: [
				["201", "The new Order.", "Order"],
				["200", "The rider already has an active ride: that Order, with `code: USER_HAVE_ACTIVE_RIDE`.", "ActiveRideOrder"],
			],
		},
		"/cancel": {
			summary: "Cancel a ride",
			description:
				`Allowed while the ride is active (${codeList(ACTIVE_STATUSES)}) or \`scheduled\` (free); sends the \`customer_cancelled\` webhook once. Cancelling a \`customer_cancelled\` ride again answers \`200 RIDE_CANCELLED\` and sends nothing (safe retries). ` +
				"The cancellation policy sets the fee (`cancellationFee`): `preview: true` answers `CANCEL_PREVIEW` with the fee and changes nothing; a confirmed cancel sends `confirmFee` (the fee accepted) and a `reasonCode`, and cancels only while the fee is at most `confirmFee` (else `409 CANCELLATION_FEE_CHANGED` with the new fee). " +
				"A preview or a confirmed cancel of a `started` ride is `409 RIDE_NOT_CANCELLABLE`; a plain cancel (neither field) of a started ride still ends it and is charged the fare booked.",
			ok: [["200", "Cancelled (now or before), or the preview.", "CancelAnswer"]],
		},
		"/feedback": {
			summary: "Rate a finished ride",
			description: "Only for a `dropped` ride, once per ride.",
			ok: [["200", "Feedback stored.", "FeedbackResult"]],
		},
		"/status": {
			summary: "Current state of a ride (extension)",
			description:
				"The current Order, with `driver` and its last known `location` once assigned. The polling fallback for partners that missed a webhook.",
			ok: [["200", "The Order.", "Order"]],
		},
		"/events": {
			summary: "Webhook events of a ride (extension)",
			description:
				"The ride's webhook events in `sequence` order, each with its delivery state (`pending`, `delivered`, `failed`), attempt count, last HTTP status and last error, a page at a time: up to `limit` (default 100, at most 1000) events, then `nextCursor` to send as `cursor` for the next page (`null` at the end). Without `cursor`, the first page.",
			ok: [["200", "The events.", "RideEvents"]],
		},
		"/sandbox/advance": {
			summary: "Move a manual sandbox ride (test keys)",
			description:
				'A test ride booked with `"metadata": { "sandbox": "manual" }` waits until this moves it: one step, or every step up to `to`. Each step is taken by the simulated driver through the same paths as an automatic sandbox ride, so it writes exactly the webhooks a real ride writes (`accepted`; a `location_updated` on the way, then `arrived`; `started`; a `location_updated` on the way, then `dropped`; `no_driver_found`; a driver drop-out writes none and the ride searches again). A manual ride booked with `pickupAt` is `scheduled`: its first step starts its dispatch now, as the schedule does at its dispatch time (`searching`, with the `searching` webhook); while its rider has another active ride that is `409 RIDER_HAS_ACTIVE_RIDE` and it keeps waiting. Answers the ride as `/ride/status` does, after the steps. One advance per ride at a time: a second one meanwhile is `409 CONFLICT`. Live keys: `403 SANDBOX_ONLY`; a deployment without the simulated fleet: `409 SANDBOX_UNAVAILABLE`.',
			ok: [["200", "The ride after the steps (the Order, as `/ride/status` answers it).", "Order"]],
		},
	};
	const paths: Record<string, Record<string, unknown>> = {};
	for (const route of RIDE_ROUTES) {
		const op = ops[route.path];
		if (!op) throw new Error(`OpenAPI: no description for ${route.path}`);
		const parameters: unknown[] = [{ $ref: "#/components/parameters/RideVersion" }, { $ref: "#/components/parameters/XRequestId" }];
		if (op.idempotency) parameters.unshift({ $ref: "#/components/parameters/IdempotencyKey" });
		const operation: Record<string, unknown> = {
			operationId: route.path.slice(1).replace(/[-/]([a-z])/g, (_m, c: string) => c.toUpperCase()),
			tags: ["Rides"],
			summary: op.summary,
			description: op.description,
			security: [{ bearerAuth: [] }],
			parameters,
			requestBody: { required: true, content: { "application/json": { schema: ref(requestSchemaName(route)) } } },
			responses: {
				...Object.fromEntries(op.ok.map(([status, text, schema]) => [status, okResponse(text, schema)])),
				...errorResponses(endpointErrorCodes(route), true),
			},
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
			"Ride-Request-Id": { $ref: "#/components/headers/RideRequestId" },
			"X-RateLimit-Limit": { $ref: "#/components/headers/RateLimitLimit" },
			"X-RateLimit-Remaining": { $ref: "#/components/headers/RateLimitRemaining" },
			[API_VERSION_HEADER]: { $ref: "#/components/headers/RideVersion" },
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
		"/health/live": plain("Liveness", "200 while the process is up.", { "200": health('Alive: `{ "status": "live" }`.') }),
		"/health/ready": plain(
			"Readiness",
			"200 only when this gateway is not draining and every service it needs (partners, pricing, riders, orders) is registered and answers a database check. 503 otherwise (with `Retry-After`), and from the moment a graceful shutdown starts.",
			{ "200": health("Ready."), "503": health("Not ready (`not_ready`) or shutting down (`draining`); `checks` says which service failed.") },
		),
		"/openapi.json": plain("This document", "The OpenAPI 3.1 document of the API.", {
			"200": { description: "OpenAPI document.", content: { "application/json": { schema: { type: "object" } } } },
		}),
		"/docs": plain("API reference page", "This document rendered as one self-contained HTML page.", {
			"200": { description: "HTML.", content: { "text/html": { schema: { type: "string" } } } },
		}),
	};
}

function describeApi(config: DocumentedLimits): string {
	const kb = config.bodyLimitBytes % 1024 === 0 ? `${config.bodyLimitBytes / 1024} KB` : `${config.bodyLimitBytes} bytes`;
	const rate =
		config.rateLimitPerMinute > 0
			? `${config.rateLimitPerMinute} requests per minute per partner and mode (test and live keys counted apart) with bursts of up to ${config.rateLimitBurst} (\`RATE_LIMIT_PER_MINUTE\`, \`RATE_LIMIT_BURST\`; defaults ${DEFAULT_RATE_LIMIT_PER_MINUTE} and the per-minute value)`
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
		`- \`X-Request-Id\`: send one (1–${REQUEST_ID_MAX_LENGTH} of \`A-Z a-z 0-9 . _ : -\`) or get a generated one; it is echoed on every response, success or error, and appears in our logs beside ours.`,
		"- `Ride-Request-Id`: our own id of the request (a UUID, new for every request, whatever you sent), on every response: quote it when you contact us.",
		"- Unknown routes, and any method but `POST` on a `/ride` route, answer `404 NOT_FOUND` (before authentication).",
		"## Rate limits",
		`- ${rate}, as a token bucket. Every authenticated \`/ride/*\` request counts, whatever its outcome. Over the limit: \`429 RATE_LIMITED\` with \`Retry-After\` (seconds).`,
		"- `X-RateLimit-Limit` (requests per minute) and `X-RateLimit-Remaining` (requests you may make right now) are sent on every authenticated `/ride/*` answer.",
		"- Deployments that share the limits through Redis (`REDIS_URL`) count every gateway together, as a window of the burst size; without it each gateway instance counts in its own memory (behind N replicas a partner can reach up to N times the rate, and a restart refills the bucket).",
		"- Unknown API keys are counted per client address: after too many within a minute (`AUTH_FAILURE_LIMIT_PER_MINUTE`) that address gets `429 RATE_LIMITED` with `Retry-After` instead of `401` until the minute is over. A key that has authenticated is never held back.",
		"## Errors",
		"- Every 4xx/5xx answer is `{ code, message, details?, retryable }`. Switch on `code`, not on `message`. `retryable: true` marks answers where the same request may succeed later (`429`, `503`, `409 IDEMPOTENCY_KEY_IN_USE`, `409 CONFLICT`).",
		`- \`503 SERVICE_UNAVAILABLE\` when a service behind the gateway is down or does not answer in time (\`Retry-After: ${config.unavailableRetryAfterSeconds}\`), or is starting (\`Retry-After: ${SERVICE_RETRY_AFTER_SECONDS}\`). For create-order such an answer is ambiguous: retry with the same \`Idempotency-Key\`.`,
		`- \`409 CONFLICT\` and \`409 IDEMPOTENCY_KEY_IN_USE\` come with \`Retry-After: ${SERVICE_RETRY_AFTER_SECONDS}\`.`,
		"- `USER_HAVE_ACTIVE_RIDE`, `RIDE_CANCELLED` and `FEEDBACK_SUBMITTED` are success answers (HTTP 200), not errors.",
		"## Versions",
		`- The API has dated versions (today: ${versionList()}). Send \`${API_VERSION_HEADER}: <version>\` to pick one per request; without it your partner account's pinned version serves the request. Every authenticated \`/ride/*\` answer carries \`${API_VERSION_HEADER}\`: the version that served it (all but \`UNKNOWN_API_VERSION\`). An unknown version → \`400 UNKNOWN_API_VERSION\` with the known ones in \`details\`, and nothing is done.`,
		"- A partner is pinned to the newest version when its first key is made; operators move the pin on request. Webhooks are rendered in the pinned version (the body's `apiVersion` and the `Ride-Version` header say which); `/ride/events` payloads in the request's version.",
		"- Additive changes (new endpoints, optional request fields, answer and webhook fields, error codes, headers, enum values of `status` for new opt-in features) ship in every version: ignore what you do not know. Anything else (a renamed, removed or retyped field, a new required field, a changed meaning) ships only in a new dated version.",
		"## Webhooks",
		"- Ride events are POSTed to the ride's `webhookURL` (see `webhooks` / the create-order callback): signed with Standard Webhooks headers `webhook-id` (= `eventId`), `webhook-timestamp` (unix seconds), `webhook-signature` (`v1,` + base64 HMAC-SHA256 over `id.timestamp.body` with your `whsec_` secret of the ride's mode), and `Ride-Mode` (`test` or `live`, as the body's `mode`). Each mode has its own secret: a test ride's webhook never verifies with the live secret.",
		`- Answer any 2xx within ${seconds(WEBHOOK_TIMEOUT_MS)}. Anything else (3xx included, redirects are never followed) is retried with up to ${WEBHOOK_RETRY_JITTER * 100}% jitter ${retrySchedule()} after the first try; \`Retry-After\` on 429/503 is honoured. After the last try the event is \`failed\` (see \`/ride/events\`) and no longer holds back later events.`,
		`- Delivery is at least once: de-duplicate on \`eventId\`. Status events of an order arrive in \`sequence\` order, and a \`location_updated\` never arrives after a later status event of the same ride. A \`location_updated\` event is only worth its newest value: a pending one is superseded by a newer one and dropped ${seconds(LOCATION_TTL_MS)} after it was made. While a ride is moving one goes out every ${seconds(DEFAULT_LOCATION_INTERVAL_MS)} (default).`,
	].join("\n");
}

export function buildOpenApiDocument(config: DocumentedLimits): OpenApiDocument {
	const webhookPathItem = {
		post: {
			summary: "Ride event",
			description: "Sent to the ride's `webhookURL` for every status change and, while the ride moves, for location updates.",
			parameters: [
				{
					name: "webhook-id",
					in: "header",
					required: true,
					schema: { type: "string", pattern: "^evt_" },
					description: "The `eventId`; the same on every attempt.",
				},
				{
					name: "webhook-timestamp",
					in: "header",
					required: true,
					schema: { type: "string", pattern: "^[0-9]+$" },
					description: "Unix seconds of this attempt.",
				},
				{
					name: "webhook-signature",
					in: "header",
					required: true,
					schema: { type: "string" },
					description:
						"`v1,` + base64 HMAC-SHA256 over `webhook-id.webhook-timestamp.body` keyed with the partner's `whsec_` secret of the ride's mode (base64 part decoded).",
				},
				{
					name: "Ride-Mode",
					in: "header",
					required: true,
					schema: { type: "string", enum: ["test", "live"] },
					description: "The ride's mode, as the body's `mode`: pick the secret to verify with by it (the header itself is not signed, the body is).",
				},
				{
					name: API_VERSION_HEADER,
					in: "header",
					required: true,
					schema: { type: "string", pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" },
					description: "The API version the body is rendered in: the partner's pinned version when the try was made, as the body's `apiVersion`.",
				},
			],
			requestBody: { required: true, content: { "application/json": { schema: ref("WebhookEvent") } } },
			responses: {
				"200": { description: `Delivered (any 2xx within ${seconds(WEBHOOK_TIMEOUT_MS)} counts).` },
				"201": { description: "Delivered." },
				default: {
					description: `Anything else, or no answer within ${seconds(WEBHOOK_TIMEOUT_MS)}: retried on the schedule; \`Retry-After\` on 429/503 is honoured.`,
				},
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
			{
				name: "Driver API",
				description:
					"For driver apps: `Authorization: Bearer <driver token>` (created by operators with `npm run driver -- create`). The driver is the token's; a body never names one. Same envelope, validation and rate limits as the partner API.",
			},
		],
		security: [{ bearerAuth: [] }],
		paths: { ...rideOperations(), ...driverPaths(), ...opsPaths() },
		webhooks: { rideEvent: { $ref: "#/components/pathItems/RideEventWebhook" } },
		components: {
			schemas: { ...requestSchemas(), ...responseSchemas(), ...driverRequestSchemas(), ...driverResponseSchemas() },
			securitySchemes: {
				bearerAuth: { type: "http", scheme: "bearer", description: "`Authorization: Bearer <apiKey>`; one key per partner, created by operators." },
				driverToken: {
					type: "http",
					scheme: "bearer",
					description: "`Authorization: Bearer <driver token>` (`rdt_…`); one or more per driver, created and revoked by operators.",
				},
			},
			parameters: {
				IdempotencyKey: {
					name: "Idempotency-Key",
					in: "header",
					required: false,
					schema: { type: "string", minLength: 1, maxLength: IDEMPOTENCY_KEY_MAX_LENGTH },
					description: `Scoped to the partner. A repeat with the same key and body within ${hours(IDEMPOTENCY_TTL_MS)} returns the first response again; the same key with a different body → \`422 IDEMPOTENCY_KEY_REUSED\`; a repeat while the first is still running → \`409 IDEMPOTENCY_KEY_IN_USE\`. Visible ASCII only; an empty or longer key → \`400 VALIDATION_ERROR\`.`,
				},
				RideVersion: {
					name: API_VERSION_HEADER,
					in: "header",
					required: false,
					schema: { type: "string", enum: knownVersions(API_VERSIONS) },
					description: `The API version to serve this request in (${versionList()}); without it, the partner's pinned version. Unknown → \`400 UNKNOWN_API_VERSION\` (the known ones in \`details\`), nothing done.`,
				},
				XRequestId: {
					name: "X-Request-Id",
					in: "header",
					required: false,
					schema: { type: "string", pattern: REQUEST_ID_PATTERN.source },
					description:
						"Your correlation id; echoed in the response's `X-Request-Id` and logged beside ours (`Ride-Request-Id`). Anything else is ignored and the response's `X-Request-Id` carries our id.",
				},
			},
			headers: {
				XRequestId: { description: "Your X-Request-Id when you sent a usable one, else our id of the request.", schema: { type: "string" } },
				RideRequestId: {
					description: "Our id of the request (a UUID, new for every request): quote it when you contact us.",
					schema: { type: "string", format: "uuid" },
				},
				RateLimitLimit: { description: "Sustained requests per minute allowed to this partner on this gateway instance.", schema: { type: "integer" } },
				RateLimitRemaining: { description: "Requests this partner may make right now before being limited.", schema: { type: "integer" } },
				RideVersion: {
					description: "The API version the answer was served in: the request's `Ride-Version`, else the partner's pinned version.",
					schema: { type: "string", pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" },
				},
				RetryAfter: { description: "Seconds to wait before retrying.", schema: { type: "integer", minimum: 1 } },
				WwwAuthenticate: { description: '`Bearer realm="ride-api"`.', schema: { type: "string" } },
			},
			pathItems: { RideEventWebhook: webhookPathItem },
		},
	};
}
