import type { Context, Service, ServiceSchema } from "moleculer";
import { SERVICE_TYPES } from "../../contracts/common";
import {
	DISPATCH_EVENTS,
	type DriverPosition,
	type DriverView,
	type OfferCreatedEvent,
	type RegisterParams,
	type SimRide,
	type SimSearching,
	type SimulatedWork,
} from "../../contracts/dispatch";
import type {
	DriverCancelParams,
	DriverLocationsParams,
	DriverOnlineParams,
	DriverOrderParams,
	DriverArrivedParams,
	DriverStartParams,
} from "../../contracts/driver";
import { ORDER_EVENTS, type OrderIdParams, type RiderOtpResult } from "../../contracts/orders";
import { CoalescedPass } from "../../lib/coalesced-pass";
import { ApiError } from "../../lib/errors";
import { sandboxStepParams, type SandboxStepParams } from "../../contracts/sandbox";
import { SandboxDriver } from "./sandbox-driver";
import { readFleetSettings, spawnSlots, type FleetSettings } from "./fleet.settings";
import { offerStep, pickSlots, reportIntervalMs, rideStep, seedDriver, spawnDriver, type SeedDriver, type SimStep } from "./simulation";
import { useServiceSettings } from "../../lib/settings";

/**
 * The simulated fleet (`FLEET_MODE=simulated`, the default): the sandbox,
 * serving test-mode rides only. Its drivers are registered as `test` drivers,
 * so dispatch never offers them a live ride. Seeded drivers of
 * both types around the `SIM_CITIES` centres, plus a driver spawned near any
 * test pickup no driver can reach — at most `SIM_MAX_DRIVERS` in all: past
 * that an idle spawned driver is moved there instead, or the ride ends
 * `no_driver_found` — who accept offers, drive to the pickup and on
 * to the drop, arrive, start with the rider's OTP and drop — with realistic
 * timings compressed by `SIM_SPEED`.
 *
 * It is a client of the driver API, exactly like a driver app: it calls the
 * very actions the gateway's `/driver/*` routes call (`dispatch.driverAccept`,
 * `driverArrived`, `driverStart`, …, the driver in `meta.driverId` as the
 * gateway sets it from the token), so every sandbox ride runs the live path
 * end to end; only registering is the operator's `dispatch.register`. It
 * never touches a table. It keeps no progress of its own:
 * each pass asks `dispatch.simulatedWork` for its drivers' offers and rides
 * (with the phase and when it began) and derives where every driver is from
 * that and the clock. So a restarted fleet (or dispatch) carries on, and two
 * fleet instances only race on idempotent, conditional actions (the loser
 * gets a 409 and moves on). In `live` mode it does nothing.
 */

interface FleetLocal {
	timers: NodeJS.Timeout[];
	/** The tick: one at a time, a kick while it runs makes it run once more. */
	ticker: CoalescedPass;
	seeding: Promise<void> | null;
	seeded: number;
	stopping: boolean;
	/** Dispatch answered once: passes may run (before, they would only fail). */
	dispatchSeen: boolean;
	/** When each moving driver last reported its position (real ms). */
	lastReport: Map<string, number>;
	/** Rides a driver was spawned for, and when (real ms): spawn at most one per ride per spawn interval. */
	spawnedFor: Map<string, number>;
	/** Drivers with an action in flight from this instance. */
	busy: Set<string>;
}

interface FleetMethods {
	trouble(message: string): void;
	kick(): void;
	tick(): Promise<void>;
	tickPass(): Promise<void>;
	runPass(): Promise<void>;
	seed(): Promise<number>;
	seedLoop(): Promise<void>;
	bringOnline(driver: SeedDriver): Promise<DriverView>;
	register(driver: SeedDriver): Promise<DriverView>;
	placeNear(ride: SimSearching): Promise<{ driver: DriverView; spawned: boolean } | null>;
	act(driverId: string, what: string, fn: () => Promise<unknown>): Promise<void>;
	asDriver<T>(driverId: string, action: string, params: object): Promise<T>;
	reportAt(driverId: string, location: DriverPosition): Promise<DriverView>;
	rideAction(ride: SimRide, step: SimStep, nowMs: number): Promise<void>;
}

type FleetThis = Service<FleetSettings> & FleetMethods & FleetLocal;

/** A ride still searching after this long (real ms) with no driver in reach gets another spawned driver. */
const RESPAWN_AFTER_MS = 10_000;
/** When every spawn slot tried was busy (SIM_MAX_DRIVERS reached), try again after this long (real ms). */
const RETRY_FULL_MS = 1000;

function shortError(err: unknown): string {
	const e = err as { type?: string; message?: string };
	return `${e?.type ?? "ERROR"}: ${e?.message ?? String(err)}`;
}

/** Another driver, instance or the partner moved first: expected under races, not a failure. */
function isRace(err: unknown): boolean {
	const e = err as { code?: number; type?: string };
	return e?.code === 409 || e?.type === "CONFLICT" || e?.type === "INVALID_TRANSITION" || e?.type === "DRIVER_NOT_AVAILABLE";
}

async function inBatches<T>(items: T[], size: number, fn: (item: T) => Promise<unknown>): Promise<void> {
	for (let i = 0; i < items.length; i += size) await Promise.allSettled(items.slice(i, i + size).map(fn));
}

const FleetService: ServiceSchema<FleetSettings, FleetMethods, FleetLocal> = {
	name: "fleet",

	actions: {
		/** What the simulator is doing. REPL: `call fleet.status` */
		status: {
			access: "internal",
			handler(this: FleetThis) {
				return {
					mode: this.settings.fleetMode,
					simSpeed: this.settings.simSpeed,
					cities: this.settings.simCities,
					driversPerCity: this.settings.driversPerCity,
					maxDrivers: this.settings.maxDrivers,
					seeded: this.seeded,
					busyDrivers: this.busy.size,
				};
			},
		},

		/**
		 * One step of a manual sandbox ride, as its driver (orders calls it for
		 * POST /ride/sandbox/advance; sandbox-driver.ts).
		 * REPL: `call fleet.sandboxStep --orderId ord_… --step accept`
		 */
		sandboxStep: {
			access: "internal",
			params: sandboxStepParams,
			async handler(this: FleetThis, ctx: Context<SandboxStepParams>) {
				if (this.settings.fleetMode !== "simulated") throw new ApiError("SANDBOX_UNAVAILABLE", "The simulated fleet is not running (FLEET_MODE=live)");
				const driver = new SandboxDriver({
					// Through the broker, not ctx: the partner's call meta must not travel into the driver actions.
					call: (action, params) => this.broker.call(action, params),
					asDriver: (driverId, action, params) => this.asDriver(driverId, action, params),
					reportAt: (driverId, location) => this.reportAt(driverId, location),
					placeNear: (ride) => this.placeNear(ride),
				});
				await driver.take(ctx.params.orderId, ctx.params.step);
				return { ok: true };
			},
		},

		/** Seeds (again) now; idempotent: known drivers are not registered twice. REPL: `call fleet.seed` */
		seed: {
			access: "internal",
			async handler(this: FleetThis) {
				if (this.settings.fleetMode !== "simulated") return { seeded: 0, mode: this.settings.fleetMode };
				return { seeded: await this.seed(), mode: this.settings.fleetMode };
			},
		},
	},

	events: {
		/** An offer to one of ours: answer it without waiting for the next pass. */
		[DISPATCH_EVENTS.offerCreated]: {
			handler(this: FleetThis, ctx: Context<Pick<OfferCreatedEvent, "simulated">>) {
				if (ctx.params.simulated) this.kick();
			},
		},
		/** A new ride may need a spawned driver. */
		[ORDER_EVENTS.created]: {
			handler(this: FleetThis) {
				this.kick();
			},
		},
	},

	methods: {
		/** Warnings, except while the broker is stopping (peers going away then is expected). */
		trouble(this: FleetThis, message: string) {
			if (this.stopping || !this.broker.started) this.logger.debug(message);
			else this.logger.warn(message);
		},

		kick(this: FleetThis) {
			if (this.settings.fleetMode !== "simulated") return;
			this.ticker.kick();
		},

		async tick(this: FleetThis) {
			return this.ticker.run();
		},

		/** One pass of a tick; a failed pass is only noted (the next one tries again). */
		async tickPass(this: FleetThis) {
			try {
				await this.runPass();
			} catch (err) {
				// Dispatch not reachable yet (starting, restarting): the next pass tries again.
				this.logger.debug(`Fleet pass: ${shortError(err)}`);
			}
		},

		/** One look at everything the simulated drivers must do now, and doing it. */
		async runPass(this: FleetThis) {
			// Not before dispatch was seen once (at start it may still be starting, here or elsewhere).
			if (this.seeding && !this.dispatchSeen) return;
			const work = await this.broker.call<SimulatedWork>("dispatch.simulatedWork");
			if (this.stopping) return;
			const now = Date.parse(work.serverTime);
			const tasks: Array<() => Promise<void>> = [];

			for (const offer of work.offers) {
				if (offerStep(offer, now, this.settings).kind !== "accept") continue;
				tasks.push(() =>
					this.act(offer.driverId, "accept", () =>
						this.asDriver(offer.driverId, "driverAccept", { orderId: offer.orderId } satisfies DriverOrderParams),
					),
				);
			}

			const interval = reportIntervalMs(this.settings);
			const moving = new Set<string>();
			for (const ride of work.rides) {
				moving.add(ride.driverId);
				const step = rideStep(ride, now, this.settings);
				if (step.kind === "wait") continue;
				if (step.kind === "report") {
					const last = this.lastReport.get(ride.driverId) ?? 0;
					if (Date.now() - last < interval) continue;
				}
				tasks.push(() => this.rideAction(ride, step, now));
			}
			// Forget drivers that are no longer on a ride.
			for (const id of this.lastReport.keys()) if (!moving.has(id)) this.lastReport.delete(id);

			const realNow = Date.now();
			for (const ride of work.searching) {
				if (ride.hasCandidate || ride.sandbox === "no_driver_found") continue;
				const last = this.spawnedFor.get(ride.orderId);
				if (last !== undefined && realNow - last < RESPAWN_AFTER_MS) continue;
				this.spawnedFor.set(ride.orderId, realNow);
				tasks.push(async () => {
					try {
						const placed = await this.placeNear(ride);
						if (!placed) {
							this.logger.debug(`No simulated ${ride.serviceType} driver free for ${ride.orderId} (SIM_MAX_DRIVERS ${this.settings.maxDrivers})`);
							// Every slot tried is busy: look again in a second (a ride may end meanwhile).
							this.spawnedFor.set(ride.orderId, Date.now() - RESPAWN_AFTER_MS + RETRY_FULL_MS);
						} else
							this.logger.info(
								`${placed.spawned ? "Spawned" : "Moved"} simulated ${ride.serviceType} driver ${placed.driver.driverId} near the pickup of ${ride.orderId}`,
							);
					} catch (err) {
						this.spawnedFor.delete(ride.orderId);
						this.trouble(`Spawning a driver for ${ride.orderId}: ${shortError(err)}`);
					}
				});
			}
			if (this.spawnedFor.size > 10_000) this.spawnedFor.clear();

			await inBatches(tasks, 16, (task) => task());
		},

		async rideAction(this: FleetThis, ride: SimRide, step: SimStep, nowMs: number) {
			const { driverId, orderId } = ride;
			switch (step.kind) {
				case "report":
					this.lastReport.set(driverId, Date.now());
					return this.act(driverId, "location", () => this.reportAt(driverId, step.location));
				case "arrive":
					// The step with where the driver is (one call, as a driver app does).
					return this.act(driverId, "arrived", () => {
						const { lat, lng, heading } = step.location;
						return this.asDriver(driverId, "driverArrived", { orderId, location: { lat, lng, heading } } satisfies DriverArrivedParams);
					});
				case "dropOut":
					return this.act(driverId, "cancel", async () => {
						await this.reportAt(driverId, step.location);
						await this.asDriver(driverId, "driverCancel", { orderId, reason: "sandbox: driver_drop_out" } satisfies DriverCancelParams);
					});
				case "start":
					return this.act(driverId, "start", async () => {
						// The rider tells a real driver the OTP; the simulator asks orders in the rider's place.
						const { otp } = await this.broker.call<RiderOtpResult, OrderIdParams>("orders.riderOtp", { orderId });
						await this.asDriver(driverId, "driverStart", { orderId, otp } satisfies DriverStartParams);
					});
				case "drop":
					return this.act(driverId, "drop", async () => {
						await this.reportAt(driverId, step.location);
						await this.asDriver(driverId, "driverDrop", { orderId } satisfies DriverOrderParams);
					});
				default:
					void nowMs;
			}
		},

		/** A driver-API action as the driver: the driver in `meta.driverId`, as the gateway's `/driver` route sets it from the token. */
		asDriver<T>(this: FleetThis, driverId: string, action: string, params: object): Promise<T> {
			return this.broker.call<T, object>(`dispatch.${action}`, params, { meta: { driverId } });
		},

		/** POST /driver/location with one fix. */
		reportAt(this: FleetThis, driverId: string, location: DriverPosition): Promise<DriverView> {
			return this.asDriver<DriverView>(driverId, "driverReportLocations", {
				locations: [{ lat: location.lat, lng: location.lng, heading: location.heading }],
			} satisfies DriverLocationsParams);
		},

		/** One driver action at a time per driver (from this instance); races with other instances are fine. */
		async act(this: FleetThis, driverId: string, what: string, fn: () => Promise<unknown>) {
			if (this.busy.has(driverId) || this.stopping) return;
			this.busy.add(driverId);
			try {
				await fn();
			} catch (err) {
				if (isRace(err)) this.logger.debug(`Simulated ${what} by ${driverId}: ${shortError(err)}`);
				else this.trouble(`Simulated ${what} by ${driverId} failed: ${shortError(err)}`);
			} finally {
				this.busy.delete(driverId);
			}
		},

		/**
		 * A driver near a pickup nobody can reach, within the bound: a few random
		 * spawn slots are tried; a free slot registers a new driver there, a
		 * taken one whose driver is idle (offline or available, of the ride's
		 * type) is moved there. Null when every slot tried is busy.
		 */
		async placeNear(this: FleetThis, ride: SimSearching) {
			for (const slot of pickSlots(spawnSlots(this.settings), 8)) {
				if (this.stopping) return null;
				const d = spawnDriver(slot, ride.pickup, ride.serviceType);
				const driver = await this.register(d);
				if (driver.serviceType !== ride.serviceType || this.busy.has(driver.driverId)) continue;
				if (driver.status !== "offline" && driver.status !== "available") continue;
				const spawned = driver.location === null;
				const moved = await this.asDriver<DriverView>(driver.driverId, "driverGoOnline", {
					location: { lat: d.home.lat, lng: d.home.lng, heading: 0 },
				} satisfies DriverOnlineParams);
				return { driver: moved, spawned };
			}
			return null;
		},

		/** Registers a simulated driver: a `test` driver, idempotent by phone. */
		register(this: FleetThis, d: SeedDriver): Promise<DriverView> {
			return this.broker.call<DriverView, RegisterParams>("dispatch.register", {
				name: d.name,
				phone: d.phone,
				vehicleNumber: d.vehicleNumber,
				serviceType: d.serviceType,
				simulated: true,
				mode: "test",
			});
		},

		/** Registers (idempotent by phone) and, when offline, brings the driver online at its home position. */
		async bringOnline(this: FleetThis, d: SeedDriver): Promise<DriverView> {
			const driver = await this.register(d);
			if (driver.status !== "offline") return driver;
			return this.asDriver<DriverView>(driver.driverId, "driverGoOnline", {
				location: { lat: d.home.lat, lng: d.home.lng, heading: 0 },
			} satisfies DriverOnlineParams);
		},

		/** Seeded drivers: `FLEET_DRIVERS_PER_CITY` of each type around each city centre. */
		async seed(this: FleetThis): Promise<number> {
			const all: SeedDriver[] = [];
			this.settings.simCities.forEach((city, i) => {
				for (const type of SERVICE_TYPES) {
					for (let n = 0; n < this.settings.driversPerCity; n++) all.push(seedDriver(i, city, type, n, this.settings.seedRadiusM));
				}
			});
			let failures = 0;
			await inBatches(all, 8, async (d) => {
				if (this.stopping) return;
				try {
					await this.bringOnline(d);
				} catch (err) {
					failures++;
					throw err;
				}
			});
			if (failures > 0) throw new Error(`${failures} of ${all.length} simulated drivers could not be seeded`);
			return all.length;
		},

		/** Seeds once dispatch is reachable, retrying until it worked (dispatch may start later or elsewhere). */
		async seedLoop(this: FleetThis) {
			while (!this.stopping) {
				try {
					await this.broker.waitForServices(["dispatch"], 2000);
					this.dispatchSeen = true;
				} catch {
					continue; // not there yet; look again (and notice a stop) every 2 s
				}
				try {
					if (this.stopping) return;
					this.seeded = await this.seed();
					this.logger.info(
						`Simulated fleet seeded: ${this.seeded} drivers around ${this.settings.simCities.length} cities (SIM_SPEED ${this.settings.simSpeed})`,
					);
					this.kick();
					return;
				} catch (err) {
					this.trouble(`Seeding the simulated fleet: ${shortError(err)}; retrying`);
					await new Promise((resolve) => setTimeout(resolve, 2000).unref());
				}
			}
		},
	},

	created(this: FleetThis) {
		useServiceSettings(this, readFleetSettings);
		this.timers = [];
		this.ticker = new CoalescedPass(
			() => this.tickPass(),
			() => this.stopping,
		);
		this.seeding = null;
		this.seeded = 0;
		this.stopping = false;
		this.dispatchSeen = false;
		this.lastReport = new Map();
		this.spawnedFor = new Map();
		this.busy = new Set();
	},

	started(this: FleetThis) {
		if (this.settings.fleetMode !== "simulated") {
			this.logger.info("Fleet mode is live: the simulator stays idle (rides move only through driver actions)");
			return;
		}
		// Not awaited: dispatch may run in another process that starts later.
		this.seeding = this.seedLoop();
		const timer = setInterval(() => {
			if (!this.stopping) void this.tick();
		}, this.settings.tickMs);
		timer.unref();
		this.timers.push(timer);
	},

	async stopped(this: FleetThis) {
		this.stopping = true;
		for (const timer of this.timers) clearInterval(timer);
		this.timers = [];
		await Promise.allSettled([this.ticker.current, this.seeding].filter(Boolean));
	},
};

export default FleetService;
