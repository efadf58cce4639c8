/**
 * Pricing's fare helpers: presentation (major units, breakdowns), surge, and
 * the exact fare math itself (lib/fare-math.ts, shared with orders' final
 * fare).
 */

import type { ServiceType } from "../../contracts/common";
import type { FareBreakdown, FareTerms, PricedTrip, TariffView } from "../../contracts/pricing";

export { computeFare, type FarePaise, type QuotedFare, type Tariff } from "../../lib/fare-math";
import type { FarePaise, QuotedFare, Tariff } from "../../lib/fare-math";

/** A tariff with what a booked ride's terms add: waiting at the pickup and the cancellation fee (paise). */
export interface RideTariff extends Tariff {
	waitingPerMinutePaise: number;
	freeWaitingSeconds: number;
	cancellationFeePaise: number;
}

export type Tariffs = Record<ServiceType, RideTariff>;

/** The terms a ride is booked on: this tariff at the quote's surge (stored with the order). */
export function fareTerms(t: RideTariff, surgeTenths: number): FareTerms {
	return {
		currency: t.currency,
		baseFarePaise: t.baseFarePaise,
		perKmPaise: t.perKmPaise,
		perMinutePaise: t.perMinutePaise,
		minimumFarePaise: t.minimumFarePaise,
		taxBasisPoints: t.taxBasisPoints,
		surgeTenths,
		waitingPerMinutePaise: t.waitingPerMinutePaise,
		freeWaitingSeconds: t.freeWaitingSeconds,
		cancellationFeePaise: t.cancellationFeePaise,
	};
}

/** Integer minor units → major units with at most 2 decimals (2617 → 26.17). */
export function toMajor(paise: number): number {
	if (!Number.isSafeInteger(paise)) throw new RangeError(`amount must be an integer number of paise, got ${paise}`);
	return paise / 100;
}

/**
 * Major units (≤ 2 decimals) → integer paise, exactly: 26.17 → 2617, never
 * 2616.9999. Throws on more than 2 decimals or a non-finite value.
 */
export function toPaise(major: number): number {
	if (typeof major !== "number" || !Number.isFinite(major)) throw new RangeError(`not a finite amount: ${major}`);
	const paise = Math.round(major * 100);
	if (Math.abs(paise - major * 100) > 1e-6) throw new RangeError(`amount ${major} has more than 2 decimals`);
	return paise;
}

export function breakdownOf(fare: Omit<FarePaise, "minimumApplied" | "total" | "currency">): FareBreakdown {
	return {
		baseFare: toMajor(fare.baseFare),
		distanceFare: toMajor(fare.distanceFare),
		timeFare: toMajor(fare.timeFare),
		surgeMultiplier: fare.surgeTenths / 10,
		tax: toMajor(fare.tax),
	};
}

/** A trip with its price, as create-order stores it; `quoteId` only when the price comes from a verified quote. */
export function pricedTrip(serviceType: ServiceType, fare: QuotedFare, distance: number, duration: number, quoteId?: string): PricedTrip {
	const trip: PricedTrip = {
		serviceType,
		totalAmount: toMajor(fare.total),
		totalAmountPaise: fare.total,
		currency: fare.currency,
		fareBreakdown: breakdownOf(fare),
		distance,
		duration,
	};
	if (quoteId !== undefined) trip.quoteId = quoteId;
	return trip;
}

/** A tariff as operators read it: major units, tax in percent. */
export function tariffView(t: RideTariff): TariffView {
	return {
		currency: t.currency,
		baseFare: toMajor(t.baseFarePaise),
		perKm: toMajor(t.perKmPaise),
		perMinute: toMajor(t.perMinutePaise),
		minimumFare: toMajor(t.minimumFarePaise),
		taxPercent: t.taxBasisPoints / 100,
		waitingPerMinute: toMajor(t.waitingPerMinutePaise),
		freeWaitingMinutes: t.freeWaitingSeconds / 60,
		cancellationFee: toMajor(t.cancellationFeePaise),
	};
}

export interface SurgePolicy {
	/** Highest multiplier in tenths (20 = 2.0×). */
	maxTenths: number;
	/** Multiplier added per unit of demand/supply above 1 (0.5: twice the demand of supply → 1.5×). */
	sensitivity: number;
}

/**
 * Surge multiplier (in tenths) from open demand vs available supply near the
 * pickup: 1.0× while supply covers demand, then rising linearly with the
 * excess ratio, rounded DOWN to a 0.1 step (never overcharge by rounding),
 * capped at the policy's maximum. No supply at all with demand counts as the
 * maximum shortage. Any odd input (negative, NaN) means no surge.
 */
export function surgeTenths(demand: number, supply: number, policy: SurgePolicy): number {
	if (!Number.isFinite(demand) || !Number.isFinite(supply) || demand <= 0 || supply < 0) return 10;
	if (supply === 0) return policy.maxTenths;
	const ratio = demand / supply;
	if (ratio <= 1) return 10;
	// The epsilon keeps exact steps exact (1 + 0.5×0.4 = 1.2 must not floor to 1.1).
	const tenths = Math.floor((1 + (ratio - 1) * policy.sensitivity) * 10 + 1e-9);
	return Math.max(10, Math.min(policy.maxTenths, tenths));
}
