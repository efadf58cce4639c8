import { envNumber, envPositive, type Env } from "../../lib/settings";
import { readTravelSettings, type TravelSettings } from "../../lib/travel-settings";

/**
 * Simulated-fleet configuration from the environment. Pure: pass any env
 * object. The road world (`FLEET_MODE`, `SIM_SPEED`, `SIM_CITIES`,
 * `ROAD_FACTOR`, `SPEED_KMH_*`) is read by lib/travel-settings, so the fleet
 * and dispatch agree on it; the rest are the simulator's own knobs.
 * An invalid value refuses start-up with a message naming the setting.
 */
export interface FleetSettings extends TravelSettings {
	/** Seeded drivers per service type per city. */
	driversPerCity: number;
	/**
	 * At most this many simulated drivers ever exist (`SIM_MAX_DRIVERS`): the
	 * seeded ones plus drivers spawned near far pickups, which take numbered
	 * slots (one phone each), so the bound holds across fleet instances. Past it, an
	 * idle spawned driver is moved to the pickup, or the ride ends `no_driver_found`.
	 */
	maxDrivers: number;
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
	/** "fast" sandbox rides: real milliseconds per leg, however long it is. */
	fastLegMs: number;
}

const nonNegative = (env: Env, name: string, fallback: number): number => envNumber(env, name, fallback, (n) => n >= 0, "non-negative");

/** Drivers seeded at start: per city, per service type. */
export function seededCount(s: Pick<FleetSettings, "simCities" | "driversPerCity">): number {
	return s.simCities.length * 2 * s.driversPerCity;
}

/** Spawn slots left under the bound once the seeded drivers are counted. */
export function spawnSlots(s: Pick<FleetSettings, "simCities" | "driversPerCity" | "maxDrivers">): number {
	return Math.max(0, s.maxDrivers - seededCount(s));
}

export function readFleetSettings(env: Env): FleetSettings {
	const travel = readTravelSettings(env);
	const driversPerCity = envNumber(env, "FLEET_DRIVERS_PER_CITY", 10, (n) => Number.isInteger(n) && n >= 0 && n <= 100_000, "an integer 0..100000");
	const seeded = seededCount({ simCities: travel.simCities, driversPerCity });
	const maxDrivers = envNumber(
		env,
		"SIM_MAX_DRIVERS",
		Math.max(200, seeded),
		(n) => Number.isInteger(n) && n >= seeded && n <= 1_000_000,
		`an integer ${seeded}..1000000 (at least the ${seeded} seeded drivers)`,
	);
	return {
		...travel,
		driversPerCity,
		maxDrivers,
		seedRadiusM: envPositive(env, "FLEET_SEED_RADIUS_M", 4000),
		spawnRadiusM: envPositive(env, "FLEET_SPAWN_RADIUS_M", 3000),
		tickMs: envNumber(env, "FLEET_TICK_MS", 200, (n) => n >= 10, "at least 10"),
		acceptDelayMs: nonNegative(env, "FLEET_ACCEPT_DELAY_MS", 5000),
		boardingDelayMs: nonNegative(env, "FLEET_BOARDING_DELAY_MS", 60_000),
		reportIntervalMs: envPositive(env, "FLEET_REPORT_INTERVAL_MS", 5000),
		minReportIntervalMs: envPositive(env, "FLEET_MIN_REPORT_INTERVAL_MS", 200),
		fastLegMs: envPositive(env, "FLEET_FAST_LEG_MS", 1500),
	};
}
