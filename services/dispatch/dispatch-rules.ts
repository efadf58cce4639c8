import { haversineMeters, type LatLng } from "../../lib/geo";
import type { ServiceType } from "./dispatch.settings";

/**
 * Dispatch's pure rules: ETAs, which order statuses need a driver or location
 * events, sandbox directives, and how dispatch's own view of a ride follows
 * the order (the orders service owns the state machine; dispatch mirrors it).
 */

export type OrderStatus = "searching" | "accepted" | "arrived" | "started" | "dropped" | "customer_cancelled" | "no_driver_found";

export const TERMINAL_ORDER_STATUSES: readonly OrderStatus[] = ["dropped", "customer_cancelled", "no_driver_found"];
export const ASSIGNED_ORDER_STATUSES: readonly OrderStatus[] = ["accepted", "arrived", "started"];

export function isTerminalStatus(status: string): boolean {
	return (TERMINAL_ORDER_STATUSES as readonly string[]).includes(status);
}

export function isAssignedStatus(status: string): boolean {
	return (ASSIGNED_ORDER_STATUSES as readonly string[]).includes(status);
}

/**
 * The contract's "while a ride is moving": from `accepted` until `arrived`
 * (driving to the pickup) and from `started` until `dropped` (the trip).
 * Waiting at the pickup (`arrived`) is not moving.
 */
export function isMovingStatus(status: string): boolean {
	return status === "accepted" || status === "started";
}

/** Where the driver is heading in this status: the pickup before `arrived`, the drop after `started`. */
export function legTarget(status: string, pickup: LatLng, drop: LatLng): LatLng | null {
	if (status === "accepted" || status === "arrived") return pickup;
	if (status === "started") return drop;
	return null;
}

/** Road distance estimate from the straight-line distance. */
export function roadDistanceM(from: LatLng, to: LatLng, roadFactor: number): number {
	return haversineMeters(from, to) * roadFactor;
}

/**
 * Seconds to cover `straightLineM` (great-circle metres) by road at
 * `speedKmh`: whole seconds, rounded up (an ETA that is too short is the
 * worse error), 0 when already there.
 */
export function etaSeconds(straightLineM: number, speedKmh: number, roadFactor: number): number {
	if (!(straightLineM > 0)) return 0;
	const seconds = (straightLineM * roadFactor) / ((speedKmh * 1000) / 3600);
	// Round away floating-point dust first, so 468.0000001 s is 468, not 469.
	return Math.ceil(Math.round(seconds * 1000) / 1000);
}

export function etaBetween(from: LatLng, to: LatLng, serviceType: ServiceType, speedsKmh: Record<ServiceType, number>, roadFactor: number): number {
	return etaSeconds(haversineMeters(from, to), speedsKmh[serviceType], roadFactor);
}

/** Sandbox directives a partner may put in `metadata.sandbox.scenario` (simulated fleet only). */
export const SANDBOX_SCENARIOS = ["no_driver_found", "driver_drop_out", "fast"] as const;
export type SandboxScenario = (typeof SANDBOX_SCENARIOS)[number];

/**
 * The sandbox scenario of an order, or null. Only the simulated fleet obeys
 * directives: in `live` mode they are ignored, so a partner cannot steer
 * real dispatch through metadata. Unknown scenarios are ignored too.
 */
export function sandboxScenario(metadata: unknown, fleetMode: "simulated" | "live"): SandboxScenario | null {
	if (fleetMode !== "simulated") return null;
	if (typeof metadata !== "object" || metadata === null) return null;
	const sandbox = (metadata as Record<string, unknown>).sandbox;
	let scenario: unknown = sandbox;
	if (typeof sandbox === "object" && sandbox !== null) scenario = (sandbox as Record<string, unknown>).scenario;
	return typeof scenario === "string" && (SANDBOX_SCENARIOS as readonly string[]).includes(scenario) ? (scenario as SandboxScenario) : null;
}

/** Dispatch's own phase of a ride (`dispatch_rides.state`). */
export type RidePhase = "searching" | "accepting" | "ending" | "assigned" | "closed";

export interface RideMirror {
	state: RidePhase;
	orderStatus: string;
	driverId: string | null;
	/** True while an accept / no-driver transition call may still be in flight. */
	leaseActive: boolean;
}

/** What dispatch must do to its ride and drivers to agree with the order. */
export type MirrorAction =
	| { kind: "none" }
	| { kind: "close" }
	/** The assigned driver is gone (dropped out, or the accept did not happen): search again without them. */
	| { kind: "research"; formerDriverId: string | null; droppedOut: boolean }
	/** An unanswered no-driver call is given up: keep searching (the timeout fires again). */
	| { kind: "resume" }
	| { kind: "assign"; driverId: string | null; statusChanged: boolean };

/**
 * Decides how dispatch's view follows the order's truth. `abandonInFlight`
 * is set when the caller knows an in-flight call is over (its answer came
 * back, or its lease ran out), so its phase may be given up.
 */
export function followOrder(mirror: RideMirror, orderStatus: string, orderDriverId: string | null, abandonInFlight: boolean): MirrorAction {
	const inFlightOver = abandonInFlight || !mirror.leaseActive;
	if (isTerminalStatus(orderStatus)) return mirror.state === "closed" ? { kind: "none" } : { kind: "close" };
	if (orderStatus === "searching") {
		switch (mirror.state) {
			case "assigned":
				return { kind: "research", formerDriverId: mirror.driverId, droppedOut: true };
			case "accepting":
				return inFlightOver ? { kind: "research", formerDriverId: mirror.driverId, droppedOut: false } : { kind: "none" };
			case "ending":
				return inFlightOver ? { kind: "resume" } : { kind: "none" };
			case "closed":
				return { kind: "resume" };
			default:
				return { kind: "none" };
		}
	}
	if (isAssignedStatus(orderStatus)) {
		const statusChanged = mirror.orderStatus !== orderStatus;
		if (mirror.state === "assigned" && !statusChanged && mirror.driverId === orderDriverId) return { kind: "none" };
		return { kind: "assign", driverId: orderDriverId, statusChanged };
	}
	return { kind: "none" };
}
