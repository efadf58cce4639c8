import type { ServiceBroker, ServiceSchema } from "moleculer";
import ApiGateway from "moleculer-web";

/**
 * The floors' gateway: a bare moleculer-web service with one route under
 * `/ride` (moleculer-web's own JSON body parser, no request logs, only the
 * given aliases). `route` and `schema` add to the route and the service
 * (bench/servers/ladder-web.ts needs access rules and a partner).
 */
export function bareApiService(aliases: Record<string, string>, route: Record<string, unknown> = {}, schema: Partial<ServiceSchema> = {}): ServiceSchema {
	return {
		name: "api",
		mixins: [ApiGateway as unknown as ServiceSchema],
		...schema,
		settings: {
			port: Number(process.env.PORT || 0),
			ip: "127.0.0.1",
			logRequest: null,
			logResponse: null,
			routes: [{ path: "/ride", bodyParsers: { json: true }, mappingPolicy: "restrict", aliases, ...route }],
		},
	} as ServiceSchema;
}

const point = { type: "object", strict: "remove", props: { lat: { type: "number", min: -90, max: 90 }, lng: { type: "number", min: -180, max: 180 } } };

/** The floors' fastest-validator schema of a fare-estimate body, like pricing's (pickup, drop, optional serviceType). */
export const FLOOR_ESTIMATE_PARAMS = { pickup: point, drop: point, serviceType: { type: "enum", values: ["scooty", "cab"], optional: true } };

/** The port a started broker's HTTP service (`name`) listens on. */
export function listeningPort(broker: ServiceBroker, name = "api"): number {
	return (broker.getLocalService(name) as unknown as { server: { address(): { port: number } } }).server.address().port;
}
