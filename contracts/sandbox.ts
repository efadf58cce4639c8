/**
 * Sandbox controls: a test ride booked in manual mode (`metadata.sandbox:
 * "manual"`) waits until the partner advances it (`POST /ride/sandbox/advance`,
 * orders.sandboxAdvance). Orders plans the steps and stays the owner of the
 * order; the simulated fleet takes each step as the driver
 * (`fleet.sandboxStep`), through the driver actions and dispatch's sandbox
 * actions below. Type-only plus plain data: no service code, no I/O.
 */
import { locationRule, orderIdRule, type Point, type ServiceType } from "./common";
import type { DriverMode, ReportedLocation, RidePhase } from "./dispatch";

/** Where `to` may send a manual ride: a status, or a driver giving the ride up (`driver_drop_out`). */
export const SANDBOX_ADVANCE_TARGETS = ["accepted", "arrived", "started", "dropped", "no_driver_found", "driver_drop_out"] as const;
export type SandboxAdvanceTarget = (typeof SANDBOX_ADVANCE_TARGETS)[number];

/** POST /ride/sandbox/advance (orders.sandboxAdvance): without `to`, one step. */
export const sandboxAdvanceParams = {
	$$strict: true,
	orderId: orderIdRule,
	to: { type: "enum", values: [...SANDBOX_ADVANCE_TARGETS], optional: true },
} as const;
export interface SandboxAdvanceParams {
	orderId: string;
	to?: SandboxAdvanceTarget;
}

/**
 * One step the simulated fleet takes on a manual ride (`fleet.sandboxStep`):
 * - `accept`: dispatch offers the ride to a simulated driver placed near the pickup, who accepts it (`accepted`);
 * - `arrive`: the driver reports a position halfway to the pickup (a `location_updated`), then arrives (`arrived`);
 * - `start`: the driver starts with the rider's OTP (`started`);
 * - `drop`: a position halfway to the drop (a `location_updated`), then the drop (`dropped`);
 * - `dropOut`: the driver gives the ride up on the way (back to `searching`, no webhook);
 * - `noDriver`: dispatch ends the search as its timeout would (`no_driver_found`).
 */
export const SANDBOX_STEPS = ["accept", "arrive", "start", "drop", "dropOut", "noDriver"] as const;
export type SandboxStep = (typeof SANDBOX_STEPS)[number];

export const sandboxStepParams = { orderId: orderIdRule, step: { type: "enum", values: [...SANDBOX_STEPS] } } as const;
export interface SandboxStepParams {
	orderId: string;
	step: SandboxStep;
}

/** dispatch.sandboxRide, sandboxNoDriver. */
export const sandboxRideParams = { orderId: orderIdRule } as const;

/** dispatch.sandboxOffer: offer the manual ride to this (simulated, available) driver. */
export const sandboxOfferParams = { orderId: orderIdRule, driverId: { type: "string", min: 1, max: 100 } } as const;
export interface SandboxOfferParams {
	orderId: string;
	driverId: string;
}

/** dispatch.sandboxLocation: a `location_updated` now, from where the ride's driver just reported to be. */
export const sandboxLocationParams = {
	orderId: orderIdRule,
	location: { ...locationRule, strict: "remove" },
} as const;
export interface SandboxLocationParams {
	orderId: string;
	location: ReportedLocation;
}

/** A manual ride as dispatch sees it (dispatch.sandboxRide): what the fleet needs to act on it. */
export interface SandboxRide {
	orderId: string;
	serviceType: ServiceType;
	mode: DriverMode;
	phase: RidePhase;
	orderStatus: string;
	driverId: string | null;
	/** Where the driver was when it accepted (the start of the leg to the pickup). */
	origin: Point | null;
	pickup: Point;
	drop: Point;
}
