import { haversineMeters } from "../../lib/geo";
import type { Point, ServiceType } from "../../contracts/common";
import type { PricingSettings } from "./pricing.settings";

/** A trip's road distance (metres, integer) and duration (seconds, integer). */
export interface RouteEstimate {
	distance: number;
	duration: number;
}

/**
 * Where trip distance and duration come from. The default needs no network;
 * a road router (OSRM) can replace it behind this same interface.
 */
export interface RouteEstimator {
	estimate(pickup: Point, drop: Point, serviceType: ServiceType): Promise<RouteEstimate>;
}

/** Pure form of the default estimator (unit-tested directly). */
export function greatCircleRoute(pickup: Point, drop: Point, roadFactor: number, speedKmh: number): RouteEstimate {
	const distance = Math.round(haversineMeters(pickup, drop) * roadFactor);
	// Round the duration up: a trip never takes zero seconds, and an ETA that is too short is the worse error.
	const duration = Math.ceil(distance / ((speedKmh * 1000) / 3600));
	return { distance, duration };
}

/** Great-circle distance × road factor, at an average speed per service type. */
export class GreatCircleRouteEstimator implements RouteEstimator {
	constructor(
		private readonly roadFactor: number,
		private readonly speedsKmh: Record<ServiceType, number>,
	) {}

	estimate(pickup: Point, drop: Point, serviceType: ServiceType): Promise<RouteEstimate> {
		return Promise.resolve(greatCircleRoute(pickup, drop, this.roadFactor, this.speedsKmh[serviceType]));
	}
}

/**
 * The estimator the settings ask for. `ROUTING=osrm` is reserved for a road
 * router and not built yet: refuse it at start rather than silently price
 * with something else.
 */
export function createRouteEstimator(settings: Pick<PricingSettings, "routing" | "osrmUrl" | "roadFactor" | "speedsKmh">): RouteEstimator {
	if (settings.routing === "osrm") {
		throw new Error("ROUTING=osrm is not implemented in this version; unset ROUTING (or set ROUTING=greatcircle) to use the great-circle estimator");
	}
	return new GreatCircleRouteEstimator(settings.roadFactor, settings.speedsKmh);
}
