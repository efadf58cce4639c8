import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DISPATCH_EVENTS, type OfferCreatedEvent } from "../../contracts/dispatch";
import * as sandbox from "../../contracts/sandbox";
import type { DispatchMetrics } from "./dispatch.metrics";
import type { DispatchRepo } from "./dispatch.repo";
import type { DispatchSettings } from "./dispatch.settings";
import type { DriverIndex } from "./driver-index";
import type { Matcher } from "./matching";
import { OrdersClient } from "./orders-client";
import type { RideMirror } from "./ride-mirror";
import { SandboxSteps } from "./sandbox-steps";

/**
 * The sandbox's manual rides as a Moleculer mixin of dispatch: the internal
 * actions the simulated fleet calls while the partner advances a manual ride
 * (`fleet.sandboxStep`). The steps (sandbox-steps.ts) are built at start
 * from the parts dispatch's `created()` made.
 */

/** What the mixin needs on the service. */
interface SandboxHost {
	repo: DispatchRepo;
	index: DriverIndex;
	mirror: RideMirror;
	matcher: Matcher;
	metrics: DispatchMetrics;
	sandboxSteps: SandboxSteps;
}

type This = Service & SandboxHost;

const sandboxSchema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, SandboxHost>> = {
	actions: {
		/** A manual sandbox ride as the fleet acts on it. REPL: `call dispatch.sandboxRide --orderId ord_…` */
		sandboxRide: {
			access: "internal",
			params: sandbox.sandboxRideParams,
			handler(this: This, ctx: Context<{ orderId: string }>): Promise<sandbox.SandboxRide> {
				return this.sandboxSteps.ride(ctx.params.orderId);
			},
		},
		/** Offers a searching manual ride to a simulated driver, as matching would. */
		sandboxOffer: {
			access: "internal",
			params: sandbox.sandboxOfferParams,
			handler(this: This, ctx: Context<sandbox.SandboxOfferParams>) {
				return this.sandboxSteps.offer(ctx.params.orderId, ctx.params.driverId);
			},
		},
		/** A `location_updated` of a moving manual ride, from where its driver reported to be. */
		sandboxLocation: {
			access: "internal",
			params: sandbox.sandboxLocationParams,
			async handler(this: This, ctx: Context<sandbox.SandboxLocationParams>) {
				await this.sandboxSteps.location(ctx.params.orderId, ctx.params.location);
				return { ok: true };
			},
		},
		/** Ends a searching manual ride as `no_driver_found`, as the dispatch timeout would. */
		sandboxNoDriver: {
			access: "internal",
			params: sandbox.sandboxRideParams,
			async handler(this: This, ctx: Context<{ orderId: string }>) {
				await this.sandboxSteps.noDriver(ctx.params.orderId);
				return { ok: true };
			},
		},
	},

	started(this: This) {
		const broker = this.broker;
		this.sandboxSteps = new SandboxSteps({
			settings: this.settings as unknown as DispatchSettings,
			repo: this.repo,
			index: this.index,
			mirror: this.mirror,
			matcher: this.matcher,
			orders: new OrdersClient(broker),
			metrics: this.metrics,
			announceOffer: (event: OfferCreatedEvent) =>
				void broker.broadcast(DISPATCH_EVENTS.offerCreated, event).catch((err: unknown) => this.logger.debug(`offerCreated broadcast: ${String(err)}`)),
		});
	},
};

/** Typed against its host above; mixed in as any mixin is. */
export const SandboxMixin = sandboxSchema as Partial<ServiceSchema>;
