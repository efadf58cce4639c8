import type { Point } from "../../contracts/common";
import { EARTH_RADIUS_M, haversineMeters } from "../../lib/geo";

/**
 * The distance a started ride's driver drove, pure parts. Dispatch samples
 * the driver's position at each location tick of a started ride (the claim
 * of matching.repo.ts' `claimDueLocations` adds the leg from the last sample,
 * or from the pickup, in the same statement: no extra write per ping) and
 * adds the last leg at the drop. A detour counts in full; a straight drive
 * counts its straight length whatever the sampling, so the measure is as
 * fine as the location cadence (`LOCATION_INTERVAL_MS`) on a curving road.
 */

/** The ride's driven-distance columns (dispatch migration 011). */
export interface DrivenSoFar {
	driven_m?: number | null;
	driven_lat?: number | null;
	driven_lng?: number | null;
	pickup_lat: number;
	pickup_lng: number;
}

/** Metres driven when the driver drops at `at`: the sum so far plus the leg from the last sample (or the pickup). */
export function drivenMetersAtDrop(ride: DrivenSoFar, at: Point | null): number {
	const last =
		typeof ride.driven_lat === "number" && typeof ride.driven_lng === "number"
			? { lat: ride.driven_lat, lng: ride.driven_lng }
			: { lat: ride.pickup_lat, lng: ride.pickup_lng };
	const leg = at ? haversineMeters(last, at) : 0;
	return Math.round((ride.driven_m ?? 0) + leg);
}

/**
 * lib/geo's haversine in SQL (same Earth radius), for the sampling in the
 * location claim: metres between two points given as SQL expressions.
 */
export function haversineSql(lat1: string, lng1: string, lat2: string, lng2: string): string {
	return `(2 * ${EARTH_RADIUS_M} * asin(least(1, sqrt(
		power(sin(radians(${lat2} - ${lat1}) / 2), 2)
		+ cos(radians(${lat1})) * cos(radians(${lat2})) * power(sin(radians(${lng2} - ${lng1}) / 2), 2)))))`;
}
