import { DEFAULT_QUOTE_TTL_SECONDS } from "../../../contracts/constants";
import { locationRule, placeRule, pointRule, SERVICE_TYPES, serviceTypeRule } from "../../../contracts/common";
import { RIDE_ROUTES, type RideRoute } from "../../../contracts/gateway";
import { createOrderParams, METADATA_MAX_BYTES } from "../../../contracts/orders";
import { paramsToJsonSchema, ruleToJsonSchema, type ConvertOptions, type JsonSchema } from "./json-schema";

/**
 * The request side of the OpenAPI document, generated from the params in
 * contracts/ (the same objects the actions validate with). Only prose and
 * examples are written here, laid over the generated constraints by
 * `withProse`, which cannot add or change a constraint.
 */

/** Descriptions and examples for a schema and, by name, its properties. */
export interface Prose {
	description?: string;
	example?: unknown;
	properties?: Record<string, Prose>;
}

export function withProse(schema: JsonSchema, prose: Prose): JsonSchema {
	const out: JsonSchema = { ...schema };
	if (prose.description !== undefined) out.description = prose.description;
	if (prose.example !== undefined) out.example = prose.example;
	if (prose.properties) {
		const props = { ...(schema.properties as Record<string, JsonSchema> | undefined) };
		for (const [name, p] of Object.entries(prose.properties)) {
			if (!props[name]) throw new Error(`OpenAPI prose for unknown property ${name}`);
			props[name] = withProse(props[name], p);
		}
		out.properties = props;
	}
	return out;
}

/** Rules shown once as components and referenced wherever the params use them. */
export const NAMED_RULES = {
	Point: pointRule,
	Place: placeRule,
	ServiceType: serviceTypeRule,
	DriverLocation: locationRule,
	User: createOrderParams.user,
	Metadata: createOrderParams.metadata,
} as const;

export const CONVERT: ConvertOptions = { refs: NAMED_RULES };

const latLng = { lat: { example: 12.9716 }, lng: { example: 77.5946 } };

const sandbox =
	"Sandbox directives (only when the server runs the simulated fleet, `FLEET_MODE=simulated`; test keys only: on a live key `metadata.sandbox` is refused with `400 VALIDATION_ERROR`; ignored when the server runs no simulated fleet (`FLEET_MODE=live`) and when unknown): " +
	'`{ "sandbox": { "scenario": "no_driver_found" } }` ends the ride as `no_driver_found`; ' +
	'`"driver_drop_out"` makes the first driver drop out before the start, so the ride is dispatched again and a second `accepted` names the new driver; ' +
	'`"fast"` makes every step of the ride immediate; ' +
	'`"manual"` makes the ride wait until you move it with `POST /ride/sandbox/advance`. `"sandbox": "<scenario>"` is accepted too.';

/** The components generated from NAMED_RULES, each with its prose. */
function namedSchemas(): Record<string, JsonSchema> {
	const prose: Record<keyof typeof NAMED_RULES, Prose> = {
		Point: { description: "A position (WGS 84).", properties: latLng },
		Place: { description: "A `Point` plus an optional human address.", properties: { ...latLng, address: { example: "MG Road" } } },
		ServiceType: { description: `Exactly ${SERVICE_TYPES.map((t) => `\`${t}\``).join(" or ")}.` },
		DriverLocation: { properties: { heading: { description: "Degrees clockwise from north, when known." } } },
		User: {
			description: "The rider. Identified by (partner, phone): created or updated on every create-order.",
			properties: {
				name: { example: "Asha Rao", description: "Leading and trailing spaces are removed." },
				phone: { description: "E.164.", example: "+919812345678" },
				email: { example: "asha@example.com" },
			},
		},
		Metadata: {
			description:
				`Any JSON object of the partner's, at most ${METADATA_MAX_BYTES / 1024} KB serialised (\`${METADATA_MAX_BYTES}\` bytes); echoed back in every order response and every webhook (\`null\` when none was given).\n\n` +
				sandbox,
			example: { partnerRef: "booking-8812" },
		},
	};
	const out: Record<string, JsonSchema> = {};
	for (const [name, rule] of Object.entries(NAMED_RULES)) {
		// A component is the rule itself, not a reference to itself.
		out[name] = withProse(ruleToJsonSchema(rule, { refs: { ...NAMED_RULES, [name]: undefined } }), prose[name as keyof typeof NAMED_RULES]);
	}
	return out;
}

/** The request body schema of each route, by component name. */
const REQUESTS: Record<string, { name: string; prose: Prose }> = {
	"/fare-estimate": {
		name: "FareEstimateRequest",
		prose: {
			description: "Pickup equal to drop, or a trip longer than the configured maximum, is `400 VALIDATION_ERROR`.",
			properties: {
				serviceType: { description: "Only this type; without it one quote per type, `scooty` first, then `cab`." },
				pickupAt: {
					description:
						"Optional: quotes for a scheduled ride picked up then (same format and window as create-order's `pickupAt`, else `400 PICKUP_TIME_OUT_OF_RANGE`). Priced at the tariff without surge (today's demand says nothing about then), `eta` is `null`; the quote books only that pickup time.",
					example: "2026-12-24T18:30:00+05:30",
				},
			},
		},
	},
	"/create-order": {
		name: "CreateOrderRequest",
		prose: {
			properties: {
				webhookURL: {
					description:
						"Absolute `http`/`https` URL, stored on the ride; every webhook of the ride goes there. Anything else, or in production a URL resolving to a private, loopback, link-local or metadata address, is refused (`400 INVALID_WEBHOOK_URL`); dev/test may allow loopback (`WEBHOOK_ALLOW_PRIVATE`). The port (explicit, or 80/443 by scheme) must be one of the deployment's webhook ports (in production 80, 443 and 8443 unless the operator set `WEBHOOK_PORTS`); another port → `400 INVALID_WEBHOOK_URL`.",
					example: "https://partner.example.com/hooks/rides",
				},
				quoteId: {
					description: `Optional. When valid, the quoted fare is honoured (quotes last ${DEFAULT_QUOTE_TTL_SECONDS / 60} minutes by default). Unknown, foreign or mismatched → \`422 QUOTE_INVALID\`; expired → \`422 QUOTE_EXPIRED\`. Without it the current price applies. A quote made with \`pickupAt\` books only that pickup time, one without only a ride now (else \`422 QUOTE_INVALID\`, field \`pickupAt\`).`,
				},
				pickupAt: {
					description:
						'Optional: book a scheduled ride picked up then. ISO 8601 with seconds and an offset (`Z` or `±hh:mm`), from 30 minutes to 7 days ahead by default (`SCHEDULE_MIN_LEAD_SECONDS`, `SCHEDULE_MAX_AHEAD_SECONDS`); outside → `400 PICKUP_TIME_OUT_OF_RANGE`, badly written → `400 VALIDATION_ERROR`, nothing booked. Answers `201` with status `scheduled`; dispatch starts 15 minutes before the pickup time by default (`SCHEDULE_DISPATCH_LEAD_SECONDS`). See API.md, "Scheduled rides".',
					example: "2026-12-24T18:30:00+05:30",
				},
			},
		},
	},
	"/cancel": {
		name: "CancelRequest",
		prose: {
			properties: {
				reason: { description: "Free text, stored with the ride." },
				preview: {
					description:
						"`true`: a dry run. The answer is `CANCEL_PREVIEW` with the fee a cancel now would cost; nothing changes. Not with `confirmFee`.",
				},
				confirmFee: {
					description:
						"The fee (major units, at most 2 decimals) the rider accepted, usually the preview's `cancellationFee.amount`: the ride is cancelled only while its fee is at most this, else `409 CANCELLATION_FEE_CHANGED`. Needs `reasonCode`.",
				},
				reasonCode: { description: "Why the rider cancels; required with `confirmFee`, optional otherwise." },
			},
		},
	},
	"/feedback": { name: "FeedbackRequest", prose: {} },
	"/status": { name: "StatusRequest", prose: { properties: { orderId: { example: "ord_8x2k…" } } } },
	"/sandbox/advance": {
		name: "SandboxAdvanceRequest",
		prose: {
			properties: {
				orderId: { description: 'A ride booked with a test key and `"metadata": { "sandbox": "manual" }`.', example: "ord_8x2k…" },
				to: {
					description:
						"Optional. Without it the ride moves one step (`scheduled` → `searching` → `accepted` → `arrived` → `started` → `dropped`; from `scheduled` the step starts its dispatch now). A status walks every step up to it, each with its webhooks (from `scheduled`, the dispatch start first); `no_driver_found` ends a searching ride; `driver_drop_out` has the driver give the ride up before the start (a searching ride is accepted first), so it searches again. Anything else → `400 VALIDATION_ERROR`.",
				},
			},
		},
	},
	"/events": {
		name: "EventsRequest",
		prose: {
			properties: {
				orderId: { example: "ord_8x2k…" },
				cursor: { description: "The previous page's `nextCursor`; absent = the first page. Anything else → `400 VALIDATION_ERROR`." },
				limit: { description: "Events per page (default 100)." },
			},
		},
	},
};

/** Component name of a route's request body. */
export function requestSchemaName(route: RideRoute): string {
	const r = REQUESTS[route.path];
	if (!r) throw new Error(`OpenAPI: no request body for ${route.path}`);
	return r.name;
}

/** A route's request body as documented: its params converted, with prose. */
export function requestBodySchema(route: RideRoute, params: Record<string, unknown> = route.params): JsonSchema {
	return withProse(paramsToJsonSchema(params, CONVERT), REQUESTS[route.path]?.prose ?? {});
}

/** Every generated component: the named rules and one request body per route. */
export function requestSchemas(): Record<string, JsonSchema> {
	const out = namedSchemas();
	for (const route of RIDE_ROUTES) out[requestSchemaName(route)] = requestBodySchema(route);
	return out;
}
