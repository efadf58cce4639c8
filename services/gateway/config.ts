import { envNumber, readSettings, type Env } from "../../lib/settings";

/**
 * Gateway settings from the environment. Pure: pass any env object. Read when
 * the service is created (not when the module loads), so a test can start
 * two gateways with different limits in one process.
 */
export interface GatewayConfig {
	port: number;
	/** Largest accepted request body in bytes (BODY_LIMIT, default 64 KB). */
	bodyLimitBytes: number;
	/** Sustained requests per minute per partner (RATE_LIMIT_PER_MINUTE); 0 turns the limiter off. */
	rateLimitPerMinute: number;
	/** Requests a partner may make at once before the sustained rate applies (RATE_LIMIT_BURST). */
	rateLimitBurst: number;
	/** `Retry-After` seconds sent with 503 SERVICE_UNAVAILABLE. */
	unavailableRetryAfterSeconds: number;
	/** How long one readiness check may wait for a service's answer. */
	readyCheckTimeoutMs: number;
}

export const DEFAULT_BODY_LIMIT_BYTES = 64 * 1024;
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 600;

/** "65536", "64kb", "64KB", "1mb" → bytes. */
export function parseByteSize(name: string, value: string | undefined, fallback: number): number {
	if (value === undefined || value.trim() === "") return fallback;
	const m = /^\s*(\d+)\s*(b|kb|k|mb|m)?\s*$/i.exec(value);
	if (!m) throw new Error(`${name} must be a size like 65536, 64kb or 1mb`);
	const n = Number(m[1]);
	const unit = (m[2] ?? "b").toLowerCase();
	const bytes = unit.startsWith("k") ? n * 1024 : unit.startsWith("m") ? n * 1024 * 1024 : n;
	if (bytes < 1) throw new Error(`${name} must be at least 1 byte`);
	return bytes;
}

function nonNegative(env: Env, name: string, fallback: number): number {
	return envNumber(env, name, fallback, (n) => n >= 0, "a non-negative number");
}

export function readGatewayConfig(env: Env): GatewayConfig {
	const rateLimitPerMinute = nonNegative(env, "RATE_LIMIT_PER_MINUTE", DEFAULT_RATE_LIMIT_PER_MINUTE);
	// Default burst: one minute's worth, so a partner can spend its minute at once but no more.
	const burst = nonNegative(env, "RATE_LIMIT_BURST", rateLimitPerMinute);
	return {
		port: readSettings(env).port,
		bodyLimitBytes: parseByteSize("BODY_LIMIT", env.BODY_LIMIT, DEFAULT_BODY_LIMIT_BYTES),
		rateLimitPerMinute,
		rateLimitBurst: Math.max(1, Math.floor(burst)),
		unavailableRetryAfterSeconds: 5,
		readyCheckTimeoutMs: nonNegative(env, "READY_CHECK_TIMEOUT_MS", 3000),
	};
}
