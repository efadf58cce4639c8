import type { Middleware, ActionSchema, ActionHandler, Context } from "moleculer";
import { ApiError } from "../lib/errors";

/**
 * Access rules are declared per action and enforced here, in one place
 * (kantab style):
 *
 *   access: "partner"  – needs `ctx.meta.partnerId` (set by the gateway after
 *                        API-key authentication, or by a developer in the REPL
 *                        with `--#partnerId ptn_…`); every query is scoped to it.
 *   access: "driver"   – needs `ctx.meta.driverId` (set by the gateway's `/driver`
 *                        route after driver-token authentication); the action
 *                        takes the driver only from there, never from params.
 *   access: "internal" – service-to-service and operator actions (REPL);
 *                        never mapped on the public gateway.
 *
 * An action without a rule is refused at start-up, so nothing is open by
 * accident.
 */
export type AccessRule = "partner" | "driver" | "internal";

// Declares `access` on every action schema (moleculer's types live in an
// `export =` namespace, reachable for augmentation only by file path).
declare module "../node_modules/moleculer/src/service" {
	// eslint-disable-next-line @typescript-eslint/no-unused-vars
	interface ActionSchema<TThis> {
		/** Who may call this action; enforced by AccessMiddleware. */
		access?: AccessRule;
	}
}

export interface PartnerMeta {
	partnerId?: string;
	requestId?: string;
}


export const AccessMiddleware: Middleware = {
	name: "Access",
	localAction(next: ActionHandler, action: ActionSchema): ActionHandler {
		const rule = (action as ActionSchema & { access?: AccessRule }).access;
		const name = String(action.name ?? "");
		// Moleculer's own internal actions ($node.*) have no rule and need none.
		if (name.startsWith("$")) return next;
		if (rule === undefined) {
			throw new Error(`Action "${name}" declares no access rule`);
		}
		if (rule === "internal") return next;
		if (rule === "driver") {
			return function checkDriver(this: unknown, ctx: Context) {
				const driverId = (ctx.meta as { driverId?: unknown }).driverId;
				if (typeof driverId !== "string" || !/^drv_[a-z0-9]{1,64}$/.test(driverId)) {
					return Promise.reject(new ApiError(401, "UNAUTHORIZED", "Missing or invalid driver token"));
				}
				return next.call(this as never, ctx);
			};
		}
		return function checkPartner(this: unknown, ctx: Context) {
			const meta = ctx.meta as PartnerMeta;
			if (typeof meta.partnerId !== "string" || meta.partnerId.length === 0) {
				return Promise.reject(new ApiError(401, "UNAUTHORIZED", "Missing or invalid API key"));
			}
			return next.call(this as never, ctx);
		};
	},
};
