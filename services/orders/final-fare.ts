import { DROP_TOLERANCE_METRES, type FinalFare } from "../../contracts/orders";
import type { Point } from "../../contracts/common";
import type { FareTerms } from "../../contracts/pricing";
import { computeFare } from "../../lib/fare-math";
import { haversineMeters } from "../../lib/geo";

/**
 * The final fare of a dropped ride (API.md, "Final fare"), pure, in paise
 * until presented.
 *
 * - Trip: the quote holds when the driver drops within DROP_TOLERANCE_METRES
 *   of the booked drop, whatever route it took (a longer route never costs
 *   the rider more). A ride ended elsewhere is metered with the booked terms
 *   on the distance dispatch measured from the driver's positions: the lower
 *   of the fare for the time it actually took and for the time the quote's
 *   pace would take over that distance (traffic never makes it dearer), and
 *   never more than the quote. Without terms or a measured distance (rides
 *   booked before either existed) the quote holds.
 * - Waiting: seconds from `arrived` to `started` beyond the free waiting,
 *   at the terms' rate per minute, pro rata per second, rounded half up to
 *   the paisa once; added to the trip.
 */

export interface FinalFareInput {
	terms: FareTerms | null;
	/** The fare booked (paise) and its breakdown as presented at booking. */
	quotedPaise: number;
	quotedBreakdown: FinalFare["fareBreakdown"] | null;
	quotedDistance: number;
	quotedDuration: number;
	currency: string;
	bookedDrop: Point;
	/** Where the driver ended the ride; null when unknown. */
	droppedAt: Point | null;
	drivenMeters: number | null;
	startedAtMs: number | null;
	arrivedAtMs: number | null;
	droppedAtMs: number;
}

const toMajor = (paise: number): number => Math.round(paise) / 100;

/** `rate × seconds / 60`, rounded half up, in integers (no float drift). */
export function waitingChargePaise(perMinutePaise: number, chargedSeconds: number): number {
	return Math.floor((2 * perMinutePaise * chargedSeconds + 60) / 120);
}

/** Whole seconds waited at the pickup (arrived → started). */
export function waitingSecondsOf(arrivedAtMs: number | null, startedAtMs: number | null): number {
	if (arrivedAtMs === null || startedAtMs === null) return 0;
	return Math.max(0, Math.floor((startedAtMs - arrivedAtMs) / 1000));
}

export function computeFinalFare(i: FinalFareInput): FinalFare {
	const duration = i.startedAtMs === null ? 0 : Math.max(0, Math.round((i.droppedAtMs - i.startedAtMs) / 1000));
	const waitingSeconds = waitingSecondsOf(i.arrivedAtMs, i.startedAtMs);
	const chargedWaitingSeconds = i.terms ? Math.max(0, waitingSeconds - i.terms.freeWaitingSeconds) : 0;
	const waitingPaise = i.terms ? waitingChargePaise(i.terms.waitingPerMinutePaise, chargedWaitingSeconds) : 0;

	let basis: FinalFare["basis"] = "quote";
	let tripPaise = i.quotedPaise;
	let breakdown: FinalFare["fareBreakdown"] = i.quotedBreakdown ?? {
		baseFare: toMajor(i.quotedPaise),
		distanceFare: 0,
		timeFare: 0,
		surgeMultiplier: 1,
		tax: 0,
	};
	const endedElsewhere = i.droppedAt !== null && haversineMeters(i.droppedAt, i.bookedDrop) > DROP_TOLERANCE_METRES;
	if (i.terms && i.drivenMeters !== null && endedElsewhere) {
		const t = i.terms;
		const driven = Math.max(0, Math.round(i.drivenMeters));
		const paceDuration = i.quotedDistance > 0 ? Math.round((i.quotedDuration * driven) / i.quotedDistance) : duration;
		const actual = computeFare(t, driven, duration, t.surgeTenths);
		const paced = computeFare(t, driven, paceDuration, t.surgeTenths);
		const metered = paced.total < actual.total ? paced : actual;
		if (metered.total < i.quotedPaise) {
			basis = "metered";
			tripPaise = metered.total;
			breakdown = {
				baseFare: toMajor(metered.baseFare),
				distanceFare: toMajor(metered.distanceFare),
				timeFare: toMajor(metered.timeFare),
				surgeMultiplier: metered.surgeTenths / 10,
				tax: toMajor(metered.tax),
			};
		}
	}
	return {
		totalAmount: toMajor(tripPaise + waitingPaise),
		currency: i.currency,
		basis,
		quotedAmount: toMajor(i.quotedPaise),
		tripFare: toMajor(tripPaise),
		waitingCharge: toMajor(waitingPaise),
		fareBreakdown: breakdown,
		distance: i.drivenMeters === null ? i.quotedDistance : Math.max(0, Math.round(i.drivenMeters)),
		duration,
		waitingSeconds,
		chargedWaitingSeconds,
	};
}
