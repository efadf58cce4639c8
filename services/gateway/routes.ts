import { RIDE_ROUTES } from "../../contracts/gateway";

/**
 * The gateway's alias table, from the route table in contracts/gateway.ts:
 * every public endpoint and nothing else (`mappingPolicy: "restrict"`).
 */
/** moleculer-web alias map of the `/ride` route: `"POST /cancel": "orders.cancel"`. */
export function rideAliases(): Record<string, string> {
	const aliases: Record<string, string> = {};
	for (const r of RIDE_ROUTES) aliases[`${r.method} ${r.path}`] = r.action;
	return aliases;
}

/** Services that must be registered and answering before this gateway is ready. */
export const REQUIRED_SERVICES = ["partners", "pricing", "riders", "orders"] as const;
