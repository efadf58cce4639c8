import { DEFAULT_RETRY_SCHEDULE_MS, LOCATION_TTL_MS, WEBHOOK_TIMEOUT_MS } from "../../contracts/notifications";
import { envInt, envPositive, readSettings, type Env } from "../../lib/settings";
import { readRetentionSettings, type RetentionSettings } from "../../lib/retention";

/**
 * Webhook delivery configuration from the environment. Pure: pass any env
 * object. Same policy as every setting (lib/settings): unset or blank means
 * the default given where it is read, anything else must be valid or start-up stops with a
 * message naming the setting. The shared settings (`WEBHOOK_ALLOW_PRIVATE`,
 * `WEBHOOK_RETRY_SCHEDULE_MS`) come from lib/settings.
 */

/** Retention: `WEBHOOK_RETENTION_DAYS` and the shared `RETENTION_*` settings (lib/retention.ts). */
export interface NotificationsSettings extends RetentionSettings {
	/** Poll interval; broker hints make it faster, never required. */
	pollMs: number;
	/** Status-event tries in flight per instance. */
	concurrency: number;
	/** Location-event tries in flight per instance (own slots: neither kind starves the other). */
	locationConcurrency: number;
	/** Tries in flight per partner and kind, across every instance (counted in PostgreSQL). */
	partnerConcurrency: number;
	/** Tries in flight per webhook host (host:port) and kind, across every instance. */
	hostConcurrency: number;
	/** Circuit breaker: consecutive timeouts/connection failures of a host before it is paused. */
	breakerFailures: number;
	/** First pause of an open host; doubles at each failed half-open probe, up to breakerMaxOpenMs. */
	breakerOpenMs: number;
	breakerMaxOpenMs: number;
	/** How often the safety-net ingest looks for events that committed later than the ingest window. */
	safetyNetMs: number;
	/** How long a claim is ours; always outlasts one try (timeout) plus recording it. */
	leaseMs: number;
	/** Per-try deadline (contract: 10 s). */
	timeoutMs: number;
	/** Ride-event rows read per ingest statement. */
	ingestBatch: number;
	/** See ingest-window.ts. */
	ingestWindowMs: number;
	/** How long a partner's signing secret is trusted without asking partners again. */
	secretCacheMs: number;
	/** How long a stopping instance waits for its tries in flight. */
	stopGraceMs: number;
	/** Retry schedule: offsets after the first try. */
	retryScheduleMs: number[];
	/** A location event is dropped this long after it was made (contract: 120 s). */
	locationTtlMs: number;
	/** Private and loopback webhook targets allowed (dev, tests). */
	allowPrivate: boolean;
	/** The ports webhooks may go to (`WEBHOOK_PORTS`; undefined = any): a URL on another port is never tried. */
	ports: number[] | undefined;
}

export function readNotificationsSettings(env: Env): NotificationsSettings {
	const shared = readSettings(env);
	const timeoutMs = envPositive(env, "WEBHOOK_TIMEOUT_MS", WEBHOOK_TIMEOUT_MS);
	return {
		pollMs: envPositive(env, "WEBHOOK_POLL_MS", 1_000),
		concurrency: envInt(env, "WEBHOOK_CONCURRENCY", 64, 1),
		locationConcurrency: envInt(env, "WEBHOOK_LOCATION_CONCURRENCY", 32, 1),
		partnerConcurrency: envInt(env, "WEBHOOK_PARTNER_CONCURRENCY", 16, 1),
		hostConcurrency: envInt(env, "WEBHOOK_HOST_CONCURRENCY", 16, 1),
		breakerFailures: envInt(env, "WEBHOOK_BREAKER_FAILURES", 5, 1),
		breakerOpenMs: envPositive(env, "WEBHOOK_BREAKER_OPEN_MS", 30_000),
		breakerMaxOpenMs: envPositive(env, "WEBHOOK_BREAKER_MAX_OPEN_MS", 600_000),
		safetyNetMs: envPositive(env, "WEBHOOK_SAFETY_NET_MS", 5_000),
		// A claim must outlive one try plus its bookkeeping, whatever WEBHOOK_LEASE_MS says.
		leaseMs: Math.max(envPositive(env, "WEBHOOK_LEASE_MS", 45_000), timeoutMs + 5_000),
		timeoutMs,
		ingestBatch: 500,
		// Ride transactions commit in milliseconds; each event is re-read once per poll
		// for this long, so a longer window only costs (120 s re-read ~30,000 events per
		// second at 250 events/s). Later commits are the safety net's (safety-net.ts).
		ingestWindowMs: envPositive(env, "WEBHOOK_INGEST_WINDOW_MS", 10_000),
		secretCacheMs: 60_000,
		// Long enough for a try that has just started to end and be recorded.
		stopGraceMs: timeoutMs + 2_000,
		retryScheduleMs: shared.webhookRetryScheduleMs ?? [...DEFAULT_RETRY_SCHEDULE_MS],
		locationTtlMs: envPositive(env, "WEBHOOK_LOCATION_TTL_MS", LOCATION_TTL_MS),
		allowPrivate: shared.webhookAllowPrivate,
		ports: shared.webhookPorts,
		...readRetentionSettings(env, "WEBHOOK_RETENTION_DAYS"),
	};
}
