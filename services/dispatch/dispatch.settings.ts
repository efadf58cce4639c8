import { envNumber, envPositive, type Env } from "../../lib/settings";
import { readKnownCredentialsSettings, type KnownCredentialsSettings } from "../../lib/known-credentials";
import { readTravelSettings, type TravelSettings } from "../../lib/travel-settings";
import { readRetentionSettings, type RetentionSettings } from "../../lib/retention";
import { readScheduleSettings } from "../../lib/schedule";
import type { FleetMode } from "../../contracts/dispatch";
import { DEFAULT_LOCATION_INTERVAL_MS, DEFAULT_SEARCH_RADIUS_METRES } from "../../contracts/constants";

/**
 * Dispatch configuration from the environment. Pure: pass any env object.
 * The road world (`FLEET_MODE`, `SIM_SPEED`, `SIM_CITIES`, `ROAD_FACTOR`,
 * `SPEED_KMH_*`) is read by lib/travel-settings, shared with the simulated
 * fleet; the rest are dispatch's own knobs, all optional with sane defaults.
 * An invalid value refuses start-up with a message naming the setting.
 */
export interface DispatchSettings extends TravelSettings, RetentionSettings {
	/** A scheduled ride's search ends this long before its pickup time at the latest (`SCHEDULE_SEARCH_MARGIN_SECONDS`, lib/schedule.ts). */
	scheduleSearchMarginMs: number;
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
	/** The longest wait between looks for a ride nobody could be offered (the wait doubles up to it; events wake the ride earlier). */
	retryMaxMs: number;
	/** Cadence of `location_updated` events while a ride is moving (contract default 5 s). */
	locationIntervalMs: number;
	/** The cadence for live rides: the contract's interval, never compressed by SIM_SPEED (real drivers, real time). */
	liveLocationIntervalMs: number;
	/** How often each dispatch instance looks for due work (matching, expiries, location events). */
	tickMs: number;
	/** How often each instance reconciles its rides with `orders.listActiveStates`. */
	sweepMs: number;
	/** Active rides per `orders.listActiveStates` page in the sweep (every sweep pages through all of them). */
	sweepPage: number;
	/** How often the in-memory index re-reads recently changed drivers (catches missed broker events). */
	indexRefreshMs: number;
	/** At most this many searching rides of one partner count as demand near a point (`DISPATCH_DEMAND_PER_PARTNER`). */
	demandPerPartner: number;
	/** A transition call in flight longer than this is treated as lost and reconciled. */
	transitionLeaseMs: number;
	/** How many candidates one matching attempt tries to claim, nearest first. */
	candidatesPerAttempt: number;
	/** How often an instance writes the positions it recorded to PostgreSQL and tells the other instances (one statement, one message). */
	positionFlushMs: number;
	/** An available driver not heard of for this long goes offline (`silent`) until its next position. */
	silentAfterMs: number;
	/** How often an instance looks for drivers gone silent. */
	presenceSweepMs: number;
	/** A position implying a faster straight-line speed than this since the driver's last one is refused (422 LOCATION_IMPLAUSIBLE). */
	maxSpeedKmh: number;
	/** Distance allowed on top of that speed (GPS jitter, a fix that arrives late). */
	jumpToleranceM: number;
	/** `arrived` only this close to the pickup (409 NOT_AT_PICKUP otherwise). */
	arrivalRadiusM: number;
	/** `/driver/offers` waits one instance holds at most (503 DRIVER_WAITS_FULL beyond). */
	maxWaits: number;
	/** How long an instance keeps a resolved driver token; a revocation clears it on every instance at once, this bounds a lost broadcast. */
	tokenCacheMs: number;
	/** Drivers one instance keeps in memory (state and newest position); the least recently used go first and are read again when needed. */
	driverCacheMax: number;
	/** The live driver tokens' digest prefixes kept in memory (KNOWN_CREDENTIALS_*, lib/known-credentials.ts). */
	knownTokens: KnownCredentialsSettings;
}

const atLeast = (env: Env, name: string, fallback: number, min: number): number => envNumber(env, name, fallback, (n) => n >= min, `at least ${min}`);
const intWithin = (env: Env, name: string, fallback: number, min: number, max: number): number =>
	envNumber(env, name, fallback, (n) => Number.isInteger(n) && n >= min && n <= max, `an integer ${min}..${max}`);

/**
 * The real-time cadence of location events: the contract's interval, and in
 * simulated mode compressed by SIM_SPEED like every other simulated duration
 * (with a floor, so SIM_SPEED=1000 does not flood the outbox).
 */
export function effectiveLocationIntervalMs(intervalMs: number, fleetMode: FleetMode, simSpeed: number, floorMs = 250): number {
	if (fleetMode !== "simulated" || simSpeed <= 1) return intervalMs;
	return Math.max(Math.min(floorMs, intervalMs), Math.round(intervalMs / simSpeed));
}

export function readDispatchSettings(env: Env): DispatchSettings {
	const travel = readTravelSettings(env);
	const liveLocationIntervalMs = atLeast(env, "LOCATION_INTERVAL_MS", DEFAULT_LOCATION_INTERVAL_MS, 50);
	const locationIntervalMs = effectiveLocationIntervalMs(liveLocationIntervalMs, travel.fleetMode, travel.simSpeed);
	return {
		...travel,
		h3Resolution: intWithin(env, "DISPATCH_H3_RESOLUTION", 8, 5, 10),
		searchRadiusM: envPositive(env, "DISPATCH_SEARCH_RADIUS_M", DEFAULT_SEARCH_RADIUS_METRES),
		supplyRadiusM: envPositive(env, "DISPATCH_SUPPLY_RADIUS_M", 3000),
		offerTimeoutMs: atLeast(env, "DISPATCH_OFFER_TIMEOUT_MS", 15_000, 100),
		dispatchTimeoutMs: atLeast(env, "DISPATCH_TIMEOUT_MS", 120_000, 100),
		scheduleSearchMarginMs: readScheduleSettings(env).searchMarginMs,
		retryMatchMs: atLeast(env, "DISPATCH_RETRY_MS", 1000, 10),
		retryMaxMs: atLeast(env, "DISPATCH_RETRY_MAX_MS", 30_000, 10),
		locationIntervalMs,
		liveLocationIntervalMs,
		// A few ticks per location interval, so location events keep their cadence.
		tickMs: atLeast(env, "DISPATCH_TICK_MS", Math.max(50, Math.min(500, Math.round(locationIntervalMs / 4))), 10),
		sweepMs: atLeast(env, "DISPATCH_SWEEP_MS", 5000, 100),
		sweepPage: intWithin(env, "DISPATCH_SWEEP_PAGE", 1000, 1, 10_000),
		indexRefreshMs: atLeast(env, "DISPATCH_INDEX_REFRESH_MS", 5000, 100),
		demandPerPartner: intWithin(env, "DISPATCH_DEMAND_PER_PARTNER", 10, 1, 100_000),
		transitionLeaseMs: atLeast(env, "DISPATCH_TRANSITION_LEASE_MS", 20_000, 1000),
		candidatesPerAttempt: intWithin(env, "DISPATCH_CANDIDATES", 5, 1, 50),
		positionFlushMs: atLeast(env, "DRIVER_POSITION_FLUSH_MS", 1000, 50),
		silentAfterMs: atLeast(env, "DRIVER_SILENT_AFTER_MS", 60_000, 1000),
		presenceSweepMs: atLeast(env, "DRIVER_PRESENCE_SWEEP_MS", 5000, 100),
		maxSpeedKmh: atLeast(env, "DRIVER_MAX_SPEED_KMH", 250, 10),
		jumpToleranceM: atLeast(env, "DRIVER_JUMP_TOLERANCE_M", 200, 0),
		arrivalRadiusM: atLeast(env, "DRIVER_ARRIVAL_RADIUS_M", 300, 10),
		maxWaits: intWithin(env, "DRIVER_MAX_WAITS", 50_000, 1, 10_000_000),
		tokenCacheMs: atLeast(env, "DRIVER_TOKEN_CACHE_MS", 60_000, 0),
		driverCacheMax: intWithin(env, "DRIVER_CACHE_MAX", 200_000, 100, 100_000_000),
		knownTokens: readKnownCredentialsSettings(env),
		// Offers and closed rides: DISPATCH_RETENTION_DAYS and the shared RETENTION_* (lib/retention.ts).
		...readRetentionSettings(env, "DISPATCH_RETENTION_DAYS"),
	};
}
