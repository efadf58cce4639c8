/**
 * The dispatch service's contract: the params of its actions (the driver
 * actions, the operator reads, pricing's supply/demand), the types they
 * validate into, its replies, the simulated fleet's inbox and the broker
 * events dispatch emits. Type-only plus plain data: no service code, no I/O.
 * The simulated fleet and the tests import these, never dispatch's files.
 */
import { driverIdRule, locationRule, orderIdRule, pointRule, serviceTypeRule, type Point, type ServiceType } from "./common";

// ---- shared words ------------------------------------------------------------------

export const DRIVER_STATUSES = ["offline", "available", "offered", "on_trip"] as const;
export type DriverStatus = (typeof DRIVER_STATUSES)[number];

/**
 * Sandbox directives a partner may put in `metadata.sandbox.scenario` (simulated fleet only).
 * `manual`: the ride waits until the partner advances it (contracts/sandbox.ts).
 */
export const SANDBOX_SCENARIOS = ["no_driver_found", "driver_drop_out", "fast", "manual"] as const;
export type SandboxScenario = (typeof SANDBOX_SCENARIOS)[number];

export const FLEET_MODES = ["simulated", "live"] as const;
export type FleetMode = (typeof FLEET_MODES)[number];

/**
 * The mode of a driver and of a ride: `test` rides (made with a test key) are
 * matched only with `test` drivers (the simulated fleet, or a driver app
 * registered as a test driver), `live` rides only with `live` drivers (real
 * drivers an operator registered). Same words as the partner key modes.
 */
export const DRIVER_MODES = ["test", "live"] as const;
export type DriverMode = (typeof DRIVER_MODES)[number];
export const driverModeRule = { type: "enum", values: [...DRIVER_MODES] } as const;

/** A driver's position as dispatch answers it: the heading is always known (0 when never reported). */
export interface DriverPosition extends Point {
	heading: number;
}

/** A reported position: dispatch drops unknown keys (driver apps send extra fields). */
const reportedLocationRule = { ...locationRule, strict: "remove" } as const;
const optionalLocationRule = { ...reportedLocationRule, optional: true } as const;

export interface ReportedLocation extends Point {
	heading?: number;
}

// ---- driver actions (internal: the REPL, the simulated fleet, a driver app) --------

/** dispatch.register: idempotent by phone. */
export const registerParams = {
	name: { type: "string", min: 1, max: 200, trim: true, convert: true },
	phone: { type: "string", pattern: /^\+[1-9][0-9]{6,14}$/ },
	vehicleNumber: { type: "string", min: 1, max: 32, trim: true, convert: true },
	serviceType: serviceTypeRule,
	simulated: { type: "boolean", optional: true },
	/** `live` (the default: a real driver an operator registers) or `test` (the simulated fleet, test driver apps). Fixed at the first registration. */
	mode: { ...driverModeRule, optional: true },
} as const;
export interface RegisterParams {
	name: string;
	phone: string;
	vehicleNumber: string;
	serviceType: ServiceType;
	simulated?: boolean;
	mode?: DriverMode;
}

/** dispatch.goOffline, dispatch.driver. */
export const driverIdParams = { driverId: driverIdRule } as const;
export interface DriverIdParams {
	driverId: string;
}

/** dispatch.goOnline, dispatch.reportLocation. */
export const driverLocationParams = { driverId: driverIdRule, location: reportedLocationRule } as const;
export interface DriverLocationParams extends DriverIdParams {
	location: ReportedLocation;
}

/** dispatch.acceptOffer, dispatch.declineOffer. */
export const offerAnswerParams = { driverId: driverIdRule, orderId: orderIdRule } as const;
export interface OfferAnswerParams extends DriverIdParams {
	orderId: string;
}

/** dispatch.arrive, dispatch.dropRide: a ride step, optionally with where the driver is. */
export const rideStepParams = { driverId: driverIdRule, orderId: orderIdRule, location: optionalLocationRule } as const;
export interface RideStepParams extends OfferAnswerParams {
	location?: ReportedLocation;
}

/** dispatch.startRide: only with the rider's OTP (the REPL sends `--otp 4821` as a number; it is taken as the string). */
export const startRideParams = { ...rideStepParams, otp: { type: "string", min: 1, max: 16, convert: true } } as const;
export interface StartRideParams extends RideStepParams {
	otp: string;
}

/** dispatch.dropOut: the driver gives the ride up before it started. */
export const dropOutParams = { ...rideStepParams, reason: { type: "string", max: 200, optional: true } } as const;
export interface DropOutParams extends RideStepParams {
	reason?: string;
}

// ---- operator and service reads ----------------------------------------------------

/** dispatch.listDrivers: newest first, optionally filtered. */
export const listDriversParams = {
	status: { type: "enum", values: [...DRIVER_STATUSES], optional: true },
	serviceType: { ...serviceTypeRule, optional: true },
	simulated: { type: "boolean", optional: true, convert: true },
	mode: { ...driverModeRule, optional: true },
	limit: { type: "number", integer: true, min: 1, max: 1000, optional: true, convert: true },
	offset: { type: "number", integer: true, min: 0, optional: true, convert: true },
} as const;
export interface ListDriversParams {
	status?: DriverStatus;
	serviceType?: ServiceType;
	simulated?: boolean;
	mode?: DriverMode;
	limit?: number;
	offset?: number;
}

/** dispatch.nearestDrivers: from the instance's index, nearest first; drivers of one mode (`test` unless told). */
export const nearestDriversParams = {
	point: pointRule,
	serviceType: serviceTypeRule,
	mode: { ...driverModeRule, optional: true },
	limit: { type: "number", integer: true, min: 1, max: 100, optional: true, convert: true },
	radiusM: { type: "number", min: 1, max: 100_000, optional: true, convert: true },
} as const;
export interface NearestDriversParams {
	point: Point;
	serviceType: ServiceType;
	mode?: DriverMode;
	limit?: number;
	radiusM?: number;
}

/**
 * dispatch.supplyDemand: pricing's input around a point, for one mode (the
 * caller's key mode; `test` when not given): drivers and searching rides of
 * that mode only, so sandbox demand never moves live fares (and the reverse).
 */
export const supplyDemandParams = { point: pointRule, mode: { ...driverModeRule, optional: true } } as const;
export interface SupplyDemandParams {
	point: Point;
	mode?: DriverMode;
}

/** dispatch.ride: dispatch's view of one ride. */
export const rideParams = { orderId: orderIdRule } as const;
export interface RideParams {
	orderId: string;
}

// ---- replies -----------------------------------------------------------------------

/** A driver as the driver actions answer it. */
export interface DriverView {
	driverId: string;
	name: string;
	phone: string;
	vehicleNumber: string;
	serviceType: ServiceType;
	status: DriverStatus;
	/** The ride the driver is offered or on, else null. */
	orderId: string | null;
	location: DriverPosition | null;
	locationAt: string | null;
	simulated: boolean;
	/** Which rides the driver may be offered: `test` or `live` ones. */
	mode: DriverMode;
	wrongOtpCount: number;
}

/** A driver's current job, as a driver app would show it (`dispatch.driver`, and the ride steps). */
export interface DriverJob {
	driver: DriverView;
	offer: { orderId: string; expiresAt: string; pickup: Point; drop: Point; distanceM: number; eta: number } | null;
	ride: { orderId: string; status: string; pickup: Point; drop: Point } | null;
}

export interface SupplyDemand {
	/** Seconds for the nearest available driver to reach the point, or null when none is within the search radius. */
	eta: number | null;
	available: number;
	demand: number;
}
export type SupplyDemandReply = Record<ServiceType, SupplyDemand>;

export interface NearbyDriver {
	driverId: string;
	distanceM: number;
	eta: number;
	location: Point;
}

/** Dispatch's own phase of a ride (`dispatch_rides.state`). */
export type RidePhase = "searching" | "accepting" | "ending" | "assigned" | "closed";

export interface OfferView {
	offerId: string;
	driverId: string;
	state: string;
	distanceM: number;
	eta: number;
	createdAt: string;
	expiresAt: string;
	respondedAt: string | null;
}

/** `dispatch.ride`: phase, driver and offers so far (operators, tests). */
export interface RideView {
	orderId: string;
	serviceType: ServiceType;
	/** The order's mode: only drivers of this mode are offered the ride. */
	mode: DriverMode;
	phase: RidePhase;
	orderStatus: string;
	driverId: string | null;
	sandbox: SandboxScenario | null;
	dropOuts: number;
	excludedDriverIds: string[];
	searchStartedAt: string;
	offers: OfferView[];
}

// ---- the simulated fleet's inbox (`dispatch.simulatedWork`) ------------------------

export interface SimOffer {
	driverId: string;
	orderId: string;
	offeredAt: string;
	expiresAt: string;
	sandbox: SandboxScenario | null;
}

/** The order statuses in which a simulated driver has something to do on its ride. */
export type SimRideStatus = "accepted" | "arrived" | "started";

export interface SimRide {
	driverId: string;
	orderId: string;
	serviceType: ServiceType;
	/** The order status dispatch last saw. */
	status: SimRideStatus;
	/** When that status was reached (the simulator derives the driver's progress from it: restart-safe). */
	phaseSince: string;
	/** Where the driver was when it accepted: the start of the leg to the pickup. */
	origin: Point | null;
	pickup: Point;
	drop: Point;
	sandbox: SandboxScenario | null;
	/** Drivers who dropped out of this ride so far. */
	dropOuts: number;
}

export interface SimSearching {
	orderId: string;
	serviceType: ServiceType;
	pickup: Point;
	sandbox: SandboxScenario | null;
	/** Whether some available driver (not excluded from this ride) is within the search radius. */
	hasCandidate: boolean;
}

export interface SimulatedWork {
	/** The database clock, so every simulator instance measures elapsed time the same way. */
	serverTime: string;
	/** Pending offers and rides of simulated drivers; `searching` holds test-mode rides only (the sandbox never serves live rides). */
	offers: SimOffer[];
	rides: SimRide[];
	searching: SimSearching[];
}

// ---- broker events dispatch emits --------------------------------------------------

export const DISPATCH_EVENTS = {
	driverChanged: "dispatch.driverChanged",
	offerCreated: "dispatch.offerCreated",
	/** Positions a dispatch instance recorded since its last flush, one message per flush (not per ping). */
	driverPositions: "dispatch.driverPositions",
	/** A driver opened a `/driver/offers` wait on some instance: every other wait of that driver ends. */
	driverWaitStarted: "dispatch.driverWaitStarted",
} as const;

/** Why an offline driver is offline: it said so, its app went silent, or its tokens were revoked. */
export type OfflineReason = "driver" | "silent" | "revoked";

/** `dispatch.driverChanged`, broadcast on every state change: what every instance's index and driver cache keep of a driver. */
export interface DriverChangedEvent {
	id: string;
	serviceType: ServiceType;
	status: DriverStatus;
	lat: number | null;
	lng: number | null;
	rev: number;
	mode: DriverMode;
	/** The ride the driver is offered or on. */
	orderId: string | null;
	/** Set while offline. */
	offlineReason: OfflineReason | null;
}

/** `dispatch.offerCreated`, broadcast after an offer is recorded: a waiting driver's instance answers it from this alone. */
export interface OfferCreatedEvent {
	orderId: string;
	driverId: string;
	simulated: boolean;
	expiresAt: string;
	pickup: Point;
	drop: Point;
	distanceM: number;
	eta: number;
}

/** `dispatch.driverPositions`: `[driverId, lat, lng, heading, at (epoch ms)]` per driver, the newest of each. */
export interface DriverPositionsEvent {
	positions: Array<[driverId: string, lat: number, lng: number, heading: number, at: number]>;
}

/** `dispatch.driverWaitStarted`. */
export interface DriverWaitStartedEvent {
	driverId: string;
	waitId: string;
}
