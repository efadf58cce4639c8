import type { LatLng } from "../../lib/geo";
import type { ServiceType } from "./dispatch.settings";
import type { SandboxScenario } from "./dispatch-rules";

/**
 * Shapes of the dispatch service's actions (docs/ARCHITECTURE.md,
 * "Dispatch"). Pure types, shared by the dispatch service, the simulated
 * fleet (a client of these actions) and the tests.
 */

export type DriverStatus = "offline" | "available" | "offered" | "on_trip";

export interface DriverLocation extends LatLng {
	heading: number;
}

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
	location: DriverLocation | null;
	locationAt: string | null;
	simulated: boolean;
	wrongOtpCount: number;
}

/** A driver's current job, as a driver app would show it (`dispatch.driver`). */
export interface DriverJob {
	driver: DriverView;
	offer: { orderId: string; expiresAt: string; pickup: LatLng; drop: LatLng; distanceM: number; eta: number } | null;
	ride: { orderId: string; status: string; pickup: LatLng; drop: LatLng } | null;
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
	location: LatLng;
}

/** `dispatch.simulatedWork`: everything the simulated fleet must act on, from dispatch's tables. */
export interface SimOffer {
	driverId: string;
	orderId: string;
	offeredAt: string;
	expiresAt: string;
	sandbox: SandboxScenario | null;
}

export interface SimRide {
	driverId: string;
	orderId: string;
	serviceType: ServiceType;
	/** The order status dispatch last saw: accepted, arrived or started. */
	status: "accepted" | "arrived" | "started";
	/** When that status was reached (the simulator derives the driver's progress from it: restart-safe). */
	phaseSince: string;
	/** Where the driver was when it accepted: the start of the leg to the pickup. */
	origin: LatLng | null;
	pickup: LatLng;
	drop: LatLng;
	sandbox: SandboxScenario | null;
	/** Drivers who dropped out of this ride so far. */
	dropOuts: number;
}

export interface SimSearching {
	orderId: string;
	serviceType: ServiceType;
	pickup: LatLng;
	sandbox: SandboxScenario | null;
	/** Whether some available driver (not excluded from this ride) is within the search radius. */
	hasCandidate: boolean;
}

export interface SimulatedWork {
	/** The database clock, so every simulator instance measures elapsed time the same way. */
	serverTime: string;
	offers: SimOffer[];
	rides: SimRide[];
	searching: SimSearching[];
}
