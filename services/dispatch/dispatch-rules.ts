import type { Point } from "../../contracts/common";
import { haversineMeters } from "../../lib/geo";
import type { ServiceType } from "../../contracts/common";
import { SANDBOX_SCENARIOS, type DriverMode, type FleetMode, type RidePhase, type SandboxScenario } from "../../contracts/dispatch";
import { TERMINAL_STATUSES, type RideStatus } from "../../contracts/orders";
import { sandboxDirectiveOf } from "../../lib/sandbox-directive";

/**
 * Dispatch's pure rules: ETAs, which order statuses need a driver or location
 * events, sandbox directives, and how dispatch's own view of a ride follows
 * the order (the orders service owns the state machine; dispatch mirrors it).
 */

/** The statuses in which the order has a driver (dispatch holds that driver on the ride). */
export const ASSIGNED_ORDER_STATUSES: readonly RideStatus[] = ["accepted", "arrived", "started"];

export function isTerminalStatus(status: string): boolean {
	return (TERMINAL_STATUSES as readonly string[]).includes(status);
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
export function legTarget(status: string, pickup: Point, drop: Point): Point | null {
	if (status === "accepted" || status === "arrived") return pickup;
	if (status === "started") return drop;
	return null;
}

/** Road distance estimate from the straight-line distance. */
export function roadDistanceM(from: Point, to: Point, roadFactor: number): number {
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

export function etaBetween(from: Point, to: Point, serviceType: ServiceType, speedsKmh: Record<ServiceType, number>, roadFactor: number): number {
	return etaSeconds(haversineMeters(from, to), speedsKmh[serviceType], roadFactor);
}

/**
 * The sandbox scenario of an order, or null. Only test rides served by the
 * simulated fleet obey directives: on a live ride, or in `FLEET_MODE=live`,
 * they are ignored, so a partner cannot steer real dispatch through
 * metadata. Unknown scenarios are ignored too.
 */
export function sandboxScenario(metadata: unknown, fleetMode: FleetMode, mode: DriverMode = "test"): SandboxScenario | null {
	if (fleetMode !== "simulated" || mode !== "test") return null;
	const scenario = sandboxDirectiveOf(metadata);
	return scenario !== null && (SANDBOX_SCENARIOS as readonly string[]).includes(scenario) ? (scenario as SandboxScenario) : null;
}

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

/**
 * Demand near a point for surge: each partner's searching rides count up to
 * `perPartnerCap`, so one partner's burst of requests (or of requests it
 * cancels again) cannot raise every partner's fares beyond its share.
 */
export function cappedDemand(perPartner: Iterable<number>, perPartnerCap: number): number {
	let total = 0;
	for (const n of perPartner) total += Math.max(0, Math.min(n, perPartnerCap));
	return total;
}

/** Errors of orders that mean "it decided no" (as opposed to "it did not answer"). */
const DEFINITIVE_ORDER_ERRORS = new Set(["CONFLICT", "INVALID_TRANSITION", "ORDER_NOT_FOUND", "RIDE_NOT_ACTIVE", "INVALID_OTP", "VALIDATION_ERROR"]);

/** Orders refused the call for good: dispatch must take the order's truth (a timeout is not a refusal). */
export function isDefinitiveRefusal(err: unknown): boolean {
	const e = err as { code?: number; type?: string };
	return typeof e?.code === "number" && e.code >= 400 && e.code < 500 && typeof e.type === "string" && DEFINITIVE_ORDER_ERRORS.has(e.type);
}

export function errorType(err: unknown): string | undefined {
	return (err as { type?: string })?.type;
}

/** An error in one line for the logs. */
export function shortError(err: unknown): string {
	const e = err as { type?: string; message?: string };
	return `${e?.type ?? "ERROR"}: ${e?.message ?? String(err)}`;
}
