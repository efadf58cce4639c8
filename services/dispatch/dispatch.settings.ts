import { envNumber, readSettings, type Env, type Point } from "../../lib/settings";

/**
 * Dispatch and simulated-fleet configuration from the environment. Pure:
 * pass any env object. The contract's settings (`FLEET_MODE`, `SIM_SPEED`,
 * `SIM_CITIES`) come from lib/settings; the rest are dispatch's own knobs,
 * all optional with sane defaults.
 */

export type ServiceType = "scooty" | "cab";
export const SERVICE_TYPES: readonly ServiceType[] = ["scooty", "cab"];

export interface DispatchSettings {
	fleetMode: "simulated" | "live";
	simSpeed: number;
	simCities: Point[];
	/** H3 resolution of the nearest-driver index (8 ≈ 460 m hexagon edges). */
	h3Resolution: number;
	/** Drivers farther than this (straight line) from the pickup are never offered the ride. */
	searchRadiusM: number;
	/** Radius around a point in which available drivers and demand are counted for pricing. */
	supplyRadiusM: number;
	/** How long a driver has to answer an offer before the next driver is asked. */
	offerTimeoutMs: number;
	/** How long a ride may stay `searching` before it ends as `no_driver_found`. */
	dispatchTimeoutMs: number;
	/** Wait before looking again when no driver could be offered the ride. */
	retryMatchMs: number;
	/** Cadence of `location_updated` events while a ride is moving (contract default 5 s). */
	locationIntervalMs: number;
	/** How often each dispatch instance looks for due work (matching, expiries, location events). */
	tickMs: number;
	/** How often each instance reconciles its rides with `orders.listActive`. */
	sweepMs: number;
	/** How often the in-memory index re-reads recently changed drivers (catches missed broker events). */
	indexRefreshMs: number;
	/** Ride requests newer than this count as demand near a point. */
	demandWindowMs: number;
	/** A transition call in flight longer than this is treated as lost and reconciled. */
	transitionLeaseMs: number;
	/** Road distance ≈ great-circle distance × this (same default as pricing's ROAD_FACTOR). */
	roadFactor: number;
	/** Average driving speed per service type, km/h (same defaults as pricing's SPEED_KMH_*). */
	speedsKmh: Record<ServiceType, number>;
	/** How many candidates one matching attempt tries to claim, nearest first. */
	candidatesPerAttempt: number;
}

export interface FleetSettings {
	fleetMode: "simulated" | "live";
	simSpeed: number;
	simCities: Point[];
	/** Seeded drivers per service type per city. */
	driversPerCity: number;
	/** Seeded drivers stand within this radius of their city centre. */
	seedRadiusM: number;
	/** A pickup with no simulated driver within this radius gets one spawned nearby. */
	spawnRadiusM: number;
	/** How often the simulator looks at its drivers' work (real milliseconds, not compressed). */
	tickMs: number;
	/** Simulated-world timings (divided by SIM_SPEED in real time). */
	acceptDelayMs: number;
	boardingDelayMs: number;
	/** How often a moving simulated driver reports its position, simulated-world ms. */
	reportIntervalMs: number;
	/** Real-time floor of the report interval, however high SIM_SPEED is. */
	minReportIntervalMs: number;
	roadFactor: number;
	speedsKmh: Record<ServiceType, number>;
	/** "fast" sandbox rides: real milliseconds per leg, however long it is. */
	fastLegMs: number;
}


const positive = (n: number): boolean => n > 0;
const nonNegative = (n: number): boolean => n >= 0;

function speeds(env: Env): Record<ServiceType, number> {
	return {
		scooty: envNumber(env, "SPEED_KMH_SCOOTY", 24, (n) => n > 0 && n <= 200, "0..200 km/h"),
		cab: envNumber(env, "SPEED_KMH_CAB", 20, (n) => n > 0 && n <= 200, "0..200 km/h"),
	};
}

/**
 * The real-time cadence of location events: the contract's interval, and in
 * simulated mode compressed by SIM_SPEED like every other simulated duration
 * (with a floor, so SIM_SPEED=1000 does not flood the outbox).
 */
export function effectiveLocationIntervalMs(intervalMs: number, fleetMode: "simulated" | "live", simSpeed: number, floorMs = 250): number {
	if (fleetMode !== "simulated" || simSpeed <= 1) return intervalMs;
	return Math.max(Math.min(floorMs, intervalMs), Math.round(intervalMs / simSpeed));
}

export function readDispatchSettings(env: Env): DispatchSettings {
	const base = readSettings(env);
	if (!(base.simSpeed > 0)) throw new Error("SIM_SPEED must be a positive number");
	const locationIntervalMs = effectiveLocationIntervalMs(
		envNumber(env, "LOCATION_INTERVAL_MS", 5000, (n) => n >= 50, "at least 50"),
		base.fleetMode,
		base.simSpeed,
	);
	return {
		fleetMode: base.fleetMode,
		simSpeed: base.simSpeed,
		simCities: base.simCities,
		h3Resolution: envNumber(env, "DISPATCH_H3_RESOLUTION", 8, (n) => Number.isInteger(n) && n >= 5 && n <= 10, "an integer 5..10"),
		searchRadiusM: envNumber(env, "DISPATCH_SEARCH_RADIUS_M", 5000, positive, "positive"),
		supplyRadiusM: envNumber(env, "DISPATCH_SUPPLY_RADIUS_M", 3000, positive, "positive"),
		offerTimeoutMs: envNumber(env, "DISPATCH_OFFER_TIMEOUT_MS", 15_000, (n) => n >= 100, "at least 100"),
		dispatchTimeoutMs: envNumber(env, "DISPATCH_TIMEOUT_MS", 120_000, (n) => n >= 100, "at least 100"),
		retryMatchMs: envNumber(env, "DISPATCH_RETRY_MS", 1000, (n) => n >= 10, "at least 10"),
		locationIntervalMs,
		tickMs: envNumber(env, "DISPATCH_TICK_MS", Math.max(50, Math.min(500, Math.round(locationIntervalMs / 4))), (n) => n >= 10, "at least 10"),
		sweepMs: envNumber(env, "DISPATCH_SWEEP_MS", 5000, (n) => n >= 100, "at least 100"),
		indexRefreshMs: envNumber(env, "DISPATCH_INDEX_REFRESH_MS", 5000, (n) => n >= 100, "at least 100"),
		demandWindowMs: envNumber(env, "DISPATCH_DEMAND_WINDOW_MS", 5 * 60_000, nonNegative, "non-negative"),
		transitionLeaseMs: envNumber(env, "DISPATCH_TRANSITION_LEASE_MS", 20_000, (n) => n >= 1000, "at least 1000"),
		roadFactor: envNumber(env, "ROAD_FACTOR", 1.3, (n) => n >= 1 && n <= 5, "1..5"),
		speedsKmh: speeds(env),
		candidatesPerAttempt: envNumber(env, "DISPATCH_CANDIDATES", 5, (n) => Number.isInteger(n) && n >= 1 && n <= 50, "an integer 1..50"),
	};
}

export function readFleetSettings(env: Env): FleetSettings {
	const base = readSettings(env);
	if (!(base.simSpeed > 0)) throw new Error("SIM_SPEED must be a positive number");
	return {
		fleetMode: base.fleetMode,
		simSpeed: base.simSpeed,
		simCities: base.simCities,
		driversPerCity: envNumber(env, "FLEET_DRIVERS_PER_CITY", 10, (n) => Number.isInteger(n) && n >= 0 && n <= 100_000, "an integer 0..100000"),
		seedRadiusM: envNumber(env, "FLEET_SEED_RADIUS_M", 4000, positive, "positive"),
		spawnRadiusM: envNumber(env, "FLEET_SPAWN_RADIUS_M", 3000, positive, "positive"),
		tickMs: envNumber(env, "FLEET_TICK_MS", 200, (n) => n >= 10, "at least 10"),
		acceptDelayMs: envNumber(env, "FLEET_ACCEPT_DELAY_MS", 5000, nonNegative, "non-negative"),
		boardingDelayMs: envNumber(env, "FLEET_BOARDING_DELAY_MS", 60_000, nonNegative, "non-negative"),
		reportIntervalMs: envNumber(env, "FLEET_REPORT_INTERVAL_MS", 5000, positive, "positive"),
		minReportIntervalMs: envNumber(env, "FLEET_MIN_REPORT_INTERVAL_MS", 200, positive, "positive"),
		roadFactor: envNumber(env, "ROAD_FACTOR", 1.3, (n) => n >= 1 && n <= 5, "1..5"),
		speedsKmh: speeds(env),
		fastLegMs: envNumber(env, "FLEET_FAST_LEG_MS", 1500, positive, "positive"),
	};
}
