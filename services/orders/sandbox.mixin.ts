import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { Order, OrdersMeta, RideStatus } from "../../contracts/orders";
import { sandboxAdvanceParams, type SandboxAdvanceParams, type SandboxStepParams } from "../../contracts/sandbox";
import type { DbThis } from "../../mixins/db.mixin";
import { modeOf } from "./modes";
import type { MoveResult, OrdersRepo } from "./orders.repo";
import type { OrdersSettings } from "./orders.settings";
import { SandboxRepo } from "./sandbox.repo";
import { sandboxAdvance } from "./sandbox-advance";

/**
 * The sandbox controls of orders as a Moleculer mixin: POST
 * /ride/sandbox/advance (sandbox-advance.ts). Its repo is built on the DB
 * mixin's `Db` when the service starts.
 */

interface SandboxHost {
	sandboxRepo: SandboxRepo;
	/** The orders service's repo (its created() builds it). */
	orders: OrdersRepo;
	/** The orders service's post-commit hints of a move (a started scheduled ride: dispatch's `orders.created`, the `searching` webhook). */
	announceMove(from: RideStatus, result: MoveResult, previousDriverId: string | null): void;
}

type This = Service & SandboxHost & DbThis;

const sandboxSchema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, SandboxHost & DbThis>> = {
	actions: {
		/** POST /ride/sandbox/advance */
		sandboxAdvance: {
			access: "partner",
			params: sandboxAdvanceParams,
			handler(this: This, ctx: Context<SandboxAdvanceParams, OrdersMeta>): Promise<Order> {
				const settings = this.settings as unknown as OrdersSettings;
				return sandboxAdvance(
					{
						fleetMode: settings.fleetMode,
						findOrder: (orderId, scope) => this.orders.findOrder(orderId, scope),
						lease: this.sandboxRepo,
						takeStep: async (orderId, step) => {
							await ctx.call<unknown, SandboxStepParams>("fleet.sandboxStep", { orderId, step });
						},
						startDispatch: async (orderId) => {
							const moved = await this.orders.startScheduledNow(orderId);
							if (moved === "rider_busy") return moved;
							if (!moved) return "not_scheduled";
							this.announceMove("scheduled", moved, null);
							return "started";
						},
						log: this.logger,
					},
					ctx.params,
					{ partnerId: ctx.meta.partnerId!, mode: modeOf(ctx.meta) },
				);
			},
		},
	},

	started(this: This) {
		// At start, not at creation: every created() (the DB mixin's pool among them) has run by then.
		this.sandboxRepo = new SandboxRepo(this.db);
	},
};

/** Typed against its host above; mixed in as any mixin is. */
export const SandboxMixin = sandboxSchema as Partial<ServiceSchema>;
