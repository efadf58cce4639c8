import type { Context, Service, ServiceSchema } from "moleculer";
import * as contract from "../../contracts/dispatch";
import { DRIVER_TOKEN_EVENTS } from "../../contracts/driver";
import { ORDER_EVENTS, type OrderCreatedEvent, type StatusChangedEvent } from "../../contracts/orders";
import { useServiceSettings } from "../../lib/settings";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { migrations } from "./migrations";
import { readDispatchSettings, type DispatchSettings } from "./dispatch.settings";
import { DispatchMetrics } from "./dispatch.metrics";
import { DispatchRepo } from "./dispatch.repo";
import { shortError } from "./dispatch-rules";
import { toDriverView } from "./dispatch-views";
import type { DispatchLog } from "./dispatch.types";
import { DriverIndex } from "./driver-index";
import { DriverPresence } from "./driver-presence";
import { RideMirror } from "./ride-mirror";
import { RideSweep } from "./ride-sweep";
import { Matcher } from "./matching";
import { DriverMoves } from "./driver-moves";
import { RideSteps } from "./ride-steps";
import { DriverApi } from "./driver-api";
import { DriverApiMixin, type DriverApiHost } from "./driver-api.mixin";
import { SandboxMixin } from "./sandbox.mixin";
import { DriverTokens } from "./driver-tokens";
import { KnownCredentials } from "../../lib/known-credentials";
import { OfferWaits } from "./offer-waits";
import { OrdersClient } from "./orders-client";
import { DispatchRetentionRepo } from "./retention.repo";
import { RetentionPass } from "../../lib/retention";
import { actorOf, AuditLog } from "../../lib/audit";

/**
 * Dispatch: the drivers, their offers, matching rides to the nearest
 * available driver, and following each ride until it ends. This file maps
 * actions and events onto the parts; each part is a class built in
 * `created()` from the settings, the repo and the parts below it:
 *
 *     DriverIndex ← RideMirror ← Matcher ← DriverMoves ← DriverApi (+ DriverTokens, OfferWaits)
 *
 * Calls go one way only; a part that finds work for one above it calls an
 * injected callback (`onWork`: there is matching work), never the part.
 *
 * - Driver apps reach the `access: "driver"` actions (driver-api.mixin.ts)
 *   through the gateway's `/driver/*` route with a driver token; the driver
 *   comes only from the token. The simulated fleet (services/fleet) drives
 *   its drivers through the same driver actions. The `internal` actions are
 *   for operators (REPL examples on each) and other services, never mapped on
 *   a gateway route.
 * - Claims are conditional updates in PostgreSQL, so any number of dispatch
 *   instances can run. All progress (offers, deadlines, phases) is in
 *   tables, so a restarted or another instance carries on with any ride.
 */

interface DispatchLocal extends DriverApiHost {
	repo: DispatchRepo;
	metrics: DispatchMetrics;
	index: DriverIndex;
	mirror: RideMirror;
	sweep: RideSweep;
	matcher: Matcher;
	moves: DriverMoves;
	steps: RideSteps;
	presence: DriverPresence;
	timers: NodeJS.Timeout[];
	stopping: boolean;
	refreshRunning: Promise<unknown> | null;
	retention: RetentionPass<undefined>;
}

type This = Service<DispatchSettings> & DispatchLocal & DbThis;

const DispatchService: ServiceSchema<DispatchSettings, Record<string, never>, DispatchLocal & DbThis> = {
	name: "dispatch",
	mixins: [DbMixin({ service: "dispatch", migrations }), DriverApiMixin, SandboxMixin],

	actions: {
		/**
		 * Registers a driver (offline until it goes online). Idempotent by phone.
		 * REPL: `call dispatch.register --name "Ravi K" --phone +919800000001 --vehicleNumber KA01AB1234 --serviceType cab`
		 */
		register: {
			access: "internal",
			params: contract.registerParams,
			handler(this: This, ctx: Context<contract.RegisterParams>): Promise<contract.DriverView> {
				// An operator's registration is audited; the simulated fleet's are not (they are not operator actions).
				if (ctx.params.simulated) return this.moves.register(ctx.params);
				const actor = actorOf(ctx);
				return this.moves.register(ctx.params, (t, row) =>
					this.auditLog.record({ actor, action: "dispatch.register", subject: row.id, detail: { mode: row.mode, serviceType: row.service_type } }, t),
				);
			},
		},

		/**
		 * The driver starts taking rides at `location`. Going online again while
		 * online (or busy) only updates the location.
		 * REPL: `call dispatch.goOnline --driverId drv_… --location.lat 12.9716 --location.lng 77.5946 --location.heading 90`
		 */
		goOnline: {
			access: "internal",
			params: contract.driverLocationParams,
			handler(this: This, ctx: Context<contract.DriverLocationParams>): Promise<contract.DriverView> {
				return this.moves.goOnline(ctx.params.driverId, ctx.params.location);
			},
		},

		/**
		 * The driver stops taking rides. A pending offer is declined first; a
		 * driver on a ride must drop it (or drop out) before going offline.
		 * REPL: `call dispatch.goOffline --driverId drv_…`
		 */
		goOffline: {
			access: "internal",
			params: contract.driverIdParams,
			handler(this: This, ctx: Context<contract.DriverIdParams>): Promise<contract.DriverView> {
				return this.moves.goOffline(ctx.params.driverId);
			},
		},

		/**
		 * The driver's current position (a driver app sends it every few seconds).
		 * While the driver is on a moving ride, dispatch turns the latest one into
		 * `location_updated` events at the contract's cadence.
		 * REPL: `call dispatch.reportLocation --driverId drv_… --location.lat 12.97 --location.lng 77.59 --location.heading 180`
		 */
		reportLocation: {
			access: "internal",
			params: contract.driverLocationParams,
			async handler(this: This, ctx: Context<contract.DriverLocationParams>): Promise<contract.DriverView> {
				return toDriverView(await this.moves.setLocation(ctx.params.driverId, ctx.params.location));
			},
		},

		/**
		 * The driver takes the ride it was offered. If the partner cancelled
		 * meanwhile, the answer is 409 and the driver is free again.
		 * REPL: `call dispatch.acceptOffer --driverId drv_… --orderId ord_…`
		 */
		acceptOffer: {
			access: "internal",
			params: contract.offerAnswerParams,
			handler(this: This, ctx: Context<contract.OfferAnswerParams>): Promise<contract.DriverJob> {
				return this.steps.accept(ctx.params.driverId, ctx.params.orderId, ctx);
			},
		},

		/**
		 * The driver turns an offer down; the ride is offered to the next driver
		 * (never to this one again).
		 * REPL: `call dispatch.declineOffer --driverId drv_… --orderId ord_…`
		 */
		declineOffer: {
			access: "internal",
			params: contract.offerAnswerParams,
			handler(this: This, ctx: Context<contract.OfferAnswerParams>): Promise<contract.DriverView> {
				return this.moves.decline(ctx.params.driverId, ctx.params.orderId);
			},
		},

		/**
		 * The driver is at the pickup (`accepted → arrived`).
		 * REPL: `call dispatch.arrive --driverId drv_… --orderId ord_…`
		 */
		arrive: {
			access: "internal",
			params: contract.rideStepParams,
			handler(this: This, ctx: Context<contract.RideStepParams>): Promise<contract.DriverJob> {
				return this.steps.moveRide(ctx.params, "accepted", "arrived", undefined, ctx);
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
			access: "internal",
			params: contract.startRideParams,
			handler(this: This, ctx: Context<contract.StartRideParams>): Promise<contract.DriverJob> {
				return this.steps.moveRide(ctx.params, "arrived", "started", ctx.params.otp, ctx);
			},
		},

		/**
		 * The ride is over at the drop (`started → dropped`); the driver is
		 * available again.
		 * REPL: `call dispatch.dropRide --driverId drv_… --orderId ord_…`
		 */
		dropRide: {
			access: "internal",
			params: contract.rideStepParams,
			handler(this: This, ctx: Context<contract.RideStepParams>): Promise<contract.DriverJob> {
				return this.steps.moveRide(ctx.params, "started", "dropped", undefined, ctx);
			},
		},

		/**
		 * The driver gives the ride up before it started (`accepted`/`arrived` →
		 * `searching`, no webhook): dispatch offers it to another driver, and the
		 * partner sees a new `accepted` with that driver.
		 * REPL: `call dispatch.dropOut --driverId drv_… --orderId ord_… --reason "flat tyre"`
		 */
		dropOut: {
			access: "internal",
			params: contract.dropOutParams,
			handler(this: This, ctx: Context<contract.DropOutParams>): Promise<contract.DriverView> {
				return this.steps.dropOut(ctx.params, ctx.params.reason, ctx);
			},
		},

		/**
		 * A driver and its current job (pending offer or ride), as a driver app shows it.
		 * REPL: `call dispatch.driver --driverId drv_…`
		 */
		driver: {
			access: "internal",
			params: contract.driverIdParams,
			handler(this: This, ctx: Context<contract.DriverIdParams>): Promise<contract.DriverJob> {
				return this.moves.driverJob(ctx.params.driverId, { fresh: true });
			},
		},

		/**
		 * Operators: drivers, newest first, optionally filtered.
		 * REPL: `call dispatch.listDrivers --status available --serviceType cab --limit 20`
		 */
		listDrivers: {
			access: "internal",
			params: contract.listDriversParams,
			async handler(this: This, ctx: Context<contract.ListDriversParams>): Promise<contract.DriverView[]> {
				return (await this.repo.drivers.listDrivers(ctx.params)).map(toDriverView);
			},
		},

		/**
		 * The nearest available drivers of a type around a point (from this
		 * instance's index), nearest first.
		 * REPL: `call dispatch.nearestDrivers --point.lat 12.97 --point.lng 77.59 --serviceType cab --limit 5`
		 */
		nearestDrivers: {
			access: "internal",
			params: contract.nearestDriversParams,
			handler(this: This, ctx: Context<contract.NearestDriversParams>): contract.NearbyDriver[] {
				return this.index.nearest(ctx.params);
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
			access: "internal",
			params: contract.supplyDemandParams,
			handler(this: This, ctx: Context<contract.SupplyDemandParams>): contract.SupplyDemandReply {
				return this.index.supplyDemandAt(ctx.params.point, ctx.params.mode ?? "test");
			},
		},

		/**
		 * Dispatch's view of one ride: phase, driver, offers so far (operators, tests).
		 * REPL: `call dispatch.ride --orderId ord_…`
		 */
		ride: {
			access: "internal",
			params: contract.rideParams,
			handler(this: This, ctx: Context<contract.RideParams>): Promise<contract.RideView> {
				return this.matcher.rideView(ctx.params.orderId);
			},
		},

		/**
		 * The simulated fleet's inbox: pending offers and rides of simulated
		 * drivers, and searching rides with no driver in reach.
		 * REPL: `call dispatch.simulatedWork`
		 */
		simulatedWork: {
			access: "internal",
			handler(this: This): Promise<contract.SimulatedWork> {
				return this.matcher.simulatedWork();
			},
		},

		/** Operators: one retention pass now (DISPATCH_RETENTION_DAYS). REPL: `call dispatch.runRetention` */
		runRetention: {
			access: "internal",
			async handler(this: This): Promise<{ removed: number }> {
				return { removed: await this.retention.run() };
			},
		},

		/** Operators and tests: run one matching/expiry/location pass, one sweep and one index refresh now. REPL: `call dispatch.runOnce` */
		runOnce: {
			access: "internal",
			async handler(this: This) {
				await this.matcher.tick();
				await this.sweep.run();
				await Promise.all([this.index.refresh(), this.index.refreshDemand()]);
				return { ok: true };
			},
		},
	},

	events: {
		/** A new ride: mirror it from the event's snapshot and match it now (the sweep also finds rides whose event was lost). */
		[ORDER_EVENTS.created]: {
			async handler(this: This, ctx: Context<OrderCreatedEvent>) {
				await this.mirror
					.mirrorNewRide(ctx.params)
					.catch((err: unknown) => trouble(this, `orders.created ${ctx.params.orderId}: ${shortError(err)} (the sweep will pick it up)`));
			},
		},
		/** The order moved (a cancel frees the driver); ignored when dispatch already knows that status. */
		[ORDER_EVENTS.statusChanged]: {
			async handler(this: This, ctx: Context<Pick<StatusChangedEvent, "orderId" | "to">>) {
				await this.mirror
					.orderMoved(ctx.params.orderId, ctx.params.to)
					.catch((err: unknown) => trouble(this, `orders.statusChanged ${ctx.params.orderId}: ${shortError(err)} (the sweep will reconcile it)`));
			},
		},
		/** Another instance (or this one) changed a driver: keep the index fresh. */
		[contract.DISPATCH_EVENTS.driverChanged]: {
			handler(this: This, ctx: Context<contract.DriverChangedEvent>) {
				this.index.apply(ctx.params);
				this.presence.applyChange(ctx.params);
			},
		},
		/** Positions another instance recorded since its last flush (this instance's own are applied already). */
		[contract.DISPATCH_EVENTS.driverPositions]: {
			handler(this: This, ctx: Context<contract.DriverPositionsEvent>) {
				if (ctx.nodeID !== this.broker.nodeID) this.presence.applyPositions(ctx.params);
			},
		},
	},

	created(this: This) {
		const settings = useServiceSettings(this, readDispatchSettings);
		const broker = this.broker;
		const log: DispatchLog = { info: (m) => this.logger.info(m), debug: (m) => this.logger.debug(m), trouble: (m) => trouble(this, m) };
		const stopping = () => this.stopping;
		const onWork = () => this.matcher.kick();
		const repo = (this.repo = new DispatchRepo(this.db));
		const metrics = (this.metrics = new DispatchMetrics(broker));
		const orders = new OrdersClient(broker);
		const announce = (event: string, payload: object) =>
			broker.broadcast(event, payload).catch((err: unknown) => log.debug(`${event} broadcast: ${shortError(err)}`));

		this.index = new DriverIndex({ settings, repo, onWork, log, announce: (change) => void announce(contract.DISPATCH_EVENTS.driverChanged, change) });
		const fleetRuns = () => broker.registry.getServiceList({ onlyAvailable: true }).some((svc: { name: string }) => svc.name === "fleet");
		this.mirror = new RideMirror({ settings, repo, orders, index: this.index, onWork, log });
		this.sweep = new RideSweep({ settings, repo, orders, mirror: this.mirror, index: this.index, fleetRuns, stopping, log });
		const announceOffer = (event: contract.OfferCreatedEvent) => void announce(contract.DISPATCH_EVENTS.offerCreated, event);
		this.matcher = new Matcher({ settings, repo, index: this.index, mirror: this.mirror, orders, metrics, announceOffer, stopping, log });
		const announcePositions = (event: contract.DriverPositionsEvent) => broker.broadcast(contract.DISPATCH_EVENTS.driverPositions, event);
		const presence = (this.presence = new DriverPresence({ settings, repo: repo.drivers, index: this.index, announcePositions, log }));
		this.moves = new DriverMoves({ repo, index: this.index, presence, matcher: this.matcher });
		this.steps = new RideSteps({
			settings,
			repo,
			index: this.index,
			presence,
			moves: this.moves,
			mirror: this.mirror,
			matcher: this.matcher,
			orders,
			metrics,
			log,
		});
		this.offerWaits = new OfferWaits(settings.maxWaits);
		const announceWait = (event: contract.DriverWaitStartedEvent) => void announce(contract.DISPATCH_EVENTS.driverWaitStarted, event);
		this.driverApi = new DriverApi({ moves: this.moves, steps: this.steps, tokens: repo.tokens, waits: this.offerWaits, announceWait, stopping });
		this.knownTokens = new KnownCredentials({
			source: {
				livePage: (after, limit) => repo.tokens.livePrefixes(after, limit),
				createdSince: (since) => repo.tokens.prefixesSince(since),
				now: () => repo.tokens.now(),
			},
			...settings.knownTokens,
			what: "driver tokens",
			log: this.logger,
		});
		this.driverTokens = new DriverTokens({
			repo: repo.tokens,
			known: this.knownTokens,
			announceCreated: (event) => broker.broadcast(DRIVER_TOKEN_EVENTS.created, event),
			register: (p) => this.moves.register(p),
			announceChanged: (event) => broker.broadcast(DRIVER_TOKEN_EVENTS.changed, event),
			takeOffline: (driverId) => this.steps.revoked(driverId),
			cacheMs: settings.tokenCacheMs,
			cacheMax: settings.driverCacheMax,
		});
		this.auditLog = new AuditLog(this.db, "dispatch_audit");
		const retentionRepo = new DispatchRetentionRepo(this.db);
		this.retention = new RetentionPass<undefined>({
			name: "offers and closed rides",
			settings,
			logger: this.logger,
			removeBatch: async (days, limit) => ({ ...(await retentionRepo.removeBatch(days, limit)), next: undefined }),
		});
		this.timers = [];
		this.stopping = false;
		this.refreshRunning = null;
	},

	async started(this: This) {
		const { settings, index, sweep, matcher, metrics } = this;
		await index.rebuild();
		await this.knownTokens.start();
		await index.refreshDemand();
		const every = (ms: number, fn: () => Promise<unknown>) => {
			const timer = setInterval(() => {
				if (!this.stopping) fn().catch((err: unknown) => trouble(this, shortError(err)));
			}, ms);
			timer.unref();
			this.timers.push(timer);
		};
		every(settings.tickMs, () => matcher.tick());
		this.retention.start();
		every(settings.positionFlushMs, () => this.presence.flush());
		every(settings.presenceSweepMs, () => this.presence.sweepSilent());
		// Jitter the sweep per instance so several instances do not sweep in lockstep.
		const firstSweep = setTimeout(
			() => {
				if (this.stopping) return;
				void sweep.run();
				every(settings.sweepMs, () => sweep.run());
			},
			Math.floor(Math.random() * Math.min(settings.sweepMs, 2000)),
		);
		firstSweep.unref();
		this.timers.push(firstSweep);
		every(settings.indexRefreshMs, async () => {
			if (this.refreshRunning) return;
			this.refreshRunning = Promise.all([index.refresh(), index.refreshDemand()]);
			try {
				await this.refreshRunning;
			} finally {
				this.refreshRunning = null;
			}
		});
		if (metrics.enabled) {
			// Drivers by status and type, from the table (the index only knows available drivers).
			const gauges = async () => metrics.driverCounts(await this.repo.drivers.driverCounts());
			await gauges().catch((err: unknown) => trouble(this, `Driver gauges: ${shortError(err)}`));
			every(settings.indexRefreshMs, gauges);
		}
		this.logger.info(
			`Dispatch ready (fleet ${settings.fleetMode}, offer timeout ${settings.offerTimeoutMs} ms, dispatch timeout ${settings.dispatchTimeoutMs} ms, location every ${settings.locationIntervalMs} ms)`,
		);
	},

	async stopped(this: This) {
		this.stopping = true;
		this.knownTokens.stop();
		for (const timer of this.timers) clearTimeout(timer);
		this.timers = [];
		this.offerWaits.endAll();
		await this.retention.stop();
		// Positions recorded since the last flush reach PostgreSQL before the pool closes.
		await this.presence.flush().catch((err: unknown) => trouble(this, `Last positions: ${shortError(err)}`));
		// Let running passes finish before the pool closes (the DB mixin's stopped runs after this).
		await Promise.allSettled([...this.matcher.current, this.sweep.current, this.refreshRunning].filter(Boolean));
	},
};

/** Warnings, except while the broker is stopping (peers going away then is expected). */
function trouble(svc: This, message: string): void {
	if (svc.stopping || !svc.broker.started) svc.logger.debug(message);
	else svc.logger.warn(message);
}

export default DispatchService;
