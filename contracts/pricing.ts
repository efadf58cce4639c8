/**
 * The pricing service's contract: the params of its actions (the
 * fastest-validator schemas the actions use, and the OpenAPI generator
 * reads), the types they validate into, and its replies. Type-only plus plain
 * data: no service code, no I/O.
 */
import { pickupAtRule, placeRule, serviceTypeRule, type Place, type ServiceType } from "./common";

/** `pricing.estimate` (partner; POST /ride/fare-estimate): one quote per service type, or only the one asked for. */
export const estimateParams = {
	$$strict: true,
	pickup: placeRule,
	drop: placeRule,
	serviceType: { ...serviceTypeRule, optional: true },
	/** Quotes for a scheduled ride picked up then (same window as create-order). */
	pickupAt: pickupAtRule,
} as const;

export interface EstimateParams {
	pickup: Place;
	drop: Place;
	serviceType?: ServiceType;
	/** ISO 8601 with an offset; absent = a ride now. */
	pickupAt?: string;
}

/** `pricing.verifyQuote` (partner; create-order with a quoteId): the quoted price, if the quote still holds. */
export const verifyQuoteParams = {
	quoteId: { type: "string", min: 1 },
	serviceType: serviceTypeRule,
	pickup: placeRule,
	drop: placeRule,
	/** The booking's pickup time in whole Unix seconds (create-order checked the window); absent = a ride now. */
	pickupAtSeconds: { type: "number", integer: true, min: 0, optional: true },
} as const;

export interface VerifyQuoteParams {
	quoteId: string;
	serviceType: ServiceType;
	pickup: Place;
	drop: Place;
	pickupAtSeconds?: number;
}

/** `pricing.quote` (internal; create-order without a quoteId): the trip at the current price. */
export const quoteParams = {
	serviceType: serviceTypeRule,
	pickup: placeRule,
	drop: placeRule,
	/** A scheduled ride: priced for then (no surge from today's supply). */
	scheduled: { type: "boolean", optional: true },
} as const;

export interface QuoteParams {
	serviceType: ServiceType;
	pickup: Place;
	drop: Place;
	scheduled?: boolean;
}

/** The fare breakdown partners see, in major units with ≤ 2 decimals. */
export interface FareBreakdown {
	baseFare: number;
	distanceFare: number;
	timeFare: number;
	surgeMultiplier: number;
	tax: number;
}

/** One entry of the fare-estimate body. */
export interface Quote {
	/** A signed token (`qt_…`), not a database row. */
	quoteId: string;
	serviceType: ServiceType;
	totalAmount: number;
	currency: string;
	/** Seconds until the nearest available driver reaches the pickup; null when unknown (always for a quote with `pickupAt`). */
	eta: number | null;
	/** ISO 8601. */
	expiresAt: string;
	fareBreakdown: FareBreakdown;
	/** This type's own trip distance/duration (the top-level ones are the first quote's). */
	distance: number;
	duration: number;
}

/** `pricing.estimate`'s reply: the fare-estimate body. */
export interface EstimateResult {
	distance: number;
	duration: number;
	quotes: Quote[];
}

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

/**
 * The terms a ride is booked on, stored with the order (orders migration 008):
 * the tariff and surge the fare was made with, what waiting at the pickup
 * costs, and the cancellation fee. Integer paise; orders computes the final
 * fare and the cancellation fee from these, so a tariff change never reaches
 * a booked ride.
 */
export interface FareTerms extends Tariff {
	/** The quote's surge multiplier × 10. */
	surgeTenths: number;
	/** Charged per minute of waiting at the pickup beyond the free minutes (per second, pro rata). */
	waitingPerMinutePaise: number;
	freeWaitingSeconds: number;
	/** The fixed fee of a cancel once the driver is near or has arrived (API.md, "Cancellation policy"). */
	cancellationFeePaise: number;
}

/** `pricing.verifyQuote` / `pricing.quote`'s reply: a trip with its price, as create-order stores it. */
export interface PricedTrip {
	serviceType: ServiceType;
	/** Major units, ≤ 2 decimals. */
	totalAmount: number;
	/** The same amount in integer minor units (what the database stores). */
	totalAmountPaise: number;
	currency: string;
	fareBreakdown: FareBreakdown;
	distance: number;
	duration: number;
	/** Present when the price comes from a verified quote. */
	quoteId?: string;
	/** The terms the ride is booked on (the tariff in force, the quote's surge). */
	terms?: FareTerms;
}

/** One service type's tariff as operators read it (major units). */
export interface TariffView {
	currency: string;
	baseFare: number;
	perKm: number;
	perMinute: number;
	minimumFare: number;
	taxPercent: number;
	waitingPerMinute: number;
	freeWaitingMinutes: number;
	cancellationFee: number;
}

/** `pricing.tariffs`' reply (operators). */
export interface TariffsReply {
	tariffs: Record<ServiceType, TariffView>;
	surgeMax: number;
	quoteTtlSeconds: number;
	maxTripKm: number;
}
