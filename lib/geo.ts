/**
 * Pure geo helpers on the WGS-84 sphere approximation (mean Earth radius).
 * Good to a few metres over city distances, which is all pricing, dispatch
 * and the simulated fleet need. Angles in degrees, distances in metres.
 */

import type { Point } from "../contracts/common";

/** Mean Earth radius (IUGG), metres. */
export const EARTH_RADIUS_M = 6_371_008.8;

const toRad = (deg: number): number => (deg * Math.PI) / 180;
const toDeg = (rad: number): number => (rad * 180) / Math.PI;

/** Normalises any angle to [0, 360). */
export function normalizeBearing(deg: number): number {
	const r = deg % 360;
	return r < 0 ? r + 360 : r === 0 ? 0 : r; // `=== 0` also turns -0 into 0
}

/** Normalises a longitude to [-180, 180). */
export function normalizeLng(lng: number): number {
	const r = ((((lng + 180) % 360) + 360) % 360) - 180;
	return r === 0 ? 0 : r;
}

/** Great-circle (haversine) distance in metres. */
export function haversineMeters(a: Point, b: Point): number {
	const dLat = toRad(b.lat - a.lat);
	const dLng = toRad(b.lng - a.lng);
	const s = Math.sin(dLat / 2) ** 2 + Math.cos(toRad(a.lat)) * Math.cos(toRad(b.lat)) * Math.sin(dLng / 2) ** 2;
	// min() guards against s creeping over 1 through rounding for antipodal points.
	return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(s)));
}

/**
 * Initial bearing (heading) from `a` towards `b`, degrees clockwise from
 * north in [0, 360). 0 for identical points (no meaningful direction).
 */
export function bearingDegrees(a: Point, b: Point): number {
	const φ1 = toRad(a.lat);
	const φ2 = toRad(b.lat);
	const Δλ = toRad(b.lng - a.lng);
	const y = Math.sin(Δλ) * Math.cos(φ2);
	const x = Math.cos(φ1) * Math.sin(φ2) - Math.sin(φ1) * Math.cos(φ2) * Math.cos(Δλ);
	if (y === 0 && x === 0) return 0;
	return normalizeBearing(toDeg(Math.atan2(y, x)));
}

/**
 * The point `distanceM` metres from `origin` along the great circle that
 * starts with heading `bearingDeg`.
 */
export function destinationPoint(origin: Point, bearingDeg: number, distanceM: number): Point {
	const δ = distanceM / EARTH_RADIUS_M;
	const θ = toRad(bearingDeg);
	const φ1 = toRad(origin.lat);
	const λ1 = toRad(origin.lng);
	const sinφ2 = Math.sin(φ1) * Math.cos(δ) + Math.cos(φ1) * Math.sin(δ) * Math.cos(θ);
	const φ2 = Math.asin(Math.max(-1, Math.min(1, sinφ2)));
	const λ2 = λ1 + Math.atan2(Math.sin(θ) * Math.sin(δ) * Math.cos(φ1), Math.cos(δ) - Math.sin(φ1) * sinφ2);
	return { lat: toDeg(φ2), lng: normalizeLng(toDeg(λ2)) };
}

/**
 * The point a `fraction` (0..1, clamped) of the way from `a` to `b` along the
 * great circle. Used to move simulated vehicles smoothly between waypoints.
 */
export function interpolate(a: Point, b: Point, fraction: number): Point {
	const f = Math.max(0, Math.min(1, fraction));
	if (f === 0) return { lat: a.lat, lng: a.lng };
	if (f === 1) return { lat: b.lat, lng: b.lng };
	const δ = haversineMeters(a, b) / EARTH_RADIUS_M;
	if (δ < 1e-12) return { lat: a.lat, lng: a.lng };
	const φ1 = toRad(a.lat);
	const λ1 = toRad(a.lng);
	const φ2 = toRad(b.lat);
	const λ2 = toRad(b.lng);
	const A = Math.sin((1 - f) * δ) / Math.sin(δ);
	const B = Math.sin(f * δ) / Math.sin(δ);
	const x = A * Math.cos(φ1) * Math.cos(λ1) + B * Math.cos(φ2) * Math.cos(λ2);
	const y = A * Math.cos(φ1) * Math.sin(λ1) + B * Math.cos(φ2) * Math.sin(λ2);
	const z = A * Math.sin(φ1) + B * Math.sin(φ2);
	return { lat: toDeg(Math.atan2(z, Math.sqrt(x * x + y * y))), lng: normalizeLng(toDeg(Math.atan2(y, x))) };
}

/** Rounds a coordinate to `decimals` places (5 places ≈ 1.1 m). */
export function roundCoordinate(value: number, decimals = 5): number {
	const f = 10 ** decimals;
	const r = Math.round(value * f) / f;
	return r === 0 ? 0 : r;
}

/** True when the value is a usable point (finite, lat -90..90, lng -180..180). */
export function isValidPoint(p: unknown): p is Point {
	const q = p as Point | null | undefined;
	return (
		typeof q === "object" &&
		q !== null &&
		typeof q.lat === "number" &&
		Number.isFinite(q.lat) &&
		q.lat >= -90 &&
		q.lat <= 90 &&
		typeof q.lng === "number" &&
		Number.isFinite(q.lng) &&
		q.lng >= -180 &&
		q.lng <= 180
	);
}
