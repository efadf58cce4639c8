import { randomBytes } from "node:crypto";
import type { Context, Service, ServiceSchema } from "moleculer";
import { QueryTypes, type Transaction } from "sequelize";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { ApiError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { bearingDegrees, haversineMeters, type LatLng } from "../../lib/geo";
import { migrations } from "./migrations";
import { readDispatchSettings, SERVICE_TYPES, type DispatchSettings, type ServiceType } from "./dispatch.settings";
import { CellIndex } from "./spatial-index";
import { CoalescedPass } from "./coalesced-pass";
import {
	etaBetween,
	etaSeconds,
	followOrder,
	isMovingStatus,
	isTerminalStatus,
	legTarget,
	sandboxScenario,
	type RidePhase,
	type SandboxScenario,
} from "./dispatch-rules";
import type {
	DriverJob,
	DriverLocation,
	DriverStatus,
	DriverView,
	NearbyDriver,
	SimulatedWork,
	SupplyDemandReply,
} from "./types";

/**
 * Dispatch: the drivers, their offers, matching rides to the nearest
 * available driver, and following each ride until it ends.
 *
 * - The driver side of the product is this service's `internal` actions (no
 *   driver app is part of it): register, go online/offline, report location,
 *   accept/decline an offer, arrive, start (with the rider's OTP), drop, drop
 *   out. They are callable from the REPL (examples on each action) and are
 *   never mapped on the partner gateway. The simulated fleet (fleet.service)
 *   drives its drivers through exactly these actions.
 * - Every status change goes through `orders.transition` (the state machine
 *   and the event row, in one transaction). Dispatch keeps its own view of
 *   each ride in `dispatch_rides` and makes it follow the order's truth.
 * - Claims are conditional updates in PostgreSQL (`… WHERE status =
 *   'available'`), so any number of dispatch instances can run: the database
 *   decides who gets a driver. All progress (offers, deadlines, phases) is in
 *   tables, so a restarted or another instance carries on with any ride.
 * - The nearest-driver index (H3 cells) is a per-instance cache of the driver
 *   table, rebuilt at start and kept fresh by `dispatch.driverChanged`
 *   broadcasts plus a periodic re-read of recently changed drivers.
 */

// ---------- Shapes of the orders service we use (its actions, docs/ARCHITECTURE.md) ----------

interface OrderDriver {
	id: string;
	name: string;
	phone: string;
	vehicleNumber: string;
	location?: { lat: number; lng: number; heading?: number } | null;
}

/** The fields of `orders.get`'s InternalOrder that dispatch reads. */
interface OrderView {
	orderId: string;
	status: string;
	serviceType: ServiceType;
	pickup: LatLng;
	drop: LatLng;
	driver: OrderDriver | null;
	metadata: Record<string, unknown> | null;
	location?: { lat: number; lng: number; heading?: number } | null;
	version: number;
	createdAt: string;
	updatedAt: string;
}

interface TransitionParams {
	orderId: string;
	to: string;
	from?: string;
	driver?: { id: string; name?: string; phone?: string; vehicleNumber?: string };
	location?: DriverLocation;
	eta?: number;
	otp?: string;
	reason?: string;
}

// ---------- Rows ----------

interface DriverRow {
	id: string;
	name: string;
	phone: string;
	vehicle_number: string;
	service_type: ServiceType;
	status: DriverStatus;
	order_id: string | null;
	lat: number | null;
	lng: number | null;
	heading: number | null;
	location_at: Date | null;
	simulated: boolean;
	wrong_otp_count: number;
	rev: string | number;
}

interface RideRow {
	order_id: string;
	service_type: ServiceType;
	pickup_lat: number;
	pickup_lng: number;
	drop_lat: number;
	drop_lng: number;
	state: RidePhase;
	order_status: string;
	order_version: number;
	order_updated_at: Date | null;
	driver_id: string | null;
	sandbox: SandboxScenario | null;
	search_started_at: Date;
	next_match_at: Date;
	excluded_driver_ids: string[];
	drop_outs: number;
	phase_since: Date;
	origin_lat: number | null;
	origin_lng: number | null;
	lease_until: Date | null;
	next_location_at: Date | null;
	created_at: Date;
}

/** What the per-instance index keeps of a driver, and what `dispatch.driverChanged` carries. */
interface DriverChange {
	id: string;
	serviceType: ServiceType;
	status: DriverStatus;
	lat: number | null;
	lng: number | null;
	rev: number;
}

interface DemandItem {
	searching: boolean;
	createdMs: number;
}

// ---------- Params ----------

interface PointParam {
	lat: number;
	lng: number;
}
interface LocationParam extends PointParam {
	heading?: number;
}
interface RegisterParams {
	name: string;
	phone: string;
	vehicleNumber: string;
	serviceType: ServiceType;
	simulated?: boolean;
}
interface DriverIdParams {
	driverId: string;
}
interface GoOnlineParams extends DriverIdParams {
	location: LocationParam;
}
interface RideActionParams extends DriverIdParams {
	orderId: string;
	location?: LocationParam;
}
interface StartParams extends RideActionParams {
	otp: string;
}
interface DropOutParams extends RideActionParams {
	reason?: string;
}
interface ListDriversParams {
	status?: DriverStatus;
	serviceType?: ServiceType;
	simulated?: boolean;
	limit?: number;
	offset?: number;
}
interface NearestParams {
	point: PointParam;
	serviceType: ServiceType;
	limit?: number;
	radiusM?: number;
}
interface OrderIdParams {
	orderId: string;
}

/** The steps a driver moves its ride by itself: accepted → arrived → started → dropped. */
type DriverMoveFrom = "accepted" | "arrived" | "started";
type DriverMoveTo = "arrived" | "started" | "dropped";

// ---------- Service types ----------

interface DispatchLocal {
	cfg: DispatchSettings;
	available: Record<ServiceType, CellIndex<null>>;
	driverRevs: Map<string, number>;
	demand: Record<ServiceType, CellIndex<DemandItem>>;
	timers: NodeJS.Timeout[];
	/** The tick: one at a time, a kick while it runs makes it run once more. */
	ticker: CoalescedPass;
	sweepRunning: Promise<void> | null;
	refreshRunning: Promise<void> | null;
	/** Database time of the last index refresh; the next one re-reads drivers changed since (with overlap). */
	refreshedUpTo: Date | null;
	stopping: boolean;
	startedAt: number;
	fleetWarnedAt: number;
	/** Metrics are on in this broker (METRICS_PORT > 0): count, else skip. */
	metricsOn: boolean;
}

interface DispatchMethods {
	trouble(message: string): void;
	q<T extends object>(sql: string, bind?: unknown[], t?: Transaction): Promise<T[]>;
	tx<T>(fn: (t: Transaction) => Promise<T>): Promise<T>;
	loadDriver(driverId: string, t?: Transaction): Promise<DriverRow>;
	publishDrivers(rows: DriverRow[]): void;
	applyDriverChange(change: DriverChange): void;
	rebuildIndex(): Promise<void>;
	refreshIndex(): Promise<void>;
	refreshDemand(): Promise<void>;
	setDriverLocation(driverId: string, location: LocationParam): Promise<DriverRow>;
	getOrder(orderId: string, ctx?: Context): Promise<OrderView | null>;
	transition(params: TransitionParams, ctx?: Context): Promise<OrderView>;
	applyOrder(order: OrderView, opts?: { abandonInFlight?: boolean }): Promise<void>;
	reconcileOrder(orderId: string, opts?: { abandonInFlight?: boolean }): Promise<void>;
	afterRefusal(orderId: string, err: unknown): Promise<void>;
	declineOffer(driverId: string, orderId: string, excludeReason: "declined" | "expired" | "cancelled"): Promise<boolean>;
	requireOnRide(driverId: string, orderId: string, location?: LocationParam): Promise<{ driver: DriverRow; ride: RideRow }>;
	moveRide(ctx: Context<RideActionParams>, from: DriverMoveFrom, to: DriverMoveTo, otp?: string): Promise<DriverJob>;
	etaFor(driver: DriverRow, ride: RideRow, status: string): number | undefined;
	kick(): void;
	tick(): Promise<void>;
	tickSteps(): Promise<void>;
	expireOffers(): Promise<void>;
	matchRides(): Promise<void>;
	matchRide(orderId: string): Promise<void>;
	endRide(orderId: string): Promise<void>;
	sendLocations(): Promise<void>;
	sweep(): Promise<void>;
	updateDriverGauges(): Promise<void>;
	supplyDemandAt(point: LatLng): SupplyDemandReply;
	candidates(pickup: LatLng, serviceType: ServiceType, excluded: Set<string>, t: Transaction): Promise<Array<{ driverId: string }>>;
}

type DispatchThis = Service<Record<string, never>> & DispatchMethods & DispatchLocal & DbThis;

// ---------- Metrics (docs/OPERATIONS.md, "Metrics") ----------

const METRIC_OFFERS_MADE = "dispatch.offers.made.total";
const METRIC_OFFERS_ENDED = "dispatch.offers.ended.total";
const METRIC_MATCHED = "dispatch.rides.matched.total";
const METRIC_NO_DRIVER = "dispatch.rides.no_driver_found.total";
const METRIC_MATCH_TIME = "dispatch.match.time";
const METRIC_DRIVERS = "dispatch.drivers.count";
const METRIC_WRONG_OTP = "dispatch.otp.wrong.total";

const DRIVER_STATUSES: DriverStatus[] = ["offline", "available", "offered", "on_trip"];

// ---------- Helpers ----------

const driverNotFound = (): ApiError => new ApiError(404, "DRIVER_NOT_FOUND", "Driver not found");

/** Errors of orders that mean "it decided no" (as opposed to "it did not answer"). */
const DEFINITIVE_ORDER_ERRORS = new Set(["CONFLICT", "INVALID_TRANSITION", "ORDER_NOT_FOUND", "RIDE_NOT_ACTIVE", "INVALID_OTP", "VALIDATION_ERROR"]);

function isDefinitiveRefusal(err: unknown): boolean {
	const e = err as { code?: number; type?: string };
	return typeof e?.code === "number" && e.code >= 400 && e.code < 500 && typeof e.type === "string" && DEFINITIVE_ORDER_ERRORS.has(e.type);
}

function errorType(err: unknown): string | undefined {
	return (err as { type?: string })?.type;
}

function shortError(err: unknown): string {
	const e = err as { type?: string; message?: string };
	return `${e?.type ?? "ERROR"}: ${e?.message ?? String(err)}`;
}

function offerId(): string {
	return `ofr_${randomBytes(12).toString("hex")}`;
}

function locationOf(row: DriverRow): DriverLocation | null {
	if (row.lat === null || row.lng === null) return null;
	return { lat: row.lat, lng: row.lng, heading: Math.round(row.heading ?? 0) % 360 };
}

function toDriverView(row: DriverRow): DriverView {
	return {
		driverId: row.id,
		name: row.name,
		phone: row.phone,
		vehicleNumber: row.vehicle_number,
		serviceType: row.service_type,
		status: row.status,
		orderId: row.order_id,
		location: locationOf(row),
		locationAt: row.location_at ? new Date(row.location_at).toISOString() : null,
		simulated: row.simulated,
		wrongOtpCount: row.wrong_otp_count,
	};
}

function toChange(row: DriverRow): DriverChange {
	return { id: row.id, serviceType: row.service_type, status: row.status, lat: row.lat, lng: row.lng, rev: Number(row.rev) };
}

const pickupOf = (r: RideRow): LatLng => ({ lat: r.pickup_lat, lng: r.pickup_lng });
const dropOf = (r: RideRow): LatLng => ({ lat: r.drop_lat, lng: r.drop_lng });

/** The order snapshot is older than what dispatch already applied (events and sweeps race). */
function isStale(order: OrderView, ride: RideRow): boolean {
	if (order.version < ride.order_version) return true;
	if (order.version > ride.order_version || !ride.order_updated_at) return false;
	return Date.parse(order.updatedAt) < new Date(ride.order_updated_at).getTime();
}

const pointSchema = {
	type: "object",
	strict: "remove",
	props: {
		lat: { type: "number", min: -90, max: 90 },
		lng: { type: "number", min: -180, max: 180 },
	},
} as const;
const locationSchema = {
	type: "object",
	strict: "remove",
	props: {
		lat: { type: "number", min: -90, max: 90 },
		lng: { type: "number", min: -180, max: 180 },
		heading: { type: "number", min: 0, max: 360, optional: true },
	},
} as const;
const driverIdSchema = { type: "string", pattern: /^drv_[a-z0-9]{1,64}$/ } as const;
const orderIdSchema = { type: "string", min: 1, max: 100 } as const;
const serviceTypeSchema = { type: "enum", values: ["scooty", "cab"] } as const;

const DispatchService: ServiceSchema<Record<string, never>, DispatchMethods, DispatchLocal & DbThis> = {
	name: "dispatch",
	mixins: [DbMixin({ service: "dispatch", migrations })],

	actions: {
		/**
		 * Registers a driver (offline until it goes online). Idempotent by phone:
		 * registering a known phone again returns that driver unchanged.
		 * REPL: `call dispatch.register --name "Ravi K" --phone +919800000001 --vehicleNumber KA01AB1234 --serviceType cab`
		 */
		register: {
			access: "internal",
			params: {
				name: { type: "string", min: 1, max: 200, trim: true, convert: true },
				phone: { type: "string", pattern: /^\+[1-9][0-9]{6,14}$/ },
				vehicleNumber: { type: "string", min: 1, max: 32, trim: true, convert: true },
				serviceType: serviceTypeSchema,
				simulated: { type: "boolean", optional: true },
			},
			async handler(this: DispatchThis, ctx: Context<RegisterParams>): Promise<DriverView> {
				const p = ctx.params;
				const inserted = await this.q<DriverRow>(
					`INSERT INTO drivers (id, name, phone, vehicle_number, service_type, simulated)
					 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (phone) DO NOTHING RETURNING *`,
					[newId("drv"), p.name, p.phone, p.vehicleNumber, p.serviceType, p.simulated ?? false],
				);
				if (inserted[0]) return toDriverView(inserted[0]);
				const existing = await this.q<DriverRow>("SELECT * FROM drivers WHERE phone = $1", [p.phone]);
				if (!existing[0]) throw new ApiError(409, "CONFLICT", "Driver registration raced; try again");
				return toDriverView(existing[0]);
			},
		},

		/**
		 * The driver starts taking rides at `location`. Going online again while
		 * online (or busy) only updates the location.
		 * REPL: `call dispatch.goOnline --driverId drv_… --location.lat 12.9716 --location.lng 77.5946 --location.heading 90`
		 */
		goOnline: {
			access: "internal",
			params: { driverId: driverIdSchema, location: locationSchema },
			async handler(this: DispatchThis, ctx: Context<GoOnlineParams>): Promise<DriverView> {
				const { driverId, location } = ctx.params;
				const rows = await this.q<DriverRow>(
					`UPDATE drivers SET status = CASE WHEN status = 'offline' THEN 'available' ELSE status END,
						lat = $2, lng = $3, heading = COALESCE($4, heading, 0), location_at = now(),
						rev = rev + 1, updated_at = clock_timestamp()
					 WHERE id = $1 RETURNING *`,
					[driverId, location.lat, location.lng, location.heading ?? null],
				);
				if (!rows[0]) throw driverNotFound();
				this.publishDrivers(rows);
				this.kick();
				return toDriverView(rows[0]);
			},
		},

		/**
		 * The driver stops taking rides. A pending offer is declined first; a
		 * driver on a ride must drop it (or drop out) before going offline.
		 * REPL: `call dispatch.goOffline --driverId drv_…`
		 */
		goOffline: {
			access: "internal",
			params: { driverId: driverIdSchema },
			async handler(this: DispatchThis, ctx: Context<DriverIdParams>): Promise<DriverView> {
				const { driverId } = ctx.params;
				for (let attempt = 0; attempt < 5; attempt++) {
					const driver = await this.loadDriver(driverId);
					if (driver.status === "on_trip") {
						throw new ApiError(409, "DRIVER_NOT_AVAILABLE", "The driver is on a ride: drop it or drop out first");
					}
					if (driver.status === "offered" && driver.order_id) {
						await this.declineOffer(driverId, driver.order_id, "declined");
						continue;
					}
					const rows = await this.q<DriverRow>(
						`UPDATE drivers SET status = 'offline', rev = rev + 1, updated_at = clock_timestamp()
						 WHERE id = $1 AND status IN ('available','offline') RETURNING *`,
						[driverId],
					);
					if (rows[0]) {
						this.publishDrivers(rows);
						return toDriverView(rows[0]);
					}
				}
				throw new ApiError(409, "CONFLICT", "The driver's state keeps changing; try again");
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
			params: { driverId: driverIdSchema, location: locationSchema },
			async handler(this: DispatchThis, ctx: Context<GoOnlineParams>): Promise<DriverView> {
				const row = await this.setDriverLocation(ctx.params.driverId, ctx.params.location);
				return toDriverView(row);
			},
		},

		/**
		 * The driver takes the ride it was offered. Only an open (pending,
		 * unexpired) offer can be accepted; the ride becomes `accepted` with this
		 * driver through `orders.transition`. If the partner cancelled meanwhile,
		 * the answer is 409 and the driver is free again.
		 * REPL: `call dispatch.acceptOffer --driverId drv_… --orderId ord_…`
		 */
		acceptOffer: {
			access: "internal",
			params: { driverId: driverIdSchema, orderId: orderIdSchema },
			async handler(this: DispatchThis, ctx: Context<RideActionParams>): Promise<DriverJob> {
				const { driverId, orderId } = ctx.params;
				const claimed = await this.tx(async (t) => {
					const ride = (await this.q<RideRow>("SELECT * FROM dispatch_rides WHERE order_id = $1 FOR UPDATE", [orderId], t))[0];
					if (!ride) return null;
					const offer = await this.q<{ id: string }>(
						`UPDATE dispatch_offers SET state = 'accepted', responded_at = now()
						 WHERE order_id = $1 AND driver_id = $2 AND state = 'pending' AND expires_at > now() RETURNING id`,
						[orderId, driverId],
						t,
					);
					if (!offer[0]) return null;
					const driver = (
						await this.q<DriverRow>(
							`UPDATE drivers SET status = 'on_trip', rev = rev + 1, updated_at = clock_timestamp()
							 WHERE id = $1 AND status = 'offered' AND order_id = $2 RETURNING *`,
							[driverId, orderId],
							t,
						)
					)[0];
					if (!driver) return null;
					await this.q(
						`UPDATE dispatch_rides SET state = 'accepting', driver_id = $2, origin_lat = $3, origin_lng = $4,
							lease_until = now() + $5 * interval '1 millisecond', updated_at = now()
						 WHERE order_id = $1`,
						[orderId, driverId, driver.lat, driver.lng, this.cfg.transitionLeaseMs],
						t,
					);
					return { driver, ride };
				});
				if (!claimed) {
					// Nothing changed; tell the driver why.
					const driver = await this.loadDriver(driverId);
					throw new ApiError(409, "CONFLICT", driver.order_id === orderId && driver.status === "on_trip" ? "Offer already accepted" : "No open offer for this driver and ride (expired, declined or cancelled)");
				}
				this.publishDrivers([claimed.driver]);
				const { driver, ride } = claimed;
				if (this.metricsOn) this.broker.metrics.increment(METRIC_OFFERS_ENDED, { outcome: "accepted", service_type: ride.service_type });
				const location = locationOf(driver) ?? undefined;
				let order: OrderView;
				try {
					order = await this.transition(
						{
							orderId,
							from: "searching",
							to: "accepted",
							driver: { id: driver.id, name: driver.name, phone: driver.phone, vehicleNumber: driver.vehicle_number },
							location,
							eta: this.etaFor(driver, ride, "accepted"),
						},
						ctx,
					);
				} catch (err) {
					if (isDefinitiveRefusal(err)) {
						// Somebody moved first (cancel, no_driver_found): the ride is not this driver's.
						await this.afterRefusal(orderId, err);
						throw new ApiError(409, "CONFLICT", "The ride is no longer available");
					}
					// No answer: the transition may or may not have happened. The lease
					// runs out and the sweep settles it with the order's truth.
					throw err;
				}
				if (this.metricsOn) {
					this.broker.metrics.increment(METRIC_MATCHED, { service_type: ride.service_type });
					const waitedS = (Date.now() - Date.parse(order.createdAt)) / 1000;
					if (Number.isFinite(waitedS)) this.broker.metrics.observe(METRIC_MATCH_TIME, Math.max(0, waitedS), { service_type: ride.service_type });
				}
				await this.applyOrder(order, { abandonInFlight: true });
				return {
					driver: toDriverView(await this.loadDriver(driverId)),
					offer: null,
					ride: { orderId, status: order.status, pickup: pickupOf(ride), drop: dropOf(ride) },
				};
			},
		},

		/**
		 * The driver turns an offer down; the ride is offered to the next driver
		 * (never to this one again).
		 * REPL: `call dispatch.declineOffer --driverId drv_… --orderId ord_…`
		 */
		declineOffer: {
			access: "internal",
			params: { driverId: driverIdSchema, orderId: orderIdSchema },
			async handler(this: DispatchThis, ctx: Context<RideActionParams>): Promise<DriverView> {
				const { driverId, orderId } = ctx.params;
				const declined = await this.declineOffer(driverId, orderId, "declined");
				if (!declined) {
					await this.loadDriver(driverId);
					throw new ApiError(409, "CONFLICT", "No open offer for this driver and ride");
				}
				return toDriverView(await this.loadDriver(driverId));
			},
		},

		/**
		 * The driver is at the pickup (`accepted → arrived`).
		 * REPL: `call dispatch.arrive --driverId drv_… --orderId ord_…`
		 */
		arrive: {
			access: "internal",
			params: { driverId: driverIdSchema, orderId: orderIdSchema, location: { ...locationSchema, optional: true } },
			async handler(this: DispatchThis, ctx: Context<RideActionParams>): Promise<DriverJob> {
				return this.moveRide(ctx, "accepted", "arrived");
			},
		},

		/**
		 * The rider is in: `arrived → started`, only with the rider's OTP. A wrong
		 * OTP is refused by orders (422 INVALID_OTP) and counted on the driver.
		 * (The REPL turns `--otp 4821` into a number; it is taken as the string.)
		 * REPL: `call dispatch.startRide --driverId drv_… --orderId ord_… --otp 4821`
		 */
		startRide: {
			access: "internal",
			params: { driverId: driverIdSchema, orderId: orderIdSchema, otp: { type: "string", min: 1, max: 16, convert: true }, location: { ...locationSchema, optional: true } },
			async handler(this: DispatchThis, ctx: Context<StartParams>): Promise<DriverJob> {
				return this.moveRide(ctx, "arrived", "started", ctx.params.otp);
			},
		},

		/**
		 * The ride is over at the drop (`started → dropped`); the driver is
		 * available again.
		 * REPL: `call dispatch.dropRide --driverId drv_… --orderId ord_…`
		 */
		dropRide: {
			access: "internal",
			params: { driverId: driverIdSchema, orderId: orderIdSchema, location: { ...locationSchema, optional: true } },
			async handler(this: DispatchThis, ctx: Context<RideActionParams>): Promise<DriverJob> {
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
			access: "internal",
			params: { driverId: driverIdSchema, orderId: orderIdSchema, reason: { type: "string", max: 200, optional: true }, location: { ...locationSchema, optional: true } },
			async handler(this: DispatchThis, ctx: Context<DropOutParams>): Promise<DriverView> {
				const { driverId, orderId, reason } = ctx.params;
				const { ride } = await this.requireOnRide(driverId, orderId, ctx.params.location);
				let from = ride.order_status;
				let order: OrderView | undefined;
				for (let attempt = 0; attempt < 2 && !order; attempt++) {
					if (from !== "accepted" && from !== "arrived") {
						throw new ApiError(409, "INVALID_TRANSITION", `A driver can only drop out before the ride started (it is ${from})`);
					}
					try {
						// `driver.id`: orders applies the drop-out only while this driver is still the ride's driver.
						order = await this.transition({ orderId, from, to: "searching", driver: { id: driverId }, reason: reason ?? "driver dropped out" }, ctx);
					} catch (err) {
						if (errorType(err) !== "CONFLICT") {
							if (isDefinitiveRefusal(err)) await this.afterRefusal(orderId, err);
							throw err;
						}
						// Our view was behind (e.g. arrived a moment ago): ask orders and try once more.
						const current = await this.getOrder(orderId, ctx);
						if (!current || current.driver?.id !== driverId) {
							if (current) await this.applyOrder(current);
							throw new ApiError(409, "CONFLICT", "The driver is no longer on this ride");
						}
						from = current.status;
					}
				}
				if (!order) throw new ApiError(409, "CONFLICT", "The ride kept changing; try again");
				await this.applyOrder(order, { abandonInFlight: true });
				this.kick();
				return toDriverView(await this.loadDriver(driverId));
			},
		},

		/**
		 * A driver and its current job (pending offer or ride), as a driver app shows it.
		 * REPL: `call dispatch.driver --driverId drv_…`
		 */
		driver: {
			access: "internal",
			params: { driverId: driverIdSchema },
			async handler(this: DispatchThis, ctx: Context<DriverIdParams>): Promise<DriverJob> {
				const driver = await this.loadDriver(ctx.params.driverId);
				const job: DriverJob = { driver: toDriverView(driver), offer: null, ride: null };
				if (driver.status === "offered") {
					const rows = await this.q<RideRow & { expires_at: Date; distance_m: number; eta: number }>(
						`SELECT r.*, o.expires_at, o.distance_m, o.eta FROM dispatch_offers o JOIN dispatch_rides r ON r.order_id = o.order_id
						 WHERE o.driver_id = $1 AND o.state = 'pending'`,
						[driver.id],
					);
					const r = rows[0];
					if (r) job.offer = { orderId: r.order_id, expiresAt: new Date(r.expires_at).toISOString(), pickup: pickupOf(r), drop: dropOf(r), distanceM: r.distance_m, eta: r.eta };
				} else if (driver.status === "on_trip" && driver.order_id) {
					const r = (await this.q<RideRow>("SELECT * FROM dispatch_rides WHERE order_id = $1", [driver.order_id]))[0];
					if (r) job.ride = { orderId: r.order_id, status: r.order_status, pickup: pickupOf(r), drop: dropOf(r) };
				}
				return job;
			},
		},

		/**
		 * Operators: drivers, newest first, optionally filtered.
		 * REPL: `call dispatch.listDrivers --status available --serviceType cab --limit 20`
		 */
		listDrivers: {
			access: "internal",
			params: {
				status: { type: "enum", values: ["offline", "available", "offered", "on_trip"], optional: true },
				serviceType: { ...serviceTypeSchema, optional: true },
				simulated: { type: "boolean", optional: true, convert: true },
				limit: { type: "number", integer: true, min: 1, max: 1000, optional: true, convert: true },
				offset: { type: "number", integer: true, min: 0, optional: true, convert: true },
			},
			async handler(this: DispatchThis, ctx: Context<ListDriversParams>): Promise<DriverView[]> {
				const p = ctx.params;
				const rows = await this.q<DriverRow>(
					`SELECT * FROM drivers
					 WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR service_type = $2) AND ($3::boolean IS NULL OR simulated = $3)
					 ORDER BY created_at DESC, id LIMIT $4 OFFSET $5`,
					[p.status ?? null, p.serviceType ?? null, p.simulated ?? null, p.limit ?? 100, p.offset ?? 0],
				);
				return rows.map(toDriverView);
			},
		},

		/**
		 * The nearest available drivers of a type around a point (from this
		 * instance's index), nearest first.
		 * REPL: `call dispatch.nearestDrivers --point.lat 12.97 --point.lng 77.59 --serviceType cab --limit 5`
		 */
		nearestDrivers: {
			access: "internal",
			params: {
				point: pointSchema,
				serviceType: serviceTypeSchema,
				limit: { type: "number", integer: true, min: 1, max: 100, optional: true, convert: true },
				radiusM: { type: "number", min: 1, max: 100_000, optional: true, convert: true },
			},
			handler(this: DispatchThis, ctx: Context<NearestParams>): NearbyDriver[] {
				const { point, serviceType } = ctx.params;
				const found = this.available[serviceType].nearest(point, { limit: ctx.params.limit ?? 5, radiusM: ctx.params.radiusM ?? this.cfg.searchRadiusM });
				return found.map((n) => ({
					driverId: n.id,
					distanceM: Math.round(n.distanceM),
					eta: etaSeconds(n.distanceM, this.cfg.speedsKmh[serviceType], this.cfg.roadFactor),
					location: n.point,
				}));
			},
		},

		/**
		 * Pricing's input per service type around a point: `eta` of the nearest
		 * available driver (null when none within the search radius), available
		 * drivers and demand (searching or recent ride requests) within the supply
		 * radius. In memory only: pricing waits for it at most ~300 ms.
		 * REPL: `call dispatch.supplyDemand --point.lat 12.9716 --point.lng 77.5946`
		 */
		supplyDemand: {
			access: "internal",
			params: { point: pointSchema },
			handler(this: DispatchThis, ctx: Context<{ point: PointParam }>): SupplyDemandReply {
				return this.supplyDemandAt(ctx.params.point);
			},
		},

		/**
		 * Dispatch's view of one ride: phase, driver, offers so far (operators, tests).
		 * REPL: `call dispatch.ride --orderId ord_…`
		 */
		ride: {
			access: "internal",
			params: { orderId: orderIdSchema },
			async handler(this: DispatchThis, ctx: Context<OrderIdParams>) {
				const ride = (await this.q<RideRow>("SELECT * FROM dispatch_rides WHERE order_id = $1", [ctx.params.orderId]))[0];
				if (!ride) throw new ApiError(404, "ORDER_NOT_FOUND", "Dispatch does not know this ride");
				const offers = await this.q<{ id: string; driver_id: string; state: string; distance_m: number; eta: number; created_at: Date; expires_at: Date; responded_at: Date | null }>(
					"SELECT * FROM dispatch_offers WHERE order_id = $1 ORDER BY created_at, id",
					[ctx.params.orderId],
				);
				return {
					orderId: ride.order_id,
					serviceType: ride.service_type,
					phase: ride.state,
					orderStatus: ride.order_status,
					driverId: ride.driver_id,
					sandbox: ride.sandbox,
					dropOuts: ride.drop_outs,
					excludedDriverIds: ride.excluded_driver_ids,
					searchStartedAt: new Date(ride.search_started_at).toISOString(),
					offers: offers.map((o) => ({
						offerId: o.id,
						driverId: o.driver_id,
						state: o.state,
						distanceM: o.distance_m,
						eta: o.eta,
						createdAt: new Date(o.created_at).toISOString(),
						expiresAt: new Date(o.expires_at).toISOString(),
						respondedAt: o.responded_at ? new Date(o.responded_at).toISOString() : null,
					})),
				};
			},
		},

		/**
		 * The simulated fleet's inbox: pending offers and rides of simulated
		 * drivers (with the phase and when it began, so the simulator derives
		 * where each driver is), and searching rides with no driver in reach.
		 * REPL: `call dispatch.simulatedWork`
		 */
		simulatedWork: {
			access: "internal",
			async handler(this: DispatchThis): Promise<SimulatedWork> {
				const [nowRow] = await this.q<{ now: Date }>("SELECT now() AS now");
				const offers = await this.q<{ driver_id: string; order_id: string; created_at: Date; expires_at: Date; sandbox: SandboxScenario | null }>(
					`SELECT o.driver_id, o.order_id, o.created_at, o.expires_at, r.sandbox
					 FROM dispatch_offers o JOIN drivers d ON d.id = o.driver_id JOIN dispatch_rides r ON r.order_id = o.order_id
					 WHERE o.state = 'pending' AND d.simulated AND o.expires_at > now()`,
				);
				const rides = await this.q<RideRow>(
					`SELECT r.* FROM dispatch_rides r JOIN drivers d ON d.id = r.driver_id
					 WHERE r.state = 'assigned' AND d.simulated AND d.status = 'on_trip' AND d.order_id = r.order_id`,
				);
				const searching = await this.q<RideRow>(
					`SELECT r.* FROM dispatch_rides r WHERE r.state = 'searching'
					 AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = r.order_id AND o.state = 'pending')
					 ORDER BY r.created_at LIMIT 500`,
				);
				return {
					serverTime: new Date(nowRow.now).toISOString(),
					offers: offers.map((o) => ({
						driverId: o.driver_id,
						orderId: o.order_id,
						offeredAt: new Date(o.created_at).toISOString(),
						expiresAt: new Date(o.expires_at).toISOString(),
						sandbox: o.sandbox,
					})),
					rides: rides
						.filter((r) => r.order_status === "accepted" || r.order_status === "arrived" || r.order_status === "started")
						.map((r) => ({
							driverId: r.driver_id as string,
							orderId: r.order_id,
							serviceType: r.service_type,
							status: r.order_status as "accepted" | "arrived" | "started",
							phaseSince: new Date(r.phase_since).toISOString(),
							origin: r.origin_lat !== null && r.origin_lng !== null ? { lat: r.origin_lat, lng: r.origin_lng } : null,
							pickup: pickupOf(r),
							drop: dropOf(r),
							sandbox: r.sandbox,
							dropOuts: r.drop_outs,
						})),
					searching: searching.map((r) => {
						const excluded = new Set(r.excluded_driver_ids);
						const near = this.available[r.service_type].nearest(pickupOf(r), {
							limit: 1,
							radiusM: this.cfg.searchRadiusM,
							accept: (id) => !excluded.has(id),
						});
						return { orderId: r.order_id, serviceType: r.service_type, pickup: pickupOf(r), sandbox: r.sandbox, hasCandidate: near.length > 0 };
					}),
				};
			},
		},

		/** Operators and tests: run one matching/expiry/location pass and one sweep now. REPL: `call dispatch.runOnce` */
		runOnce: {
			access: "internal",
			async handler(this: DispatchThis) {
				await this.tick();
				await this.sweep();
				return { ok: true };
			},
		},
	},

	events: {
		/** A new ride: start matching it now (the sweep also finds rides whose event was lost). */
		"orders.created": {
			async handler(this: DispatchThis, ctx: Context<{ orderId: string }>) {
				try {
					await this.reconcileOrder(ctx.params.orderId);
					this.kick();
				} catch (err) {
					this.trouble(`orders.created ${ctx.params.orderId}: ${shortError(err)} (the sweep will pick it up)`);
				}
			},
		},
		/** The order moved (a cancel frees the driver); ignored when dispatch already knows that status. */
		"orders.statusChanged": {
			async handler(this: DispatchThis, ctx: Context<{ orderId: string; to: string }>) {
				try {
					const rows = await this.q<{ order_status: string; state: string }>("SELECT order_status, state FROM dispatch_rides WHERE order_id = $1", [ctx.params.orderId]);
					if (rows[0] && (rows[0].order_status === ctx.params.to || rows[0].state === "closed")) return;
					await this.reconcileOrder(ctx.params.orderId);
				} catch (err) {
					this.trouble(`orders.statusChanged ${ctx.params.orderId}: ${shortError(err)} (the sweep will reconcile it)`);
				}
			},
		},
		/** Another instance (or this one) changed a driver: keep the index fresh. */
		"dispatch.driverChanged": {
			handler(this: DispatchThis, ctx: Context<DriverChange>) {
				this.applyDriverChange(ctx.params);
			},
		},
	},

	methods: {
		/** Warnings, except while the broker is stopping (peers going away then is expected). */
		trouble(this: DispatchThis, message: string) {
			if (this.stopping || !this.broker.started) this.logger.debug(message);
			else this.logger.warn(message);
		},

		async q<T extends object>(this: DispatchThis, sql: string, bind: unknown[] = [], t?: Transaction): Promise<T[]> {
			return this.sequelize.query<T>(sql, { bind, type: QueryTypes.SELECT, transaction: t });
		},

		async tx<T>(this: DispatchThis, fn: (t: Transaction) => Promise<T>): Promise<T> {
			return this.sequelize.transaction((t) => fn(t));
		},

		async loadDriver(this: DispatchThis, driverId: string, t?: Transaction): Promise<DriverRow> {
			const rows = await this.q<DriverRow>("SELECT * FROM drivers WHERE id = $1", [driverId], t);
			if (!rows[0]) throw driverNotFound();
			return rows[0];
		},

		/** Applies driver changes to this instance's index and tells the other instances. */
		publishDrivers(this: DispatchThis, rows: DriverRow[]) {
			for (const row of rows) {
				const change = toChange(row);
				this.applyDriverChange(change);
				this.broker.broadcast("dispatch.driverChanged", change).catch((err: unknown) => this.logger.debug(`driverChanged broadcast: ${shortError(err)}`));
			}
		},

		applyDriverChange(this: DispatchThis, change: DriverChange) {
			const known = this.driverRevs.get(change.id);
			if (known !== undefined && known >= change.rev) return;
			this.driverRevs.set(change.id, change.rev);
			const index = this.available[change.serviceType];
			if (!index) return;
			if (change.status === "available" && change.lat !== null && change.lng !== null) index.upsert(change.id, { lat: change.lat, lng: change.lng }, null);
			else index.remove(change.id);
		},

		async rebuildIndex(this: DispatchThis) {
			const [nowRow] = await this.q<{ now: Date }>("SELECT now() AS now");
			const rows = await this.q<DriverRow>("SELECT id, service_type, status, lat, lng, rev FROM drivers WHERE status <> 'offline'");
			for (const type of SERVICE_TYPES) this.available[type].clear();
			this.driverRevs.clear();
			for (const row of rows) this.applyDriverChange(toChange(row));
			this.refreshedUpTo = nowRow.now;
			this.logger.info(`Driver index built: ${this.available.scooty.size} scooty, ${this.available.cab.size} cab available`);
		},

		/** Re-reads drivers changed since the last refresh (with overlap for late commits): catches missed broadcasts. */
		async refreshIndex(this: DispatchThis) {
			const [nowRow] = await this.q<{ now: Date }>("SELECT now() AS now");
			const since = this.refreshedUpTo ?? new Date(0);
			const rows = await this.q<DriverRow>(
				"SELECT id, service_type, status, lat, lng, rev FROM drivers WHERE updated_at > $1::timestamptz - interval '10 seconds'",
				[since.toISOString()],
			);
			for (const row of rows) this.applyDriverChange(toChange(row));
			this.refreshedUpTo = nowRow.now;
		},

		async refreshDemand(this: DispatchThis) {
			const rows = await this.q<{ order_id: string; service_type: ServiceType; pickup_lat: number; pickup_lng: number; state: string; created_ms: string }>(
				`SELECT order_id, service_type, pickup_lat, pickup_lng, state, (extract(epoch FROM created_at) * 1000)::bigint AS created_ms
				 FROM dispatch_rides WHERE state = 'searching' OR created_at > now() - $1 * interval '1 millisecond'`,
				[this.cfg.demandWindowMs],
			);
			const fresh = { scooty: new CellIndex<DemandItem>(this.cfg.h3Resolution), cab: new CellIndex<DemandItem>(this.cfg.h3Resolution) };
			for (const r of rows) fresh[r.service_type].upsert(r.order_id, { lat: r.pickup_lat, lng: r.pickup_lng }, { searching: r.state === "searching", createdMs: Number(r.created_ms) });
			this.demand = fresh;
		},

		async setDriverLocation(this: DispatchThis, driverId: string, location: LocationParam): Promise<DriverRow> {
			let heading = location.heading;
			if (heading === undefined) {
				// No heading given: face the way the driver moved (kept when it barely moved).
				const prev = await this.loadDriver(driverId);
				if (prev.lat !== null && prev.lng !== null && haversineMeters({ lat: prev.lat, lng: prev.lng }, location) > 5) {
					heading = Math.round(bearingDegrees({ lat: prev.lat, lng: prev.lng }, location)) % 360;
				}
			}
			const rows = await this.q<DriverRow>(
				`UPDATE drivers SET lat = $2, lng = $3, heading = COALESCE($4, heading, 0), location_at = now(), rev = rev + 1, updated_at = clock_timestamp()
				 WHERE id = $1 RETURNING *`,
				[driverId, location.lat, location.lng, heading ?? null],
			);
			if (!rows[0]) throw driverNotFound();
			this.publishDrivers(rows);
			return rows[0];
		},

		async getOrder(this: DispatchThis, orderId: string, ctx?: Context): Promise<OrderView | null> {
			try {
				const caller = ctx ?? this.broker;
				return await caller.call<OrderView, OrderIdParams>("orders.get", { orderId });
			} catch (err) {
				if (errorType(err) === "ORDER_NOT_FOUND") return null;
				throw err;
			}
		},

		async transition(this: DispatchThis, params: TransitionParams, ctx?: Context): Promise<OrderView> {
			const caller = ctx ?? this.broker;
			const clean: TransitionParams = { ...params };
			for (const key of Object.keys(clean) as Array<keyof TransitionParams>) if (clean[key] === undefined) delete clean[key];
			return caller.call<OrderView, TransitionParams>("orders.transition", clean);
		},

		/**
		 * Makes dispatch's view of a ride (and the drivers holding it) agree with
		 * the order, under the ride's row lock. Idempotent; an order snapshot
		 * older than the one already applied is ignored, so events, sweeps and
		 * driver actions may all call it in any order.
		 */
		async applyOrder(this: DispatchThis, order: OrderView, opts: { abandonInFlight?: boolean } = {}) {
			const changedDrivers: DriverRow[] = [];
			let searchAgain = false;
			await this.tx(async (t) => {
				let ride = (
					await this.q<RideRow>(
						"SELECT *, (lease_until IS NOT NULL AND lease_until > now()) AS lease_active FROM dispatch_rides WHERE order_id = $1 FOR UPDATE",
						[order.orderId],
						t,
					)
				)[0] as (RideRow & { lease_active: boolean }) | undefined;
				if (!ride) {
					if (isTerminalStatus(order.status)) {
						changedDrivers.push(
							...(await this.q<DriverRow>(
								"UPDATE drivers SET status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp() WHERE order_id = $1 RETURNING *",
								[order.orderId],
								t,
							)),
						);
						return;
					}
					await this.q(
						`INSERT INTO dispatch_rides (order_id, service_type, pickup_lat, pickup_lng, drop_lat, drop_lng, state, order_status, sandbox)
						 VALUES ($1, $2, $3, $4, $5, $6, 'searching', 'searching', $7) ON CONFLICT (order_id) DO NOTHING`,
						[order.orderId, order.serviceType, order.pickup.lat, order.pickup.lng, order.drop.lat, order.drop.lng, sandboxScenario(order.metadata, this.cfg.fleetMode)],
						t,
					);
					this.demand[order.serviceType]?.upsert(order.orderId, order.pickup, { searching: true, createdMs: Date.now() });
					ride = (
						await this.q<RideRow>(
							"SELECT *, (lease_until IS NOT NULL AND lease_until > now()) AS lease_active FROM dispatch_rides WHERE order_id = $1 FOR UPDATE",
							[order.orderId],
							t,
						)
					)[0] as RideRow & { lease_active: boolean };
					searchAgain = true;
				}
				if (ride.state === "closed") {
					// Final. Only make sure nobody still holds the ride.
					changedDrivers.push(
						...(await this.q<DriverRow>(
							"UPDATE drivers SET status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp() WHERE order_id = $1 RETURNING *",
							[order.orderId],
							t,
						)),
					);
					return;
				}
				if (isStale(order, ride)) return;
				const action = followOrder(
					{ state: ride.state, orderStatus: ride.order_status, driverId: ride.driver_id, leaseActive: ride.lease_active },
					order.status,
					order.driver?.id ?? null,
					opts.abandonInFlight ?? false,
				);
				const seen = [order.orderId, order.version, order.updatedAt];
				switch (action.kind) {
					case "none":
						await this.q("UPDATE dispatch_rides SET order_version = $2, order_updated_at = $3 WHERE order_id = $1", seen, t);
						return;
					case "close": {
						await this.q(
							`UPDATE dispatch_rides SET state = 'closed', order_status = $4, order_version = $2, order_updated_at = $3,
								lease_until = NULL, next_location_at = NULL, updated_at = now() WHERE order_id = $1`,
							[...seen, order.status],
							t,
						);
						await this.q("UPDATE dispatch_offers SET state = 'cancelled', responded_at = now() WHERE order_id = $1 AND state = 'pending'", [order.orderId], t);
						changedDrivers.push(
							...(await this.q<DriverRow>(
								"UPDATE drivers SET status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp() WHERE order_id = $1 RETURNING *",
								[order.orderId],
								t,
							)),
						);
						return;
					}
					case "research": {
						await this.q("UPDATE dispatch_offers SET state = 'cancelled', responded_at = now() WHERE order_id = $1 AND state = 'pending'", [order.orderId], t);
						changedDrivers.push(
							...(await this.q<DriverRow>(
								"UPDATE drivers SET status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp() WHERE order_id = $1 RETURNING *",
								[order.orderId],
								t,
							)),
						);
						await this.q(
							`UPDATE dispatch_rides SET state = 'searching', order_status = 'searching', order_version = $2, order_updated_at = $3,
								driver_id = NULL, lease_until = NULL, next_location_at = NULL, origin_lat = NULL, origin_lng = NULL,
								search_started_at = now(), next_match_at = now(), phase_since = now(),
								excluded_driver_ids = CASE WHEN $4::text IS NULL OR $4 = ANY(excluded_driver_ids) THEN excluded_driver_ids ELSE array_append(excluded_driver_ids, $4::text) END,
								drop_outs = drop_outs + $5, updated_at = now()
							 WHERE order_id = $1`,
							[...seen, action.formerDriverId, action.droppedOut ? 1 : 0],
							t,
						);
						searchAgain = true;
						return;
					}
					case "resume":
						await this.q(
							`UPDATE dispatch_rides SET state = 'searching', order_status = 'searching', order_version = $2, order_updated_at = $3,
								lease_until = NULL, next_match_at = now(), updated_at = now() WHERE order_id = $1`,
							seen,
							t,
						);
						searchAgain = true;
						return;
					case "assign": {
						const driverId = action.driverId;
						await this.q(
							`UPDATE dispatch_offers SET state = CASE WHEN driver_id = $2 THEN 'accepted' ELSE 'cancelled' END, responded_at = now()
							 WHERE order_id = $1 AND state = 'pending'`,
							[order.orderId, driverId],
							t,
						);
						changedDrivers.push(
							...(await this.q<DriverRow>(
								`UPDATE drivers SET status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp()
								 WHERE order_id = $1 AND id IS DISTINCT FROM $2 RETURNING *`,
								[order.orderId, driverId],
								t,
							)),
						);
						let origin: LatLng | null = null;
						if (driverId) {
							const held = await this.q<DriverRow>(
								`UPDATE drivers SET status = 'on_trip', order_id = $2, rev = rev + 1, updated_at = clock_timestamp()
								 WHERE id = $1 AND (order_id IS NULL OR order_id = $2) AND NOT (status = 'on_trip' AND order_id = $2) RETURNING *`,
								[driverId, order.orderId],
								t,
							);
							changedDrivers.push(...held);
							const d = held[0] ?? (await this.q<DriverRow>("SELECT * FROM drivers WHERE id = $1", [driverId], t))[0];
							if (d && d.lat !== null && d.lng !== null) origin = { lat: d.lat, lng: d.lng };
							if (d && d.order_id !== order.orderId) this.trouble(`Order ${order.orderId} names driver ${driverId}, who holds ${d.order_id ?? "nothing"}`);
						}
						await this.q(
							`UPDATE dispatch_rides SET state = 'assigned', driver_id = $4, order_status = $5, order_version = $2, order_updated_at = $3,
								lease_until = NULL,
								phase_since = CASE WHEN $6 THEN now() ELSE phase_since END,
								next_location_at = CASE WHEN $7 THEN COALESCE(CASE WHEN $6 THEN NULL ELSE next_location_at END, now() + $8 * interval '1 millisecond') ELSE NULL END,
								origin_lat = COALESCE(origin_lat, $9), origin_lng = COALESCE(origin_lng, $10), updated_at = now()
							 WHERE order_id = $1`,
							[...seen, driverId, order.status, action.statusChanged, isMovingStatus(order.status), this.cfg.locationIntervalMs, origin?.lat ?? null, origin?.lng ?? null],
							t,
						);
						return;
					}
				}
			});
			this.publishDrivers(changedDrivers);
			if (searchAgain) this.kick();
		},

		/** Asks orders for the truth about one ride and applies it (a vanished order closes dispatch's view). */
		async reconcileOrder(this: DispatchThis, orderId: string, opts: { abandonInFlight?: boolean } = {}) {
			const order = await this.getOrder(orderId);
			if (order) {
				await this.applyOrder(order, opts);
				return;
			}
			const released = await this.tx(async (t) => {
				await this.q("UPDATE dispatch_rides SET state = 'closed', lease_until = NULL, next_location_at = NULL, updated_at = now() WHERE order_id = $1", [orderId], t);
				await this.q("UPDATE dispatch_offers SET state = 'cancelled', responded_at = now() WHERE order_id = $1 AND state = 'pending'", [orderId], t);
				return this.q<DriverRow>("UPDATE drivers SET status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp() WHERE order_id = $1 RETURNING *", [orderId], t);
			});
			this.publishDrivers(released);
		},

		/** Orders said no (somebody moved first): take its current truth. */
		async afterRefusal(this: DispatchThis, orderId: string, err: unknown) {
			this.logger.debug(`orders refused a move of ${orderId}: ${shortError(err)}`);
			try {
				await this.reconcileOrder(orderId, { abandonInFlight: true });
			} catch (e) {
				this.trouble(`Reconciling ${orderId} failed: ${shortError(e)} (the sweep will retry)`);
			}
		},

		/** Ends a pending offer without a ride for the driver; the ride goes to the next driver. */
		async declineOffer(this: DispatchThis, driverId: string, orderId: string, how: "declined" | "expired" | "cancelled"): Promise<boolean> {
			const released = await this.tx(async (t) => {
				const [ride] = await this.q<{ service_type: ServiceType }>("SELECT order_id, service_type FROM dispatch_rides WHERE order_id = $1 FOR UPDATE", [orderId], t);
				const offers = await this.q<{ id: string }>(
					"UPDATE dispatch_offers SET state = $3, responded_at = now() WHERE order_id = $1 AND driver_id = $2 AND state = 'pending' RETURNING id",
					[orderId, driverId, how],
					t,
				);
				if (!offers[0]) return null;
				const drivers = await this.q<DriverRow>(
					`UPDATE drivers SET status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp()
					 WHERE id = $1 AND status = 'offered' AND order_id = $2 RETURNING *`,
					[driverId, orderId],
					t,
				);
				await this.q(
					`UPDATE dispatch_rides SET next_match_at = now(), updated_at = now(),
						excluded_driver_ids = CASE WHEN $2 = ANY(excluded_driver_ids) THEN excluded_driver_ids ELSE array_append(excluded_driver_ids, $2::text) END
					 WHERE order_id = $1`,
					[orderId, driverId],
					t,
				);
				return { drivers, serviceType: ride?.service_type };
			});
			if (!released) return false;
			if (this.metricsOn && released.serviceType) this.broker.metrics.increment(METRIC_OFFERS_ENDED, { outcome: how, service_type: released.serviceType });
			this.publishDrivers(released.drivers);
			this.kick();
			return true;
		},

		async requireOnRide(this: DispatchThis, driverId: string, orderId: string, location?: LocationParam) {
			let driver = location ? await this.setDriverLocation(driverId, location) : await this.loadDriver(driverId);
			if (driver.status !== "on_trip" || driver.order_id !== orderId) {
				throw new ApiError(409, "CONFLICT", "The driver is not on this ride");
			}
			const ride = (await this.q<RideRow>("SELECT * FROM dispatch_rides WHERE order_id = $1", [orderId]))[0];
			if (!ride) throw new ApiError(409, "CONFLICT", "The driver is not on this ride");
			if (ride.state === "accepting") {
				// The accept is still being recorded (or was lost): settle it before moving on.
				await this.reconcileOrder(orderId, { abandonInFlight: Date.now() > new Date(ride.lease_until ?? 0).getTime() });
				driver = await this.loadDriver(driverId);
				const settled = (await this.q<RideRow>("SELECT * FROM dispatch_rides WHERE order_id = $1", [orderId]))[0];
				if (!settled || settled.state !== "assigned" || driver.order_id !== orderId) throw new ApiError(409, "CONFLICT", "The driver is not on this ride");
				return { driver, ride: settled };
			}
			return { driver, ride };
		},

		/**
		 * A driver action that moves its ride one step (arrive, start, drop):
		 * the driver must hold the ride; orders decides. On a definitive refusal
		 * dispatch takes the order's truth; a wrong OTP (only `started` carries
		 * one) is counted on the driver instead.
		 */
		async moveRide(this: DispatchThis, ctx: Context<RideActionParams>, from: DriverMoveFrom, to: DriverMoveTo, otp?: string): Promise<DriverJob> {
			const { driverId, orderId } = ctx.params;
			const { driver, ride } = await this.requireOnRide(driverId, orderId, ctx.params.location);
			// At the pickup or the drop the driver is there (eta 0); once started, the eta is to the drop.
			const eta = to === "started" ? this.etaFor(driver, ride, to) : 0;
			let order: OrderView;
			try {
				order = await this.transition({ orderId, from, to, otp, location: locationOf(driver) ?? undefined, eta }, ctx);
			} catch (err) {
				if (otp !== undefined && errorType(err) === "INVALID_OTP") {
					await this.q("UPDATE drivers SET wrong_otp_count = wrong_otp_count + 1 WHERE id = $1", [driverId]);
					this.logger.info(`Wrong OTP from driver ${driverId} for ${orderId}`);
					if (this.metricsOn) this.broker.metrics.increment(METRIC_WRONG_OTP, { service_type: ride.service_type });
				} else if (isDefinitiveRefusal(err)) {
					await this.afterRefusal(orderId, err);
				}
				throw err;
			}
			await this.applyOrder(order);
			return { driver: toDriverView(await this.loadDriver(driverId)), offer: null, ride: { orderId, status: order.status, pickup: pickupOf(ride), drop: dropOf(ride) } };
		},

		/** Seconds from the driver to where it is heading in `status`. */
		etaFor(this: DispatchThis, driver: DriverRow, ride: RideRow, status: string): number | undefined {
			const target = legTarget(status, pickupOf(ride), dropOf(ride));
			const from = status === "started" ? pickupOf(ride) : driver.lat !== null && driver.lng !== null ? { lat: driver.lat, lng: driver.lng } : null;
			if (!target || !from) return undefined;
			return etaBetween(from, target, ride.service_type, this.cfg.speedsKmh, this.cfg.roadFactor);
		},

		supplyDemandAt(this: DispatchThis, point: LatLng): SupplyDemandReply {
			const now = Date.now();
			const out = {} as SupplyDemandReply;
			for (const type of SERVICE_TYPES) {
				const nearest = this.available[type].nearest(point, { limit: 1, radiusM: this.cfg.searchRadiusM });
				out[type] = {
					eta: nearest[0] ? etaSeconds(nearest[0].distanceM, this.cfg.speedsKmh[type], this.cfg.roadFactor) : null,
					available: this.available[type].countWithin(point, this.cfg.supplyRadiusM),
					demand: this.demand[type].countWithin(point, this.cfg.supplyRadiusM, (_id, d) => d.searching || now - d.createdMs <= this.cfg.demandWindowMs),
				};
			}
			return out;
		},

		/** Nearest available candidates: the index first; the database when the index has nobody (it may be behind). */
		async candidates(this: DispatchThis, pickup: LatLng, serviceType: ServiceType, excluded: Set<string>, t: Transaction) {
			const fromIndex = this.available[serviceType].nearest(pickup, {
				limit: this.cfg.candidatesPerAttempt,
				radiusM: this.cfg.searchRadiusM,
				accept: (id) => !excluded.has(id),
			});
			if (fromIndex.length > 0) return fromIndex.map((n) => ({ driverId: n.id }));
			const dLat = this.cfg.searchRadiusM / 111_320;
			const cos = Math.max(0.01, Math.cos((pickup.lat * Math.PI) / 180));
			const dLng = this.cfg.searchRadiusM / (111_320 * cos);
			const rows = await this.q<{ id: string; lat: number; lng: number }>(
				`SELECT id, lat, lng FROM drivers
				 WHERE status = 'available' AND service_type = $1 AND lat BETWEEN $2 AND $3 AND lng BETWEEN $4 AND $5 AND NOT (id = ANY($6::text[]))
				 ORDER BY (lat - $7) * (lat - $7) + ((lng - $8) * $9) * ((lng - $8) * $9) LIMIT $10`,
				[serviceType, pickup.lat - dLat, pickup.lat + dLat, pickup.lng - dLng, pickup.lng + dLng, [...excluded], pickup.lat, pickup.lng, cos, this.cfg.candidatesPerAttempt],
				t,
			);
			return rows.filter((r) => haversineMeters(pickup, r) <= this.cfg.searchRadiusM).map((r) => ({ driverId: r.id }));
		},

		/** Runs a tick soon (a new ride, a decline, a driver coming online). */
		kick(this: DispatchThis) {
			this.ticker.kick();
		},

		/** One pass over due work now (or one more after the running one). */
		async tick(this: DispatchThis) {
			return this.ticker.run();
		},

		/** The steps of one tick: expired offers, rides to match or end, location events. */
		async tickSteps(this: DispatchThis) {
			for (const step of [this.expireOffers, this.matchRides, this.sendLocations]) {
				if (this.stopping) return;
				try {
					await step.call(this);
				} catch (err) {
					this.trouble(`Dispatch tick (${step.name}): ${shortError(err)}`);
				}
			}
		},

		async expireOffers(this: DispatchThis) {
			const due = await this.q<{ order_id: string; driver_id: string }>(
				"SELECT order_id, driver_id FROM dispatch_offers WHERE state = 'pending' AND expires_at <= now() ORDER BY expires_at LIMIT 200",
			);
			for (const o of due) await this.declineOffer(o.driver_id, o.order_id, "expired");
		},

		async matchRides(this: DispatchThis) {
			const due = await this.q<{ order_id: string }>(
				"SELECT order_id FROM dispatch_rides WHERE state = 'searching' AND next_match_at <= now() ORDER BY next_match_at LIMIT 100",
			);
			for (const { order_id } of due) {
				if (this.stopping) return;
				try {
					await this.matchRide(order_id);
				} catch (err) {
					this.trouble(`Matching ${order_id}: ${shortError(err)}`);
					// A holder the database refused (e.g. a stale claim): take the order's truth.
					await this.afterRefusal(order_id, err);
				}
			}
		},

		/**
		 * One matching step for a ride, in one short transaction holding the
		 * ride's row (SKIP LOCKED: another instance on it means skip): end it
		 * when its time is up, else claim the nearest available driver with a
		 * conditional update and record the offer.
		 */
		async matchRide(this: DispatchThis, orderId: string) {
			const result = await this.tx(async (t) => {
				const ride = (
					await this.q<RideRow & { timed_out: boolean; pending_expiry: Date | null }>(
						`SELECT r.*, (r.search_started_at + $2 * interval '1 millisecond' <= now()) AS timed_out,
							(SELECT o.expires_at FROM dispatch_offers o WHERE o.order_id = r.order_id AND o.state = 'pending') AS pending_expiry
						 FROM dispatch_rides r WHERE r.order_id = $1 AND r.state = 'searching' AND r.next_match_at <= now() FOR UPDATE SKIP LOCKED`,
						[orderId, this.cfg.dispatchTimeoutMs],
						t,
					)
				)[0];
				if (!ride) return null;
				if (ride.pending_expiry) {
					await this.q("UPDATE dispatch_rides SET next_match_at = $2 WHERE order_id = $1", [orderId, ride.pending_expiry], t);
					return null;
				}
				if (ride.timed_out || ride.sandbox === "no_driver_found") {
					await this.q(
						"UPDATE dispatch_rides SET state = 'ending', lease_until = now() + $2 * interval '1 millisecond', updated_at = now() WHERE order_id = $1",
						[orderId, this.cfg.transitionLeaseMs],
						t,
					);
					return { ending: true as const };
				}
				const pickup = pickupOf(ride);
				const excluded = new Set(ride.excluded_driver_ids);
				const tried = new Set<string>();
				let claimed: DriverRow | undefined;
				for (let round = 0; round < 2 && !claimed; round++) {
					for (const c of await this.candidates(pickup, ride.service_type, new Set([...excluded, ...tried]), t)) {
						tried.add(c.driverId);
						claimed = (
							await this.q<DriverRow>(
								`UPDATE drivers SET status = 'offered', order_id = $2, rev = rev + 1, updated_at = clock_timestamp()
								 WHERE id = (SELECT id FROM drivers WHERE id = $1 AND status = 'available' AND service_type = $3 FOR UPDATE SKIP LOCKED)
								 RETURNING *`,
								[c.driverId, orderId, ride.service_type],
								t,
							)
						)[0];
						if (claimed) break;
						// Not available after all: this instance's index was behind.
						this.available[ride.service_type].remove(c.driverId);
					}
				}
				if (!claimed || claimed.lat === null || claimed.lng === null) {
					await this.q("UPDATE dispatch_rides SET next_match_at = now() + $2 * interval '1 millisecond' WHERE order_id = $1", [orderId, this.cfg.retryMatchMs], t);
					return null;
				}
				const distanceM = haversineMeters({ lat: claimed.lat, lng: claimed.lng }, pickup);
				const [offer] = await this.q<{ expires_at: Date }>(
					`INSERT INTO dispatch_offers (id, order_id, driver_id, state, distance_m, eta, expires_at)
					 VALUES ($1, $2, $3, 'pending', $4, $5, now() + $6 * interval '1 millisecond') RETURNING expires_at`,
					[offerId(), orderId, claimed.id, Math.round(distanceM), etaSeconds(distanceM, this.cfg.speedsKmh[ride.service_type], this.cfg.roadFactor), this.cfg.offerTimeoutMs],
					t,
				);
				await this.q("UPDATE dispatch_rides SET next_match_at = $2, updated_at = now() WHERE order_id = $1", [orderId, offer.expires_at], t);
				return { driver: claimed, expiresAt: offer.expires_at };
			});
			if (!result) return;
			if ("ending" in result) {
				await this.endRide(orderId);
				return;
			}
			this.publishDrivers([result.driver]);
			if (this.metricsOn) this.broker.metrics.increment(METRIC_OFFERS_MADE, { service_type: result.driver.service_type });
			this.broker
				.broadcast("dispatch.offerCreated", { orderId, driverId: result.driver.id, simulated: result.driver.simulated, expiresAt: new Date(result.expiresAt).toISOString() })
				.catch(() => undefined);
		},

		/** Nobody took the ride in time: `searching → no_driver_found` (orders decides if somebody moved first). */
		async endRide(this: DispatchThis, orderId: string) {
			try {
				const order = await this.transition({ orderId, from: "searching", to: "no_driver_found", reason: "no driver accepted within the dispatch timeout" });
				if (this.metricsOn) this.broker.metrics.increment(METRIC_NO_DRIVER, { service_type: order.serviceType });
				await this.applyOrder(order, { abandonInFlight: true });
			} catch (err) {
				if (isDefinitiveRefusal(err)) await this.afterRefusal(orderId, err);
				else this.trouble(`no_driver_found for ${orderId} not recorded yet: ${shortError(err)} (retried when its lease runs out)`);
			}
		},

		/**
		 * `location_updated` at the cadence: each due moving ride is claimed by
		 * pushing its next due time forward (SKIP LOCKED, so instances share the
		 * work), then its driver's latest location and ETA go to orders.
		 */
		async sendLocations(this: DispatchThis) {
			const due = await this.q<RideRow & { d_lat: number | null; d_lng: number | null; d_heading: number | null }>(
				`UPDATE dispatch_rides r SET next_location_at = now() + $1 * interval '1 millisecond'
				 FROM drivers d
				 WHERE r.order_id IN (
					SELECT order_id FROM dispatch_rides WHERE state = 'assigned' AND next_location_at <= now()
					ORDER BY next_location_at LIMIT 200 FOR UPDATE SKIP LOCKED)
				 AND d.id = r.driver_id
				 RETURNING r.*, d.lat AS d_lat, d.lng AS d_lng, d.heading AS d_heading`,
				[this.cfg.locationIntervalMs],
			);
			const work = due.filter((r) => isMovingStatus(r.order_status) && r.d_lat !== null && r.d_lng !== null);
			const send = async (r: (typeof work)[number]) => {
				const location: DriverLocation = { lat: r.d_lat as number, lng: r.d_lng as number, heading: Math.round(r.d_heading ?? 0) % 360 };
				const target = legTarget(r.order_status, pickupOf(r), dropOf(r)) as LatLng;
				const eta = etaBetween(location, target, r.service_type, this.cfg.speedsKmh, this.cfg.roadFactor);
				try {
					await this.broker.call("orders.recordLocation", { orderId: r.order_id, location, eta });
				} catch (err) {
					if (isDefinitiveRefusal(err)) await this.afterRefusal(r.order_id, err);
					else this.trouble(`Location event for ${r.order_id}: ${shortError(err)}`);
				}
			};
			for (let i = 0; i < work.length; i += 20) await Promise.all(work.slice(i, i + 20).map(send));
		},

		/** Drivers by status and type, from the table (the index only knows available drivers). Every pair is set, so a drained one reads 0. */
		async updateDriverGauges(this: DispatchThis) {
			const rows = await this.q<{ status: DriverStatus; service_type: ServiceType; n: number }>(
				"SELECT status, service_type, count(*)::int AS n FROM drivers GROUP BY status, service_type",
			);
			for (const type of SERVICE_TYPES) {
				for (const status of DRIVER_STATUSES) {
					const row = rows.find((r) => r.status === status && r.service_type === type);
					this.broker.metrics.set(METRIC_DRIVERS, row?.n ?? 0, { status, service_type: type });
				}
			}
		},

		/**
		 * Reconciliation, so dispatch survives lost broker events and restarts:
		 * settles in-flight calls whose lease ran out, learns about active rides
		 * from `orders.listActive`, closes rides orders no longer has active, and
		 * frees drivers that hold a ride without reason.
		 */
		async sweep(this: DispatchThis) {
			if (this.sweepRunning) return this.sweepRunning;
			this.sweepRunning = (async () => {
				const stuck = await this.q<{ order_id: string }>(
					"SELECT order_id FROM dispatch_rides WHERE state IN ('accepting','ending') AND lease_until < now() LIMIT 100",
				);
				for (const { order_id } of stuck) {
					await this.reconcileOrder(order_id, { abandonInFlight: true }).catch((err: unknown) => this.trouble(`Settling ${order_id}: ${shortError(err)}`));
				}

				const limit = 5000;
				const active = await this.broker.call<OrderView[], { limit: number }>("orders.listActive", { limit });
				const mirrors = await this.q<{ order_id: string; state: string; order_status: string; driver_id: string | null }>(
					"SELECT order_id, state, order_status, driver_id FROM dispatch_rides WHERE state <> 'closed'",
				);
				const byId = new Map(mirrors.map((m) => [m.order_id, m]));
				for (const order of active) {
					if (this.stopping) return;
					const m = byId.get(order.orderId);
					const agrees = m && m.order_status === order.status && (order.status === "searching" || m.driver_id === (order.driver?.id ?? null));
					if (!agrees) {
						// The snapshot may be a moment old: applyOrder ignores it if dispatch already knows better.
						await this.applyOrder(order).catch((err: unknown) => this.trouble(`Sweep ${order.orderId}: ${shortError(err)}`));
					}
				}
				if (active.length < limit) {
					const activeIds = new Set(active.map((o) => o.orderId));
					for (const m of mirrors) {
						if (this.stopping) return;
						if (!activeIds.has(m.order_id)) {
							await this.reconcileOrder(m.order_id).catch((err: unknown) => this.trouble(`Sweep ${m.order_id}: ${shortError(err)}`));
						}
					}
				}

				// Simulated mode needs the fleet somewhere in the cluster, or rides only ever time out.
				if (this.cfg.fleetMode === "simulated" && Date.now() - this.startedAt > 30_000 && Date.now() - this.fleetWarnedAt > 60_000) {
					const fleetRuns = this.broker.registry.getServiceList({ onlyAvailable: true }).some((svc: { name: string }) => svc.name === "fleet");
					if (!fleetRuns) {
						this.fleetWarnedAt = Date.now();
						this.trouble("FLEET_MODE=simulated but no fleet service runs in this namespace: add `fleet` to SERVICES (e.g. SERVICES=dispatch,fleet), or set FLEET_MODE=live");
					}
				}

				// Drivers holding a ride with no open offer or assignment behind it (a crash between steps).
				const orphans = await this.q<DriverRow>(
					`UPDATE drivers d SET status = 'available', order_id = NULL, rev = d.rev + 1, updated_at = clock_timestamp()
					 WHERE d.order_id IS NOT NULL AND d.updated_at < now() - interval '30 seconds'
					 AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = d.order_id AND o.driver_id = d.id AND o.state = 'pending' AND d.status = 'offered')
					 AND NOT EXISTS (SELECT 1 FROM dispatch_rides r WHERE r.order_id = d.order_id AND r.driver_id = d.id AND r.state IN ('accepting','assigned') AND d.status = 'on_trip')
					 RETURNING d.*`,
				);
				if (orphans.length > 0) this.trouble(`Freed ${orphans.length} driver(s) holding a ride without reason`);
				this.publishDrivers(orphans);
			})();
			try {
				await this.sweepRunning;
			} catch (err) {
				this.trouble(`Dispatch sweep: ${shortError(err)}`);
			} finally {
				this.sweepRunning = null;
			}
		},
	},

	created(this: DispatchThis) {
		this.cfg = readDispatchSettings(process.env);
		this.available = { scooty: new CellIndex<null>(this.cfg.h3Resolution), cab: new CellIndex<null>(this.cfg.h3Resolution) };
		this.demand = { scooty: new CellIndex<DemandItem>(this.cfg.h3Resolution), cab: new CellIndex<DemandItem>(this.cfg.h3Resolution) };
		this.driverRevs = new Map();
		this.timers = [];
		this.ticker = new CoalescedPass(() => this.tickSteps(), () => this.stopping);
		this.sweepRunning = null;
		this.refreshRunning = null;
		this.refreshedUpTo = null;
		this.stopping = false;
		this.startedAt = Date.now();
		this.fleetWarnedAt = 0;

		this.metricsOn = this.broker.isMetricsEnabled();
		if (this.metricsOn) {
			const m = this.broker.metrics;
			if (!m.hasMetric(METRIC_OFFERS_MADE)) {
				m.register({ type: "counter", name: METRIC_OFFERS_MADE, labelNames: ["service_type"], description: "Offers made to drivers" });
				m.register({
					type: "counter",
					name: METRIC_OFFERS_ENDED,
					labelNames: ["outcome", "service_type"],
					description: "Offers answered or timed out: accepted, declined (by the driver or going offline), expired",
				});
				m.register({ type: "counter", name: METRIC_MATCHED, labelNames: ["service_type"], description: "Rides that got a driver (searching → accepted, again after a drop-out)" });
				m.register({ type: "counter", name: METRIC_NO_DRIVER, labelNames: ["service_type"], description: "Rides ended as no_driver_found" });
				m.register({
					type: "histogram",
					name: METRIC_MATCH_TIME,
					labelNames: ["service_type"],
					unit: "second",
					buckets: [1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600],
					description: "Order created → accepted by a driver",
				});
				m.register({ type: "gauge", name: METRIC_DRIVERS, labelNames: ["status", "service_type"], description: "Drivers by status and service type" });
				m.register({ type: "counter", name: METRIC_WRONG_OTP, labelNames: ["service_type"], description: "Ride starts refused for a wrong rider OTP" });
			}
		}
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
		if (this.metricsOn) {
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
		await Promise.allSettled([this.ticker.current, this.sweepRunning, this.refreshRunning].filter(Boolean));
	},
};

export default DispatchService;
