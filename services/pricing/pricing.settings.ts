import { readScheduleSettings, type ScheduleSettings } from "../../lib/schedule";
import { readTravelSettings } from "../../lib/travel-settings";
import { envEnum, envNumber, envPositive, envString, SettingError, type Env } from "../../lib/settings";
import { DEFAULT_QUOTE_TTL_SECONDS, QUOTE_MATCH_RADIUS_METRES } from "../../contracts/constants";
import { SERVICE_TYPES, type ServiceType } from "../../contracts/common";
import { toPaise, type RideTariff, type Tariffs } from "./fare";

/**
 * Pricing configuration from the environment. Pure: pass any env object.
 * Every setting has a sane default except the quote signing secret, which is
 * never defaulted in code (it comes from QUOTE_SIGNING_SECRET or, when unset,
 * from the `pricing_secrets` table).
 */

export type { Env };

export interface PricingSettings {
	/** The booking window of scheduled rides (lib/schedule.ts): fare-estimate quotes only for a pickup time in it. */
	schedule: ScheduleSettings;
	tariffs: Tariffs;
	routing: Routing;
	osrmUrl: string | undefined;
	/** Road distance ≈ great-circle distance × this (streets are not straight). */
	roadFactor: number;
	/** Average speed per service type, km/h. */
	speedsKmh: Record<ServiceType, number>;
	surgeMaxTenths: number;
	surgeSensitivity: number;
	maxTripMetres: number;
	/** Pickup and drop closer than this (straight line) are "the same place". */
	minTripMetres: number;
	quoteTtlSeconds: number;
	/** How far (m) create-order's pickup/drop may be from the quoted ones. */
	quoteMatchRadiusMetres: number;
	/** Explicit signing secret (QUOTE_SIGNING_SECRET), else from the database. */
	signingSecret: string | undefined;
	/** Older secrets still accepted for verification during a rotation. */
	previousSigningSecrets: string[];
	supplyTimeoutMs: number;
	/** How long one dispatch.supplyDemand answer is reused for nearby pickups. */
	supplyCacheMs: number;
}

/** Where trip distance and duration come from (ROUTING, any case). */
export const ROUTINGS = ["greatcircle", "osrm"] as const;
export type Routing = (typeof ROUTINGS)[number];

/** Tariffs as configured (major units), e.g. in TARIFFS_JSON. */
export interface TariffConfig {
	currency?: string;
	baseFare?: number;
	perKm?: number;
	perMinute?: number;
	minimumFare?: number;
	taxPercent?: number;
	/** Per minute waited at the pickup beyond `freeWaitingMinutes` (charged per second, pro rata). */
	waitingPerMinute?: number;
	freeWaitingMinutes?: number;
	/** The fixed fee of a cancel once the driver is near or has arrived (API.md, "Cancellation policy"). */
	cancellationFee?: number;
}

export const DEFAULT_TARIFFS: Record<ServiceType, Required<TariffConfig>> = {
	scooty: {
		currency: "INR",
		baseFare: 20,
		perKm: 5,
		perMinute: 0.5,
		minimumFare: 30,
		taxPercent: 5,
		waitingPerMinute: 1,
		freeWaitingMinutes: 3,
		cancellationFee: 20,
	},
	cab: {
		currency: "INR",
		baseFare: 50,
		perKm: 14,
		perMinute: 1.5,
		minimumFare: 80,
		taxPercent: 5,
		waitingPerMinute: 2,
		freeWaitingMinutes: 3,
		cancellationFee: 50,
	},
};

/** Secrets shorter than this are refused: an HMAC key must not be guessable. */
export const MIN_SECRET_LENGTH = 32;

function tariffFrom(type: ServiceType, cfg: Required<TariffConfig>): RideTariff {
	const where = `TARIFFS_JSON.${type}`;
	if (!/^[A-Z]{3}$/.test(cfg.currency)) throw new Error(`${where}.currency must be an ISO 4217 code like "INR"`);
	const money = (field: keyof TariffConfig, v: unknown): number => {
		if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new Error(`${where}.${field} must be a non-negative number`);
		try {
			return toPaise(v);
		} catch {
			throw new Error(`${where}.${field} must have at most 2 decimals`);
		}
	};
	const tax = cfg.taxPercent;
	if (typeof tax !== "number" || !Number.isFinite(tax) || tax < 0 || tax > 100) throw new Error(`${where}.taxPercent must be 0..100`);
	const taxBasisPoints = Math.round(tax * 100);
	if (Math.abs(taxBasisPoints - tax * 100) > 1e-6) throw new Error(`${where}.taxPercent must have at most 2 decimals`);
	return {
		currency: cfg.currency,
		baseFarePaise: money("baseFare", cfg.baseFare),
		perKmPaise: money("perKm", cfg.perKm),
		perMinutePaise: money("perMinute", cfg.perMinute),
		minimumFarePaise: money("minimumFare", cfg.minimumFare),
		taxBasisPoints,
		waitingPerMinutePaise: money("waitingPerMinute", cfg.waitingPerMinute),
		freeWaitingSeconds: freeWaitingSeconds(where, cfg.freeWaitingMinutes),
		cancellationFeePaise: money("cancellationFee", cfg.cancellationFee),
	};
}

/** Free waiting in whole seconds: 0..60 minutes, in steps of a second. */
function freeWaitingSeconds(where: string, minutes: unknown): number {
	const seconds = typeof minutes === "number" ? minutes * 60 : NaN;
	if (!Number.isFinite(seconds) || seconds < 0 || seconds > 3600 || Math.abs(seconds - Math.round(seconds)) > 1e-6) {
		throw new Error(`${where}.freeWaitingMinutes must be 0..60 in steps of a second`);
	}
	return Math.round(seconds);
}

/**
 * TARIFFS_JSON overrides the defaults field by field, e.g.
 * `{"cab":{"perKm":16,"minimumFare":90}}` changes only those two.
 */
export function parseTariffs(json: string | undefined): Tariffs {
	let overrides: Record<string, unknown> = {};
	if (json !== undefined && json.trim() !== "") {
		try {
			overrides = JSON.parse(json) as Record<string, unknown>;
		} catch {
			throw new Error("TARIFFS_JSON is not valid JSON");
		}
		if (typeof overrides !== "object" || overrides === null || Array.isArray(overrides))
			throw new Error("TARIFFS_JSON must be an object keyed by service type");
		for (const key of Object.keys(overrides)) {
			if (!(SERVICE_TYPES as readonly string[]).includes(key)) throw new Error(`TARIFFS_JSON: unknown service type "${key}"`);
		}
	}
	const out = {} as Tariffs;
	for (const type of SERVICE_TYPES) {
		const o = (overrides[type] ?? {}) as Record<string, unknown>;
		if (typeof o !== "object" || o === null || Array.isArray(o)) throw new Error(`TARIFFS_JSON.${type} must be an object`);
		for (const key of Object.keys(o)) {
			if (!(key in DEFAULT_TARIFFS[type])) throw new Error(`TARIFFS_JSON.${type}: unknown field "${key}"`);
		}
		out[type] = tariffFrom(type, { ...DEFAULT_TARIFFS[type], ...(o as TariffConfig) });
	}
	return out;
}

/** An HMAC key shorter than MIN_SECRET_LENGTH stops the start-up, naming the setting (never echoing the secret). */
function checkedSecret(name: string, secret: string): string {
	if (secret.length < MIN_SECRET_LENGTH) throw new SettingError(name, `at least ${MIN_SECRET_LENGTH} characters long (each secret)`, "<redacted>");
	return secret;
}

export function readPricingSettings(env: Env): PricingSettings {
	// ROUTING is read in any case ("OSRM" means osrm).
	const routing = envEnum({ ROUTING: envString(env, "ROUTING")?.toLowerCase() }, "ROUTING", ROUTINGS, "greatcircle");
	const surgeMax = envNumber(env, "SURGE_MAX", 2, (n) => n >= 1 && n <= 10 && Math.abs(n * 10 - Math.round(n * 10)) < 1e-9, "1..10 in steps of 0.1");
	const secret = envString(env, "QUOTE_SIGNING_SECRET");
	const previous = (envString(env, "QUOTE_SIGNING_PREVIOUS_SECRETS") ?? "")
		.split(",")
		.map((s) => s.trim())
		.filter(Boolean);
	// Road factor and speeds are the road world's, read once for pricing, dispatch and the fleet alike.
	const travel = readTravelSettings(env);
	return {
		schedule: readScheduleSettings(env),
		tariffs: parseTariffs(envString(env, "TARIFFS_JSON")),
		routing,
		osrmUrl: envString(env, "OSRM_URL"),
		roadFactor: travel.roadFactor,
		speedsKmh: travel.speedsKmh,
		surgeMaxTenths: Math.round(surgeMax * 10),
		surgeSensitivity: envNumber(env, "SURGE_SENSITIVITY", 0.5, (n) => n >= 0 && n <= 10, "0..10"),
		maxTripMetres: Math.round(envPositive(env, "MAX_TRIP_KM", 100) * 1000),
		minTripMetres: envNumber(env, "MIN_TRIP_METRES", 20, (n) => n >= 0 && n <= 1000, "0..1000"),
		quoteTtlSeconds: envNumber(
			env,
			"QUOTE_TTL_SECONDS",
			DEFAULT_QUOTE_TTL_SECONDS,
			(n) => Number.isInteger(n) && n > 0 && n <= 86_400,
			"an integer 1..86400",
		),
		quoteMatchRadiusMetres: QUOTE_MATCH_RADIUS_METRES,
		signingSecret: secret === undefined ? undefined : checkedSecret("QUOTE_SIGNING_SECRET", secret),
		previousSigningSecrets: previous.map((s) => checkedSecret("QUOTE_SIGNING_PREVIOUS_SECRETS", s)),
		supplyTimeoutMs: envNumber(env, "SUPPLY_DEMAND_TIMEOUT_MS", 300, (n) => Number.isInteger(n) && n > 0 && n <= 10_000, "an integer 1..10000"),
		supplyCacheMs: envNumber(env, "SUPPLY_DEMAND_CACHE_MS", 2000, (n) => Number.isInteger(n) && n >= 0 && n <= 60_000, "an integer 0..60000"),
	};
}
