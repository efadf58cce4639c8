import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_RATE_LIMIT_PER_MINUTE, UNAVAILABLE_RETRY_AFTER_SECONDS } from "../../contracts/constants";
import { envNumber, readSettings, SettingError, type Env } from "../../lib/settings";

/**
 * Gateway settings from the environment, with the one policy of
 * lib/settings.ts: unset or blank → the default; anything else must be valid
 * or start-up stops naming the setting. Pure: pass any env object. Read when
 * the service is created (not when the module loads), so a test can start
 * two gateways with different limits in one process.
 */
export interface GatewaySettings {
	port: number;
	/** Largest accepted request body in bytes (BODY_LIMIT). */
	bodyLimitBytes: number;
	/** Sustained requests per minute per partner (RATE_LIMIT_PER_MINUTE); 0 turns the limiter off. */
	rateLimitPerMinute: number;
	/** Requests a partner may make at once before the sustained rate applies (RATE_LIMIT_BURST). */
	rateLimitBurst: number;
	/** `Retry-After` seconds sent with 503 SERVICE_UNAVAILABLE (a contract number, not a setting). */
	unavailableRetryAfterSeconds: number;
	/** How long one readiness check may wait for a service's answer (READY_CHECK_TIMEOUT_MS). */
	readyCheckTimeoutMs: number;
}

/** What the OpenAPI document states about the limits this gateway runs with. */
export type DocumentedLimits = Pick<GatewaySettings, "bodyLimitBytes" | "rateLimitPerMinute" | "rateLimitBurst" | "unavailableRetryAfterSeconds">;

const DEFAULT_READY_CHECK_TIMEOUT_MS = 3000;
const BYTE_SIZE = /^\s*(\d+)\s*(b|kb|k|mb|m)?\s*$/i;

/** A size setting: "65536", "64kb", "64KB", "1mb" → bytes; at least 1. */
export function envByteSize(env: Env, name: string, fallback: number): number {
	const raw = env[name];
	if (raw === undefined || raw.trim() === "") return fallback;
	const m = BYTE_SIZE.exec(raw);
	const n = m ? Number(m[1]) : 0;
	const unit = (m?.[2] ?? "b").toLowerCase();
	const bytes = unit.startsWith("k") ? n * 1024 : unit.startsWith("m") ? n * 1024 * 1024 : n;
	if (bytes < 1) throw new SettingError(name, "a size of at least 1 byte like 65536, 64kb or 1mb", raw.trim());
	return bytes;
}

function nonNegative(env: Env, name: string, fallback: number): number {
	return envNumber(env, name, fallback, (n) => n >= 0, "a non-negative number");
}

export function readGatewaySettings(env: Env): GatewaySettings {
	const rateLimitPerMinute = nonNegative(env, "RATE_LIMIT_PER_MINUTE", DEFAULT_RATE_LIMIT_PER_MINUTE);
	// Default burst: one minute's worth, so a partner can spend its minute at once but no more.
	const burst = nonNegative(env, "RATE_LIMIT_BURST", rateLimitPerMinute);
	return {
		port: readSettings(env).port,
		bodyLimitBytes: envByteSize(env, "BODY_LIMIT", DEFAULT_BODY_LIMIT_BYTES),
		rateLimitPerMinute,
		rateLimitBurst: Math.max(1, Math.floor(burst)),
		unavailableRetryAfterSeconds: UNAVAILABLE_RETRY_AFTER_SECONDS,
		readyCheckTimeoutMs: nonNegative(env, "READY_CHECK_TIMEOUT_MS", DEFAULT_READY_CHECK_TIMEOUT_MS),
	};
}
