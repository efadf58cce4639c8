import type { ServiceType } from "../contracts/common";
import type { FleetMode } from "../contracts/dispatch";
import type { Point } from "../contracts/common";
import { envNumber, readSettings, SettingError, type Env } from "./settings";

/**
 * The settings of the (simulated or real) road world that pricing, dispatch
 * and the simulated fleet all read: the fleet mode, the simulation speed and cities,
 * and how fast drivers travel. Read once here so every service (they may
 * run in different processes) agree on every default.
 */
export interface TravelSettings {
	fleetMode: FleetMode;
	/** Simulated time runs this many times faster than real time (simulated mode). */
	simSpeed: number;
	simCities: Point[];
	/** Road distance ≈ great-circle distance × this (pricing, dispatch and the fleet all read it here). */
	roadFactor: number;
	/** Average driving speed per service type, km/h (pricing, dispatch and the fleet all read them here). */
	speedsKmh: Record<ServiceType, number>;
}

const speedKmh = (env: Env, name: string, fallback: number): number => envNumber(env, name, fallback, (n) => n > 0 && n <= 200, "0..200 km/h");

export function readTravelSettings(env: Env): TravelSettings {
	const base = readSettings(env);
	// Every simulated duration is divided by it.
	if (!(base.simSpeed > 0)) throw new SettingError("SIM_SPEED", "a number greater than 0", String(env.SIM_SPEED));
	return {
		fleetMode: base.fleetMode,
		simSpeed: base.simSpeed,
		simCities: base.simCities,
		roadFactor: envNumber(env, "ROAD_FACTOR", 1.3, (n) => n >= 1 && n <= 5, "1..5"),
		speedsKmh: { scooty: speedKmh(env, "SPEED_KMH_SCOOTY", 24), cab: speedKmh(env, "SPEED_KMH_CAB", 20) },
	};
}
