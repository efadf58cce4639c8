import { COMMON_DRIVER_ERRORS, DRIVER_BASE_PATH, DRIVER_ROUTES, type DriverRoute } from "../../../contracts/gateway";
import { DRIVER_LOCATION_BATCH_MAX, DRIVER_OFFERS_DEFAULT_WAIT_S, DRIVER_OFFERS_MAX_WAIT_S } from "../../../contracts/driver";
import type { ErrorCode } from "../../../contracts/errors";
import { errorResponses } from "./error-responses";
import { paramsToJsonSchema, type JsonSchema } from "./json-schema";
import { CONVERT } from "./requests";
import { ref } from "./responses";

/**
 * The driver API's part of the OpenAPI document (`/driver/*`, tag "Driver
 * API"), from the route table DRIVER_ROUTES and the params in
 * contracts/driver.ts; only the prose is written here.
 */

interface DriverOpDoc {
	summary: string;
	description: string;
	ok: string;
	schema: "DriverJob" | "DriverView";
}

const OPS: Record<string, DriverOpDoc> = {
	"/online": {
		summary: "Go online",
		description: "The driver starts taking rides at `location`. Online again only moves it.",
		ok: "The driver.",
		schema: "DriverView",
	},
	"/offline": {
		summary: "Go offline",
		description: "A pending offer is declined first; refused while on a ride (`409 DRIVER_NOT_AVAILABLE`).",
		ok: "The driver.",
		schema: "DriverView",
	},
	"/location": {
		summary: "Report locations (batched)",
		description: `1 to ${DRIVER_LOCATION_BATCH_MAX} fixes; the newest wins (the latest \`at\` when every fix has one, else the last in the batch). Send every few seconds while online (an available driver silent for 60 s goes offline until its next position): the partner's \`location_updated\` webhooks carry it. Recorded at once for matching, stored within about a second; a position implying more than 250 km/h since the last one is \`422 LOCATION_IMPLAUSIBLE\`.`,
		ok: "The driver at its newest position.",
		schema: "DriverView",
	},
	"/offers": {
		summary: "Wait for an offer (long-poll)",
		description: `Answers at once with the driver's pending offer or current ride; otherwise waits up to \`waitSeconds\` (default ${DRIVER_OFFERS_DEFAULT_WAIT_S}, at most ${DRIVER_OFFERS_MAX_WAIT_S}; a \`GET\` always waits the default) for an offer, then answers with what there is (\`offer\` and \`ride\` null when nothing came). Call again at once. One wait per driver: a newer one ends this one, which answers at once.`,
		ok: "The driver's job.",
		schema: "DriverJob",
	},
	"/accept": {
		summary: "Accept an offer",
		description: "Only an open offer of this driver. Expired, declined or taken back: `409 CONFLICT`.",
		ok: "The ride, `accepted`.",
		schema: "DriverJob",
	},
	"/decline": {
		summary: "Decline an offer",
		description: "The ride is offered to another driver, never to this one again.",
		ok: "The driver.",
		schema: "DriverView",
	},
	"/arrived": {
		summary: "At the pickup",
		description:
			"`accepted → arrived`, only within 300 m of the pickup by the driver's newest position (`409 NOT_AT_PICKUP` otherwise); `location`, when sent, is recorded first.",
		ok: "The ride, `arrived`.",
		schema: "DriverJob",
	},
	"/start": {
		summary: "Start the ride with the rider's OTP",
		description:
			"`arrived → started`, only with the OTP the rider tells the driver. Wrong: `422 INVALID_OTP` (counted); after too many tries `409 OTP_LOCKED` until an operator unlocks it.",
		ok: "The ride, `started`.",
		schema: "DriverJob",
	},
	"/drop": { summary: "At the drop", description: "`started → dropped`; the driver is available again.", ok: "The ride, `dropped`.", schema: "DriverJob" },
	"/cancel": {
		summary: "Give the ride up",
		description:
			"Before it started (`accepted`/`arrived`): the ride goes back to searching and another driver is offered it (the partner sees that driver's `accepted`).",
		ok: "The driver, free again.",
		schema: "DriverView",
	},
};

export function driverRequestSchemaName(route: DriverRoute): string {
	return `Driver${route.path.slice(1).replace(/^[a-z]/, (c) => c.toUpperCase())}Request`;
}

export function driverRequestSchemas(): Record<string, JsonSchema> {
	const out: Record<string, JsonSchema> = {};
	for (const route of DRIVER_ROUTES) out[driverRequestSchemaName(route)] = paramsToJsonSchema(route.params, CONVERT);
	return out;
}

const position: JsonSchema = {
	type: ["object", "null"],
	properties: { lat: { type: "number" }, lng: { type: "number" }, heading: { type: "number" } },
};
const point: JsonSchema = { type: "object", properties: { lat: { type: "number" }, lng: { type: "number" } } };

export function driverResponseSchemas(): Record<string, JsonSchema> {
	return {
		DriverView: {
			type: "object",
			description: "The driver as dispatch knows it.",
			properties: {
				driverId: { type: "string", example: "drv_…" },
				name: { type: "string" },
				phone: { type: "string" },
				vehicleNumber: { type: "string" },
				serviceType: ref("ServiceType"),
				status: { type: "string", enum: ["offline", "available", "offered", "on_trip"] },
				orderId: { type: ["string", "null"], description: "The ride offered or on." },
				location: position,
				locationAt: { type: ["string", "null"], format: "date-time" },
				simulated: { type: "boolean" },
				wrongOtpCount: { type: "integer" },
			},
		},
		DriverJob: {
			type: "object",
			description: "The driver and its current job: a pending offer or a ride (or neither).",
			properties: {
				driver: ref("DriverView"),
				offer: {
					type: ["object", "null"],
					properties: {
						orderId: { type: "string" },
						expiresAt: { type: "string", format: "date-time" },
						pickup: point,
						drop: point,
						distanceM: { type: "integer" },
						eta: { type: "integer" },
					},
				},
				ride: { type: ["object", "null"], properties: { orderId: { type: "string" }, status: { type: "string" }, pickup: point, drop: point } },
			},
		},
	};
}

export function driverPaths(): Record<string, Record<string, unknown>> {
	const paths: Record<string, Record<string, unknown>> = {};
	for (const route of DRIVER_ROUTES) {
		const op = OPS[route.path];
		if (!op) throw new Error(`OpenAPI: no description for /driver${route.path}`);
		const codes: ErrorCode[] = [...COMMON_DRIVER_ERRORS, ...route.errors];
		const operation: Record<string, unknown> = {
			operationId: `driver${route.method === "GET" ? "Get" : ""}${route.path.slice(1).replace(/^[a-z]/, (c) => c.toUpperCase())}`,
			tags: ["Driver API"],
			summary: op.summary,
			description: op.description,
			security: [{ driverToken: [] }],
			parameters: [{ $ref: "#/components/parameters/XRequestId" }],
			responses: {
				"200": {
					description: op.ok,
					headers: {
						"X-Request-Id": { $ref: "#/components/headers/XRequestId" },
						"Ride-Request-Id": { $ref: "#/components/headers/RideRequestId" },
					},
					content: { "application/json": { schema: ref(op.schema) } },
				},
				...errorResponses(codes),
			},
		};
		if (route.method === "POST")
			operation.requestBody = { required: false, content: { "application/json": { schema: ref(driverRequestSchemaName(route)) } } };
		const path = `${DRIVER_BASE_PATH}${route.path}`;
		paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation };
	}
	return paths;
}
