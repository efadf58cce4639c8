import type { InternalActor, RideStatus, TransitionParams } from "../../contracts/orders";
import { ApiError, validationError } from "../../lib/errors";
import { canTransition, defaultActorFor } from "./ride-state";
import type { OrderRow } from "./order-view";
import type { MoveChanges } from "./orders.repo";
import { otpMatches } from "./otp";
import { computeFinalFare } from "./final-fare";
import type { FinalFare } from "../../contracts/orders";

/**
 * What an internal move (orders.transition) writes, decided from the
 * request and the order as read, before anything is written. Pure: throws
 * the contract's errors (409 INVALID_TRANSITION / CONFLICT, 422 INVALID_OTP,
 * 400 for an `accepted` without a full driver).
 */
export interface TransitionPlan {
	from: RideStatus;
	actor: InternalActor;
	changes: MoveChanges;
	/** Only this driver's drop-out counts (a move back to `searching`). */
	expectDriverId?: string;
}

export function planTransition(p: TransitionParams, row: Pick<OrderRow, "status" | "otp">): TransitionPlan {
	const from = p.from ?? row.status;
	const actor = p.actor ?? defaultActorFor(p.to);
	if (!canTransition(from, p.to, actor)) {
		throw new ApiError("INVALID_TRANSITION", `A ${actor} cannot move a ride from ${from} to ${p.to}`);
	}
	if (row.status !== from) throw new ApiError("CONFLICT", `The ride is ${row.status}, not ${from}`);

	const changes: MoveChanges = {};
	let expectDriverId: string | undefined;
	switch (p.to) {
		case "accepted": {
			const d = p.driver;
			if (!d || !d.name || !d.phone || !d.vehicleNumber) {
				throw validationError("driver", "accepted needs driver { id, name, phone, vehicleNumber }");
			}
			changes.driver = { id: d.id, name: d.name, phone: d.phone, vehicleNumber: d.vehicleNumber };
			changes.driverLocation = p.location ?? d.location ?? null;
			changes.eta = p.eta ?? null;
			break;
		}
		case "started":
			// The OTP never changes, so comparing it with the row read before the update is safe.
			// Constant time; the try was counted before (orders.transition reserves it).
			if (!otpMatches(p.otp, row.otp)) throw new ApiError("INVALID_OTP", "The OTP does not match this ride");
			if (p.location) changes.driverLocation = p.location;
			changes.eta = p.eta ?? null;
			break;
		case "searching":
			// The driver dropped out: forget them; only that driver's drop-out counts.
			changes.driver = null;
			changes.driverLocation = null;
			changes.eta = null;
			// The OTP tries were that driver's: a driver who burned them and dropped out must not lock the
			// next one out (the limit is per driver at the pickup, otp.ts).
			changes.resetOtpTries = true;
			expectDriverId = p.driver?.id;
			break;
		case "dropped":
			if (p.location) changes.driverLocation = p.location;
			changes.eta = null;
			break;
		default:
			if (p.location) changes.driverLocation = p.location;
			changes.eta = p.eta ?? null;
	}
	return { from, actor, changes, expectDriverId };
}

const msOf = (value: Date | string | null | undefined): number | null => (value ? new Date(value).getTime() : null);

/**
 * A drop's final fare (final-fare.ts) from the order as read and the drop:
 * where the driver is (the drop's location, else its last known one), the
 * distance dispatch measured, and `nowMs` as the drop's time.
 */
export function finalFareOf(row: OrderRow, p: Pick<TransitionParams, "location" | "drivenMeters">, nowMs: number): FinalFare {
	const at = p.location ?? row.driver_location;
	return computeFinalFare({
		terms: row.fare_terms ?? null,
		quotedPaise: row.fare_paise,
		quotedBreakdown: (row.fare_breakdown as FinalFare["fareBreakdown"] | null) ?? null,
		quotedDistance: row.distance,
		quotedDuration: row.duration,
		currency: row.currency,
		bookedDrop: row.drop,
		droppedAt: at ? { lat: at.lat, lng: at.lng } : null,
		drivenMeters: p.drivenMeters ?? null,
		startedAtMs: msOf(row.started_at),
		arrivedAtMs: msOf(row.arrived_at),
		droppedAtMs: nowMs,
	});
}
