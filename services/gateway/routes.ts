/**
 * The partner route table of the gateway: every public endpoint, the action
 * it calls and nothing else (`mappingPolicy: "restrict"`). The OpenAPI
 * document and the tests read the same table, so they cannot drift apart.
 */
export interface RideRoute {
	/** Path below `/ride`. */
	path: string;
	method: "POST";
	action: string;
}

export const RIDE_BASE_PATH = "/ride";

export const RIDE_ROUTES: readonly RideRoute[] = [
	{ path: "/fare-estimate", method: "POST", action: "pricing.estimate" },
	{ path: "/create-order", method: "POST", action: "orders.create" },
	{ path: "/cancel", method: "POST", action: "orders.cancel" },
	{ path: "/feedback", method: "POST", action: "orders.feedback" },
	{ path: "/status", method: "POST", action: "orders.status" },
	{ path: "/events", method: "POST", action: "orders.events" },
];

/** moleculer-web alias map of the `/ride` route: `"POST /cancel": "orders.cancel"`. */
export function rideAliases(): Record<string, string> {
	const aliases: Record<string, string> = {};
	for (const r of RIDE_ROUTES) aliases[`${r.method} ${r.path}`] = r.action;
	return aliases;
}

/** Services that must be registered and answering before this gateway is ready. */
export const REQUIRED_SERVICES = ["partners", "pricing", "riders", "orders"] as const;
