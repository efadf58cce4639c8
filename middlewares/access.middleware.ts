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
 * accident. The rule also sets the action's Moleculer `visibility`, so a
 * schema says `access` only (see VISIBILITY_OF): partner and driver actions
 * are "published" (the gateway may map them), internal ones "public"
 * (callable from every node, never published on the gateway). A schema may
 * still narrow it ("protected", "private", as moleculer-web's `rest` does);
 * one that widens it is refused at start-up.
 */
export type AccessRule = "partner" | "driver" | "internal";

type Visibility = "published" | "public" | "protected" | "private";

/** The visibility each access rule gives its actions. */
export const VISIBILITY_OF: Readonly<Record<AccessRule, Visibility>> = {
	partner: "published",
	driver: "published",
	internal: "public",
};

/** Widest first: an action may declare its rule's visibility or a narrower one. */
const WIDTH: readonly Visibility[] = ["published", "public", "protected", "private"];

/**
 * The visibility an action runs with: its rule's, or the narrower one it
 * declares itself. Throws when it declares a wider one (an internal action
 * published on the gateway by accident) or one Moleculer does not know.
 */
export function visibilityFor(name: string, rule: AccessRule, declared: unknown): Visibility {
	if (!Object.hasOwn(VISIBILITY_OF, rule)) throw new Error(`Action "${name}" declares an unknown access rule "${String(rule)}"`);
	const implied = VISIBILITY_OF[rule];
	if (declared === undefined || declared === null) return implied;
	const width = WIDTH.indexOf(declared as Visibility);
	if (width < 0) throw new Error(`Action "${name}" declares an unknown visibility "${String(declared)}"`);
	if (width < WIDTH.indexOf(implied)) {
		throw new Error(`Action "${name}" is access "${rule}" (visibility "${implied}") but declares the wider visibility "${String(declared)}"`);
	}
	return declared as Visibility;
}

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
	// Runs after mixins are merged and before the actions are registered, so
	// the registry (and the INFO packets other nodes read) see the visibility.
	serviceCreating(_service: unknown, schema: { name?: string; actions?: Record<string, unknown> }) {
		if (String(schema.name ?? "").startsWith("$")) return;
		for (const [key, action] of Object.entries(schema.actions ?? {})) {
			if (typeof action !== "object" || action === null) continue;
			const a = action as { access?: AccessRule; visibility?: unknown };
			// No rule: localAction refuses the action below, with its full name.
			if (a.access === undefined) continue;
			a.visibility = visibilityFor(`${schema.name}.${key}`, a.access, a.visibility);
		}
	},
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
					return Promise.reject(new ApiError("UNAUTHORIZED", "Missing or invalid driver token"));
				}
				return next.call(this as never, ctx);
			};
		}
		return function checkPartner(this: unknown, ctx: Context) {
			const meta = ctx.meta as PartnerMeta;
			if (typeof meta.partnerId !== "string" || meta.partnerId.length === 0) {
				return Promise.reject(new ApiError("UNAUTHORIZED", "Missing or invalid API key"));
			}
			return next.call(this as never, ctx);
		};
	},
};
