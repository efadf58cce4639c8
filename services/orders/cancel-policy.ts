import { DRIVER_NEAR_ETA_SECONDS, DRIVER_NEAR_METRES, type CancellationRule } from "../../contracts/orders";
import type { Point } from "../../contracts/common";
import type { FareTerms } from "../../contracts/pricing";
import { haversineMeters } from "../../lib/geo";

/**
 * The cancellation policy (API.md, "Cancellation policy"), pure: what a
 * cancel of a ride costs now, and which rule says so.
 *
 * - `scheduled`, `searching`: free (no driver is on the way).
 * - `accepted`: free within the grace period after the driver accepted;
 *   after it, the service type's fixed fee once the driver is near (within
 *   DRIVER_NEAR_METRES of the pickup, or its ETA to the pickup at most
 *   DRIVER_NEAR_ETA_SECONDS), else free (the driver is still far).
 * - `arrived`: the fixed fee (the driver is at the pickup, waiting).
 * - `started`: the rider is on board. A preview or a confirmed cancel is
 *   refused (409 RIDE_NOT_CANCELLABLE); a plain cancel, which partners sent
 *   before the policy existed and which still succeeds, costs the fare booked.
 *
 * The fee and the fare come from the terms stored at booking; a ride booked
 * without terms (before they were stored) has no fixed fee.
 */

export interface CancelPolicyInput {
	status: string;
	terms: Pick<FareTerms, "cancellationFeePaise"> | null;
	/** The fare booked, paise. */
	farePaise: number;
	pickup: Point;
	/** When the current driver accepted (ms since the epoch); null before. */
	acceptedAtMs: number | null;
	driverLocation: Point | null;
	/** Seconds to the pickup as dispatch last estimated (while accepted). */
	etaSeconds: number | null;
	nowMs: number;
	graceSeconds: number;
}

export interface CancelCharge {
	feePaise: number;
	rule: CancellationRule;
}

/** Whether a driver on its way counts as near the pickup. */
export function driverIsNear(pickup: Point, driverLocation: Point | null, etaSeconds: number | null): boolean {
	if (typeof etaSeconds === "number" && etaSeconds <= DRIVER_NEAR_ETA_SECONDS) return true;
	return driverLocation !== null && haversineMeters(driverLocation, pickup) <= DRIVER_NEAR_METRES;
}

/** The fee of a cancel now; null for a ride that is no longer active (nothing to cancel). */
export function cancellationCharge(input: CancelPolicyInput): CancelCharge | null {
	const fixedFee = input.terms?.cancellationFeePaise ?? 0;
	switch (input.status) {
		case "scheduled":
			return { feePaise: 0, rule: "scheduled" };
		case "searching":
			return { feePaise: 0, rule: "searching" };
		case "accepted": {
			const sinceAcceptMs = input.acceptedAtMs === null ? 0 : input.nowMs - input.acceptedAtMs;
			if (sinceAcceptMs < input.graceSeconds * 1000) return { feePaise: 0, rule: "grace_period" };
			if (driverIsNear(input.pickup, input.driverLocation, input.etaSeconds)) return { feePaise: fixedFee, rule: "driver_near" };
			return { feePaise: 0, rule: "driver_far" };
		}
		case "arrived":
			return { feePaise: fixedFee, rule: "driver_arrived" };
		case "started":
			return { feePaise: input.farePaise, rule: "ride_started" };
		default:
			return null;
	}
}

/** Preview and confirmed cancels of a started ride are refused: only a plain cancel (the old contract) still ends it. */
export function previewAllowed(charge: CancelCharge): boolean {
	return charge.rule !== "ride_started";
}

/** A confirmed cancel goes ahead only while the fee is at most what the partner confirmed (paise). */
export function feeConfirmed(charge: CancelCharge, confirmedPaise: number): boolean {
	return charge.feePaise <= confirmedPaise;
}
