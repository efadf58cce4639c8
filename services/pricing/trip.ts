import { haversineMeters } from "../../lib/geo";
import type { Point } from "../../contracts/common";
import type { ErrorDetail } from "../../lib/errors";

/**
 * Trip sanity rules (API.md: pickup equal to drop, or a trip longer than the
 * configured maximum → 400 VALIDATION_ERROR). Returns the problems, empty
 * when the trip is fine.
 */
export interface TripLimits {
	minTripMetres: number;
	maxTripMetres: number;
}

/** Checked before routing: cheap, and spares a router the absurd requests. */
export function straightLineProblems(pickup: Point, drop: Point, limits: TripLimits): ErrorDetail[] {
	const straight = haversineMeters(pickup, drop);
	if (straight < Math.max(limits.minTripMetres, 1e-9)) {
		return [{ field: "drop", message: `drop must be at least ${limits.minTripMetres} m away from pickup` }];
	}
	if (straight > limits.maxTripMetres) return [tooLong(limits.maxTripMetres)];
	return [];
}

/** Checked on the routed distance: the one the partner is shown and charged for. */
export function routedDistanceProblems(distanceM: number, limits: TripLimits): ErrorDetail[] {
	return distanceM > limits.maxTripMetres ? [tooLong(limits.maxTripMetres)] : [];
}

function tooLong(maxTripMetres: number): ErrorDetail {
	return { field: "drop", message: `trip is longer than the maximum of ${formatKm(maxTripMetres)} km` };
}

function formatKm(m: number): string {
	return String(Math.round(m / 10) / 100);
}
