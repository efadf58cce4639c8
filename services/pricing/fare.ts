/**
 * Fare math. Tariffs are integer paise (minor units); distance fare and time
 * fare are exact fractions of a paisa until the very end, where the total is
 * rounded once (half up). Exact arithmetic uses BigInt over a common
 * denominator so no floating-point error creeps in.
 */

import type { ServiceType } from "../../contracts/common";
import type { FareBreakdown, PricedTrip, TariffView } from "../../contracts/pricing";

/** One service type's tariff, all money in integer minor units (paise). */
export interface Tariff {
	currency: string;
	baseFarePaise: number;
	perKmPaise: number;
	perMinutePaise: number;
	minimumFarePaise: number;
	/** Tax in basis points (500 = 5 %). */
	taxBasisPoints: number;
}

export type Tariffs = Record<ServiceType, Tariff>;

/** The fare of one trip in paise; `surgeTenths` is the multiplier × 10 (12 = 1.2×). */
export interface FarePaise {
	currency: string;
	baseFare: number;
	distanceFare: number;
	timeFare: number;
	surgeTenths: number;
	tax: number;
	/** What the rider pays. The only amount that is authoritative. */
	total: number;
	/** True when the minimum fare replaced the metered (surged) fare. */
	minimumApplied: boolean;
}

/** A fare as a quote token carries it (whether the minimum applied is not kept). */
export type QuotedFare = Omit<FarePaise, "minimumApplied">;

// Common denominator: metres→km (1000) × seconds→minutes (60) × surge tenths (10) × basis points (10 000).
const KM = 1000n;
const MIN = 60n;
const TENTHS = 10n;
const BP = 10_000n;
const DENOM = KM * MIN * TENTHS * BP;

/** n / d rounded half up, for non-negative n and positive d. */
function roundDiv(n: bigint, d: bigint): bigint {
	return (2n * n + d) / (2n * d);
}

function assertNonNegativeInt(name: string, v: number): void {
	if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${name} must be a non-negative integer, got ${v}`);
}

/**
 * The fare for a trip of `distanceM` metres and `durationS` seconds at
 * `surgeTenths` (10 = no surge). Metered fare = (base + per km + per minute)
 * × surge; the minimum fare replaces it when larger; tax is charged on that;
 * the total is rounded to the paisa once. The displayed parts are each
 * rounded for display only, so they can differ from the total by a paisa.
 */
export function computeFare(tariff: Tariff, distanceM: number, durationS: number, surgeTenths: number): FarePaise {
	assertNonNegativeInt("distance", distanceM);
	assertNonNegativeInt("duration", durationS);
	if (!Number.isSafeInteger(surgeTenths) || surgeTenths < 10) throw new RangeError(`surgeTenths must be an integer ≥ 10, got ${surgeTenths}`);

	// Every amount below is "paise × DENOM", exact.
	const base = BigInt(tariff.baseFarePaise) * DENOM;
	const distance = (BigInt(tariff.perKmPaise) * BigInt(distanceM) * DENOM) / KM; // exact: DENOM is a multiple of KM
	const time = (BigInt(tariff.perMinutePaise) * BigInt(durationS) * DENOM) / MIN;
	const metered = ((base + distance + time) * BigInt(surgeTenths)) / TENTHS;
	const minimum = BigInt(tariff.minimumFarePaise) * DENOM;
	const minimumApplied = minimum > metered;
	const beforeTax = minimumApplied ? minimum : metered;
	const tax = (beforeTax * BigInt(tariff.taxBasisPoints)) / BP;
	return {
		currency: tariff.currency,
		baseFare: tariff.baseFarePaise,
		distanceFare: Number(roundDiv(distance, DENOM)),
		timeFare: Number(roundDiv(time, DENOM)),
		surgeTenths,
		tax: Number(roundDiv(tax, DENOM)),
		total: Number(roundDiv(beforeTax + tax, DENOM)),
		minimumApplied,
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
export function tariffView(t: Tariff): TariffView {
	return {
		currency: t.currency,
		baseFare: toMajor(t.baseFarePaise),
		perKm: toMajor(t.perKmPaise),
		perMinute: toMajor(t.perMinutePaise),
		minimumFare: toMajor(t.minimumFarePaise),
		taxPercent: t.taxBasisPoints / 100,
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
