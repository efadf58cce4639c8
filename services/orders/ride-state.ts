/**
 * The ride state machine (API.md, "Ride states"): which status may follow
 * which, and who may make the move. Pure: the orders service checks a move
 * here first and then applies it as a conditional update in the database.
 *
 *   searching ──► accepted ──► arrived ──► started ──► dropped
 *       │             │            │           │
 *       └─────────────┴────────────┴───────────┴──► customer_cancelled   (partner)
 *   searching ──► no_driver_found                                         (system)
 *   accepted, arrived ──► searching                                       (the driver drops out)
 *   scheduled ──► searching (dispatch starts), no_driver_found (its rider stayed busy) (system)
 *   scheduled ──► customer_cancelled                                      (partner)
 */

import {
	ACTIVE_STATUSES,
	RIDE_STATUSES,
	TERMINAL_STATUSES,
	type ActiveStatus,
	type Actor,
	type InternalActor,
	type RideStatus,
	type TerminalStatus,
} from "../../contracts/orders";

export function isRideStatus(value: unknown): value is RideStatus {
	return typeof value === "string" && (RIDE_STATUSES as readonly string[]).includes(value);
}

export function isActive(status: RideStatus): status is ActiveStatus {
	return (ACTIVE_STATUSES as readonly string[]).includes(status);
}

export function isTerminal(status: RideStatus): status is TerminalStatus {
	return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

type Move = `${RideStatus}>${RideStatus}`;

/** Every legal move, per actor. Anything not listed is illegal. */
const MOVES: Record<Actor, ReadonlySet<Move>> = {
	partner: new Set<Move>([
		"scheduled>customer_cancelled",
		"searching>customer_cancelled",
		"accepted>customer_cancelled",
		"arrived>customer_cancelled",
		"started>customer_cancelled",
	]),
	driver: new Set<Move>([
		"searching>accepted",
		"accepted>arrived",
		"arrived>started",
		"started>dropped",
		// The driver drops out before the ride started: dispatched again.
		"accepted>searching",
		"arrived>searching",
	]),
	system: new Set<Move>([
		// A scheduled ride's dispatch starts at its lead time (schedule.ts), or it ends when its rider was busy until too late.
		"scheduled>searching",
		"scheduled>no_driver_found",
		// Nobody accepted within the dispatch timeout.
		"searching>no_driver_found",
		// Dispatch notices the assigned driver is gone (offline, timed out) before the ride started.
		"accepted>searching",
		"arrived>searching",
	]),
};

/** Whether `actor` may move a ride from `from` to `to`. */
export function canTransition(from: RideStatus, to: RideStatus, actor: Actor): boolean {
	return MOVES[actor]?.has(`${from}>${to}`) ?? false;
}

/**
 * Who makes an internal move (orders.transition) into `to` when the caller
 * (dispatch) does not say: only `no_driver_found` is the platform's own
 * decision; every other move is made on a driver's behalf. Never the partner:
 * partners cancel through orders.cancel only.
 */
export function defaultActorFor(to: RideStatus): InternalActor {
	return to === "no_driver_found" ? "system" : "driver";
}

/**
 * Whether reaching `to` is a webhook event (and so an event row with the next
 * sequence). Going back to `searching` is not: the contract sends nothing and
 * the next `accepted` carries the new driver.
 */
export function emitsEvent(to: RideStatus): boolean {
	return to !== "searching";
}
