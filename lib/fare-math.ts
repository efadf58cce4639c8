/**
 * Fare math shared by pricing (quotes) and orders (a ride's final fare from
 * the terms stored at booking). Tariffs are integer paise (minor units);
 * distance fare and time fare are exact fractions of a paisa until the very
 * end, where the total is rounded once (half up). Exact arithmetic uses
 * BigInt over a common denominator so no floating-point error creeps in.
 */

import type { Tariff } from "../contracts/pricing";

export type { Tariff };

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
