import type { Context, ServiceSchema } from "moleculer";
import * as contract from "../../contracts/dispatch";
import { ORDER_EVENTS, type OrderCreatedEvent, type StatusChangedEvent } from "../../contracts/orders";
import { CoalescedPass } from "../../lib/coalesced-pass";
import { StatementBatcher } from "../../lib/statement-batcher";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { migrations } from "./migrations";
import { readDispatchSettings } from "./dispatch.settings";
import { DispatchMetrics } from "./dispatch.metrics";
import { DispatchRepo } from "./dispatch.repo";
import { shortError } from "./dispatch-rules";
import { toDriverView } from "./dispatch-views";
import { demandIndexes, driverIndexMethods, modeIndexes } from "./driver-index";
import { rideMirrorMethods } from "./ride-mirror";
import { matchingMethods } from "./matching";
import { driverMoveMethods } from "./driver-moves";
import type { DispatchLocal, DispatchMethods, DispatchThis } from "./dispatch.types";
import { serviceEnv } from "../../lib/settings";
import { driverApiActions, driverApiEvents } from "./driver-auth";

/**
 * Dispatch: the drivers, their offers, matching rides to the nearest
 * available driver, and following each ride until it ends.
 *
 * - Driver apps reach the `access: "driver"` actions (driver-auth.ts) through
 *   the gateway's `/driver/*` route with a driver token; the driver comes only
 *   from the token. The simulated fleet (services/fleet) drives its drivers
 *   through the same driver actions. The `internal` actions are for
 *   operators (REPL examples on each) and other services, never mapped on a
 *   gateway route.
 * - The parts: driver-moves.ts (the driver actions), matching.ts (offers,
 *   expiries, timeouts, location events), ride-mirror.ts (dispatch's view of
 *   each ride following the order's truth, and the reconciliation sweep),
 *   driver-index.ts (the per-instance nearest-driver and demand cache),
 *   dispatch.metrics.ts; all SQL is in the repo files (dispatch.repo.ts and
 *   the part repos it holds: drivers, ride-mirror, matching; driver-tokens).
 * - Claims are conditional updates in PostgreSQL, so any number of dispatch
 *   instances can run. All progress (offers, deadlines, phases) is in
 *   tables, so a restarted or another instance carries on with any ride.
 */

type Settings = Record<string, never>;

/** Operator and service actions: callable across nodes, never published on a gateway route. */
const INTERNAL = { access: "internal", visibility: "public" } as const;

const DispatchService: ServiceSchema<Settings, DispatchMethods, DispatchLocal & DbThis> = {
	name: "dispatch",
	mixins: [DbMixin({ service: "dispatch", migrations })],

	actions: {
		/**
		 * Registers a driver (offline until it goes online). Idempotent by phone.
		 * REPL: `call dispatch.register --name "Ravi K" --phone +919800000001 --vehicleNumber KA01AB1234 --serviceType cab`
		 */
		register: {
			...INTERNAL,
			params: contract.registerParams,
			handler(this: DispatchThis, ctx: Context<contract.RegisterParams>): Promise<contract.DriverView> {
				return this.registerDriver(ctx.params);
			},
		},

		/**
		 * The driver starts taking rides at `location`. Going online again while
		 * online (or busy) only updates the location.
		 * REPL: `call dispatch.goOnline --driverId drv_… --location.lat 12.9716 --location.lng 77.5946 --location.heading 90`
		 */
		goOnline: {
			...INTERNAL,
			params: contract.driverLocationParams,
			handler(this: DispatchThis, ctx: Context<contract.DriverLocationParams>): Promise<contract.DriverView> {
				return this.goOnline(ctx.params.driverId, ctx.params.location);
			},
		},

		/**
		 * The driver stops taking rides. A pending offer is declined first; a
		 * driver on a ride must drop it (or drop out) before going offline.
		 * REPL: `call dispatch.goOffline --driverId drv_…`
		 */
		goOffline: {
			...INTERNAL,
			params: contract.driverIdParams,
			handler(this: DispatchThis, ctx: Context<contract.DriverIdParams>): Promise<contract.DriverView> {
				return this.goOffline(ctx.params.driverId);
			},
		},

		/**
		 * The driver's current position (a driver app sends it every few seconds).
		 * While the driver is on a moving ride, dispatch turns the latest one into
		 * `location_updated` events at the contract's cadence.
		 * REPL: `call dispatch.reportLocation --driverId drv_… --location.lat 12.97 --location.lng 77.59 --location.heading 180`
		 */
		reportLocation: {
			...INTERNAL,
			params: contract.driverLocationParams,
			async handler(this: DispatchThis, ctx: Context<contract.DriverLocationParams>): Promise<contract.DriverView> {
				return toDriverView(await this.setDriverLocation(ctx.params.driverId, ctx.params.location));
			},
		},

		/**
		 * The driver takes the ride it was offered. If the partner cancelled
		 * meanwhile, the answer is 409 and the driver is free again.
		 * REPL: `call dispatch.acceptOffer --driverId drv_… --orderId ord_…`
		 */
		acceptOffer: {
			...INTERNAL,
			params: contract.offerAnswerParams,
			handler(this: DispatchThis, ctx: Context<contract.OfferAnswerParams>): Promise<contract.DriverJob> {
				return this.acceptOffer(ctx);
			},
		},

		/**
		 * The driver turns an offer down; the ride is offered to the next driver
		 * (never to this one again).
		 * REPL: `call dispatch.declineOffer --driverId drv_… --orderId ord_…`
		 */
		declineOffer: {
			...INTERNAL,
			params: contract.offerAnswerParams,
			handler(this: DispatchThis, ctx: Context<contract.OfferAnswerParams>): Promise<contract.DriverView> {
				return this.declineOffer(ctx.params.driverId, ctx.params.orderId);
			},
		},

		/**
		 * The driver is at the pickup (`accepted → arrived`).
		 * REPL: `call dispatch.arrive --driverId drv_… --orderId ord_…`
		 */
		arrive: {
			...INTERNAL,
			params: contract.rideStepParams,
			handler(this: DispatchThis, ctx: Context<contract.RideStepParams>): Promise<contract.DriverJob> {
				return this.moveRide(ctx, "accepted", "arrived");
			},
		},

		/**
		 * The rider is in: `arrived → started`, only with the rider's OTP. A wrong
		 * OTP is refused by orders (422 INVALID_OTP) and counted on the driver.
		 * Orders counts every try per order (in PostgreSQL, across instances):
		 * after `OTP_MAX_TRIES` (5) the start answers 409 OTP_LOCKED, even with the
		 * right OTP, until an operator calls `orders.unlockOtp`; the driver may
		 * drop out, the partner may cancel.
		 * REPL: `call dispatch.startRide --driverId drv_… --orderId ord_… --otp 4821`
		 */
		startRide: {
			...INTERNAL,
			params: contract.startRideParams,
			handler(this: DispatchThis, ctx: Context<contract.StartRideParams>): Promise<contract.DriverJob> {
				return this.moveRide(ctx, "arrived", "started", ctx.params.otp);
			},
		},

		/**
		 * The ride is over at the drop (`started → dropped`); the driver is
		 * available again.
		 * REPL: `call dispatch.dropRide --driverId drv_… --orderId ord_…`
		 */
		dropRide: {
			...INTERNAL,
			params: contract.rideStepParams,
			handler(this: DispatchThis, ctx: Context<contract.RideStepParams>): Promise<contract.DriverJob> {
				return this.moveRide(ctx, "started", "dropped");
			},
		},

		/**
		 * The driver gives the ride up before it started (`accepted`/`arrived` →
		 * `searching`, no webhook): dispatch offers it to another driver, and the
		 * partner sees a new `accepted` with that driver.
		 * REPL: `call dispatch.dropOut --driverId drv_… --orderId ord_… --reason "flat tyre"`
		 */
		dropOut: {
			...INTERNAL,
			params: contract.dropOutParams,
			handler(this: DispatchThis, ctx: Context<contract.DropOutParams>): Promise<contract.DriverView> {
				return this.dropOut(ctx);
			},
		},

		/**
		 * A driver and its current job (pending offer or ride), as a driver app shows it.
		 * REPL: `call dispatch.driver --driverId drv_…`
		 */
		driver: {
			...INTERNAL,
			params: contract.driverIdParams,
			handler(this: DispatchThis, ctx: Context<contract.DriverIdParams>): Promise<contract.DriverJob> {
				return this.driverJob(ctx.params.driverId);
			},
		},

		/**
		 * Operators: drivers, newest first, optionally filtered.
		 * REPL: `call dispatch.listDrivers --status available --serviceType cab --limit 20`
		 */
		listDrivers: {
			...INTERNAL,
			params: contract.listDriversParams,
			async handler(this: DispatchThis, ctx: Context<contract.ListDriversParams>): Promise<contract.DriverView[]> {
				return (await this.repo.drivers.listDrivers(ctx.params)).map(toDriverView);
			},
		},

		/**
		 * The nearest available drivers of a type around a point (from this
		 * instance's index), nearest first.
		 * REPL: `call dispatch.nearestDrivers --point.lat 12.97 --point.lng 77.59 --serviceType cab --limit 5`
		 */
		nearestDrivers: {
			...INTERNAL,
			params: contract.nearestDriversParams,
			handler(this: DispatchThis, ctx: Context<contract.NearestDriversParams>): contract.NearbyDriver[] {
				return this.nearestDrivers(ctx.params);
			},
		},

		/**
		 * Pricing's input per service type around a point: `eta` of the nearest
		 * available driver (null when none within the search radius), available
		 * drivers and demand within the supply radius: rides still searching, each
		 * partner's counted up to `DISPATCH_DEMAND_PER_PARTNER` (a cancelled or
		 * matched request is no demand). In memory only: pricing waits for it at most ~300 ms.
		 * REPL: `call dispatch.supplyDemand --point.lat 12.9716 --point.lng 77.5946`
		 */
		supplyDemand: {
			...INTERNAL,
			params: contract.supplyDemandParams,
			handler(this: DispatchThis, ctx: Context<contract.SupplyDemandParams>): contract.SupplyDemandReply {
				return this.supplyDemandAt(ctx.params.point, ctx.params.mode ?? "test");
			},
		},

		/**
		 * Dispatch's view of one ride: phase, driver, offers so far (operators, tests).
		 * REPL: `call dispatch.ride --orderId ord_…`
		 */
		ride: {
			...INTERNAL,
			params: contract.rideParams,
			handler(this: DispatchThis, ctx: Context<contract.RideParams>): Promise<contract.RideView> {
				return this.rideView(ctx.params.orderId);
			},
		},

		/**
		 * The simulated fleet's inbox: pending offers and rides of simulated
		 * drivers, and searching rides with no driver in reach.
		 * REPL: `call dispatch.simulatedWork`
		 */
		simulatedWork: {
			...INTERNAL,
			handler(this: DispatchThis): Promise<contract.SimulatedWork> {
				return this.simulatedWork();
			},
		},

		/** Operators and tests: run one matching/expiry/location pass, one sweep and one index refresh now. REPL: `call dispatch.runOnce` */
		runOnce: {
			...INTERNAL,
			async handler(this: DispatchThis) {
				await this.tick();
				await this.sweep();
				await Promise.all([this.refreshIndex(), this.refreshDemand()]);
				return { ok: true };
			},
		},

		// The driver API (`/driver/*` on the gateway, access "driver") and its tokens: driver-auth.ts.
		...driverApiActions,
	},

	events: {
		...driverApiEvents,
		/** A new ride: mirror it from the event's snapshot and start matching it now (the sweep also finds rides whose event was lost). */
		[ORDER_EVENTS.created]: {
			async handler(this: DispatchThis, ctx: Context<OrderCreatedEvent>) {
				try {
					await this.mirrorNewRide(ctx.params);
					this.kick();
				} catch (err) {
					this.trouble(`orders.created ${ctx.params.orderId}: ${shortError(err)} (the sweep will pick it up)`);
				}
			},
		},
		/** The order moved (a cancel frees the driver); ignored when dispatch already knows that status. */
		[ORDER_EVENTS.statusChanged]: {
			async handler(this: DispatchThis, ctx: Context<Pick<StatusChangedEvent, "orderId" | "to">>) {
				try {
					const ride = await this.repo.mirror.ride(ctx.params.orderId);
					if (ride && (ride.order_status === ctx.params.to || ride.state === "closed")) return;
					await this.reconcileOrder(ctx.params.orderId);
				} catch (err) {
					this.trouble(`orders.statusChanged ${ctx.params.orderId}: ${shortError(err)} (the sweep will reconcile it)`);
				}
			},
		},
		/** Another instance (or this one) changed a driver: keep the index fresh. */
		[contract.DISPATCH_EVENTS.driverChanged]: {
			handler(this: DispatchThis, ctx: Context<contract.DriverChangedEvent>) {
				this.applyDriverChange(ctx.params);
			},
		},
	},

	methods: {
		...driverIndexMethods,
		...rideMirrorMethods,
		...matchingMethods,
		...driverMoveMethods,

		/** Warnings, except while the broker is stopping (peers going away then is expected). */
		trouble(this: DispatchThis, message: string) {
			if (this.stopping || !this.broker.started) this.logger.debug(message);
			else this.logger.warn(message);
		},

		/** Drivers by status and type, from the table (the index only knows available drivers). */
		async updateDriverGauges(this: DispatchThis) {
			this.metrics.driverCounts(await this.repo.drivers.driverCounts());
		},
	},

	created(this: DispatchThis) {
		this.cfg = readDispatchSettings(serviceEnv(this));
		this.repo = new DispatchRepo(this.sequelize);
		this.metrics = new DispatchMetrics(this.broker);
		this.available = modeIndexes<null>(this.cfg.h3Resolution);
		this.demand = demandIndexes(this.cfg.h3Resolution);
		this.driverRevs = new Map();
		this.timers = [];
		this.ticker = new CoalescedPass(() => this.tickSteps(), () => this.stopping);
		this.matcher = new CoalescedPass(() => this.matchPass(), () => this.stopping);
		// Up to 4 statements out at once: the pool is shared with the process's other services.
		const firstLook = { retryMatchMs: this.cfg.retryMatchMs, dispatchTimeoutMs: this.cfg.dispatchTimeoutMs, radiusM: this.cfg.searchRadiusM };
		this.newRides = new StatementBatcher((rides) => this.repo.mirror.insertNewRides(rides, firstLook), (r) => r.orderId, { maxBatch: 200, maxInFlight: 4 });
		this.sweepRunning = null;
		this.refreshRunning = null;
		this.refreshedUpTo = null;
		this.stopping = false;
		this.startedAt = Date.now();
		this.fleetWarnedAt = 0;
	},

	async started(this: DispatchThis) {
		await this.rebuildIndex();
		await this.refreshDemand();
		const every = (ms: number, fn: () => Promise<unknown>) => {
			const timer = setInterval(() => {
				if (!this.stopping) fn().catch((err: unknown) => this.trouble(shortError(err)));
			}, ms);
			timer.unref();
			this.timers.push(timer);
		};
		every(this.cfg.tickMs, () => this.tick());
		// Jitter the sweep per instance so several instances do not sweep in lockstep.
		const firstSweep = setTimeout(() => {
			if (this.stopping) return;
			void this.sweep();
			every(this.cfg.sweepMs, () => this.sweep());
		}, Math.floor(Math.random() * Math.min(this.cfg.sweepMs, 2000)));
		firstSweep.unref();
		this.timers.push(firstSweep);
		every(this.cfg.indexRefreshMs, async () => {
			if (this.refreshRunning) return;
			this.refreshRunning = Promise.all([this.refreshIndex(), this.refreshDemand()]).then(() => undefined);
			try {
				await this.refreshRunning;
			} finally {
				this.refreshRunning = null;
			}
		});
		if (this.metrics.enabled) {
			await this.updateDriverGauges().catch((err: unknown) => this.trouble(`Driver gauges: ${shortError(err)}`));
			every(this.cfg.indexRefreshMs, () => this.updateDriverGauges());
		}
		this.logger.info(
			`Dispatch ready (fleet ${this.cfg.fleetMode}, offer timeout ${this.cfg.offerTimeoutMs} ms, dispatch timeout ${this.cfg.dispatchTimeoutMs} ms, location every ${this.cfg.locationIntervalMs} ms)`,
		);
	},

	async stopped(this: DispatchThis) {
		this.stopping = true;
		for (const timer of this.timers) clearTimeout(timer);
		this.timers = [];
		// Let running passes finish before the pool closes (the DB mixin's stopped runs after this).
		await Promise.allSettled([this.ticker.current, this.matcher.current, this.sweepRunning, this.refreshRunning].filter(Boolean));
	},
};

export default DispatchService;
