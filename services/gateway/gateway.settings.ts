import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_RATE_LIMIT_PER_MINUTE, UNAVAILABLE_RETRY_AFTER_SECONDS } from "../../contracts/constants";
import { envInt, envNumber, envString, readSettings, SettingError, type Env } from "../../lib/settings";

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
	/** How long a readiness answer is reused, so probes cost the database nothing in between (READY_CACHE_MS). */
	readyCacheMs: number;
	/**
	 * Redis shared by every gateway for the limits (REDIS_URL, redis:// or
	 * rediss://); unset = each gateway limits in its own memory.
	 */
	redisUrl: string | undefined;
	/** One Redis command may take this long before the gateway limits in memory instead (REDIS_TIMEOUT_MS). */
	redisTimeoutMs: number;
	/** Redis keys start with this: the deployment's NAMESPACE, so deployments sharing a Redis never share counts. */
	redisKeyPrefix: string;
	/** Failed authentications per minute per client address before 429 (AUTH_FAILURE_LIMIT_PER_MINUTE); 0 = off. */
	authFailureLimitPerMinute: number;
	/**
	 * Proxies in front of the gateway that append to X-Forwarded-For
	 * (TRUST_PROXY): 0 = the socket address is the client; n = the address n
	 * hops back in X-Forwarded-For (`true` means 1).
	 */
	trustProxyHops: number;
}

/** What the OpenAPI document states about the limits this gateway runs with. */
export type DocumentedLimits = Pick<GatewaySettings, "bodyLimitBytes" | "rateLimitPerMinute" | "rateLimitBurst" | "unavailableRetryAfterSeconds">;

const DEFAULT_READY_CHECK_TIMEOUT_MS = 3000;
const DEFAULT_READY_CACHE_MS = 1000;
const DEFAULT_REDIS_TIMEOUT_MS = 500;
const DEFAULT_AUTH_FAILURE_LIMIT_PER_MINUTE = 30;
const MAX_PROXY_HOPS = 10;
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

/** REDIS_URL: unset, or a redis:// / rediss:// URL with a host. */
export function envRedisUrl(env: Env, name: string): string | undefined {
	const raw = envString(env, name);
	if (raw === undefined) return undefined;
	let url: URL | undefined;
	try {
		url = new URL(raw);
	} catch {
		url = undefined;
	}
	// The value may carry a password: never echo it.
	if (!url || (url.protocol !== "redis:" && url.protocol !== "rediss:") || url.hostname === "") {
		throw new SettingError(name, "a redis:// or rediss:// URL", `${/^[a-z][a-z0-9+.-]*:/i.exec(raw)?.[0] ?? ""}…`);
	}
	return raw;
}

/** TRUST_PROXY: a hop count 0..10, or true/false (= 1/0). */
export function envProxyHops(env: Env, name: string): number {
	const raw = envString(env, name);
	if (raw === undefined) return 0;
	const word = raw.toLowerCase();
	if (["true", "yes", "on"].includes(word)) return 1;
	if (["false", "no", "off"].includes(word)) return 0;
	return envNumber(
		env,
		name,
		0,
		(n) => Number.isInteger(n) && n >= 0 && n <= MAX_PROXY_HOPS,
		`true, false or a whole number of proxies 0..${MAX_PROXY_HOPS}`,
	);
}

export function readGatewaySettings(env: Env): GatewaySettings {
	const runtime = readSettings(env);
	const rateLimitPerMinute = nonNegative(env, "RATE_LIMIT_PER_MINUTE", DEFAULT_RATE_LIMIT_PER_MINUTE);
	// Default burst: one minute's worth, so a partner can spend its minute at once but no more.
	const burst = nonNegative(env, "RATE_LIMIT_BURST", rateLimitPerMinute);
	return {
		port: runtime.port,
		bodyLimitBytes: envByteSize(env, "BODY_LIMIT", DEFAULT_BODY_LIMIT_BYTES),
		rateLimitPerMinute,
		rateLimitBurst: Math.max(1, Math.floor(burst)),
		unavailableRetryAfterSeconds: UNAVAILABLE_RETRY_AFTER_SECONDS,
		readyCheckTimeoutMs: nonNegative(env, "READY_CHECK_TIMEOUT_MS", DEFAULT_READY_CHECK_TIMEOUT_MS),
		readyCacheMs: envInt(env, "READY_CACHE_MS", DEFAULT_READY_CACHE_MS, 0),
		redisUrl: envRedisUrl(env, "REDIS_URL"),
		redisTimeoutMs: envInt(env, "REDIS_TIMEOUT_MS", DEFAULT_REDIS_TIMEOUT_MS, 1),
		redisKeyPrefix: `ride:${runtime.namespace || "default"}`,
		authFailureLimitPerMinute: envInt(env, "AUTH_FAILURE_LIMIT_PER_MINUTE", DEFAULT_AUTH_FAILURE_LIMIT_PER_MINUTE, 0),
		trustProxyHops: envProxyHops(env, "TRUST_PROXY"),
	};
}
