import type { ServerResponse } from "node:http";
import Redis from "ioredis";
import { ApiError } from "../../lib/errors";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { KeyMode } from "../../contracts/partners";

/**
 * The gateway's limits: the per-(partner, mode) rate limit and the counter behind the
 * failed-authentication throttle (auth-throttle.ts).
 *
 * Without REDIS_URL each gateway counts in its own memory: the partner limit
 * is the token bucket below (pure: the caller passes the clock), so N gateway
 * replicas allow N times the rate. With REDIS_URL every gateway counts in the
 * same Redis keys (rate-limiter-flexible's RateLimiterRedis, atomic Lua), so
 * the limits hold for the deployment as a whole.
 *
 * Redis down or slow (REDIS_TIMEOUT_MS): each gateway falls back to an
 * in-memory limiter of the same size (rate-limiter-flexible's insurance
 * limiter). That fails open to per-gateway limits: partners are never refused
 * because Redis is away, and no gateway stops limiting either.
 */
export interface RateDecision {
	allowed: boolean;
	/** Sustained requests per minute. */
	limit: number;
	/** Whole requests the partner may still make right now. */
	remaining: number;
	/** Seconds until the next request would be allowed (0 when allowed). */
	retryAfterSeconds: number;
}

interface Bucket {
	tokens: number;
	updatedAt: number;
}

export interface TokenBucketOptions {
	/** Refill rate; 0 or less turns the limiter off. */
	perMinute: number;
	/** Bucket size: requests allowed at once. */
	burst: number;
	/** Buckets kept before full (idle) ones are forgotten. */
	maxKeys?: number;
}

export class TokenBucketLimiter {
	private readonly buckets = new Map<string, Bucket>();
	private readonly perMs: number;
	private readonly burst: number;
	private readonly maxKeys: number;

	constructor(private readonly opts: TokenBucketOptions) {
		this.perMs = opts.perMinute / 60_000;
		this.burst = Math.max(1, opts.burst);
		this.maxKeys = opts.maxKeys ?? 10_000;
	}

	get enabled(): boolean {
		return this.opts.perMinute > 0;
	}

	take(key: string, now: number = Date.now()): RateDecision {
		const limit = this.opts.perMinute;
		if (!this.enabled) return { allowed: true, limit, remaining: Number.POSITIVE_INFINITY, retryAfterSeconds: 0 };
		let bucket = this.buckets.get(key);
		if (!bucket) {
			if (this.buckets.size >= this.maxKeys) this.prune(now);
			bucket = { tokens: this.burst, updatedAt: now };
			this.buckets.set(key, bucket);
		} else {
			const elapsed = Math.max(0, now - bucket.updatedAt);
			bucket.tokens = Math.min(this.burst, bucket.tokens + elapsed * this.perMs);
			bucket.updatedAt = now;
		}
		if (bucket.tokens >= 1) {
			bucket.tokens -= 1;
			return { allowed: true, limit, remaining: Math.floor(bucket.tokens), retryAfterSeconds: 0 };
		}
		const waitMs = (1 - bucket.tokens) / this.perMs;
		return { allowed: false, limit, remaining: 0, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
	}

	/** Forgets buckets that have refilled completely (they behave exactly like new ones). */
	private prune(now: number): void {
		for (const [key, b] of this.buckets) {
			if (b.tokens + (now - b.updatedAt) * this.perMs >= this.burst) this.buckets.delete(key);
		}
		// Still full of busy partners: drop the oldest half rather than grow without bound.
		if (this.buckets.size >= this.maxKeys) {
			let drop = Math.ceil(this.buckets.size / 2);
			for (const key of this.buckets.keys()) {
				if (drop-- <= 0) break;
				this.buckets.delete(key);
			}
		}
	}

	get size(): number {
		return this.buckets.size;
	}
}

/**
 * The key a partner request is counted under: partner and key mode, so test
 * traffic (a load test, a leaked test key) has its own quota and can never
 * use up the live one. Partner ids are `ptn_…`, so these never meet the
 * driver route's `driver:…` keys.
 */
export function partnerLimitKey(partnerId: string, mode: KeyMode): string {
	return `${partnerId}:${mode}`;
}

/** What the pipeline asks of a partner limit, whichever store counts. */
export interface PartnerLimiter {
	readonly enabled: boolean;
	take(partnerId: string): Promise<RateDecision>;
}

/** The in-memory token bucket behind the PartnerLimiter interface. */
export class MemoryPartnerLimiter implements PartnerLimiter {
	constructor(private readonly bucket: TokenBucketLimiter) {}

	get enabled(): boolean {
		return this.bucket.enabled;
	}

	take(partnerId: string): Promise<RateDecision> {
		return Promise.resolve(this.bucket.take(partnerId));
	}
}

export interface WindowOptions {
	perMinute: number;
	burst: number;
}

/**
 * The token bucket as a window a shared store can count: `burst` requests per
 * `burst / perMinute` minutes (whole seconds, at least 1). With the default
 * burst (one minute's worth) that is exactly "perMinute per minute".
 */
export function windowOf(opts: WindowOptions): { points: number; durationSeconds: number } {
	const points = Math.max(1, Math.floor(opts.burst));
	return { points, durationSeconds: Math.max(1, Math.round((points * 60) / opts.perMinute)) };
}

function isLimiterAnswer(value: unknown): value is RateLimiterRes {
	return value instanceof RateLimiterRes;
}

function retrySeconds(msBeforeNext: number): number {
	return Math.max(1, Math.ceil(msBeforeNext / 1000));
}

/** A per-partner limit counted in a rate-limiter-flexible limiter (Redis with its insurance, in the gateway). */
export class SharedPartnerLimiter implements PartnerLimiter {
	readonly enabled = true;

	constructor(
		private readonly limiter: RateLimiterAbstract,
		private readonly perMinute: number,
		/** Called when neither Redis nor the insurance could answer; the request is let through. */
		private readonly onStoreError: (err: unknown) => void = () => undefined,
	) {}

	async take(partnerId: string): Promise<RateDecision> {
		const limit = this.perMinute;
		try {
			const res = await this.limiter.consume(partnerId);
			return { allowed: true, limit, remaining: res.remainingPoints, retryAfterSeconds: 0 };
		} catch (err) {
			if (isLimiterAnswer(err)) return { allowed: false, limit, remaining: 0, retryAfterSeconds: retrySeconds(err.msBeforeNext) };
			this.onStoreError(err);
			return { allowed: true, limit, remaining: 0, retryAfterSeconds: 0 };
		}
	}
}

export interface LimitStoreOptions {
	/** Shared counting in this Redis; undefined = this gateway's memory. */
	redis?: Redis;
	/** Redis keys start with `<keyPrefix>:<name>:`. */
	keyPrefix: string;
}

/**
 * A fixed-window counter of `points` per `durationSeconds`: in Redis with an
 * in-memory insurance of the same size, or only in memory.
 */
export function windowLimiter(store: LimitStoreOptions, name: string, points: number, durationSeconds: number): RateLimiterAbstract {
	const memory = new RateLimiterMemory({ keyPrefix: name, points, duration: durationSeconds });
	if (!store.redis) return memory;
	return new RateLimiterRedis({
		storeClient: store.redis,
		keyPrefix: `${store.keyPrefix}:${name}`,
		points,
		duration: durationSeconds,
		// Not connected: straight to the insurance, no waiting for a reconnect.
		rejectIfRedisNotReady: true,
		insuranceLimiter: memory,
	});
}

/** The partner limit the settings ask for: off, this gateway's token bucket, or a window shared through Redis. */
export function partnerLimiter(opts: WindowOptions, store: LimitStoreOptions, onStoreError?: (err: unknown) => void): PartnerLimiter {
	if (!(opts.perMinute > 0) || !store.redis) return new MemoryPartnerLimiter(new TokenBucketLimiter(opts));
	const { points, durationSeconds } = windowOf(opts);
	return new SharedPartnerLimiter(windowLimiter(store, "partner", points, durationSeconds), opts.perMinute, onStoreError);
}

/**
 * The Redis client of the limits: commands fail at once while disconnected
 * and after `timeoutMs` when Redis is slow, so a limit check never holds a
 * request up; it reconnects on its own. `onState` hears "ready" and each
 * first error after it (never the URL: it may hold a password).
 */
export function openLimitRedis(url: string, timeoutMs: number, onState: (state: "ready" | "error", err?: Error) => void): Redis {
	const redis = new Redis(url, {
		enableOfflineQueue: false,
		commandTimeout: timeoutMs,
		connectTimeout: Math.max(timeoutMs, 1000),
		maxRetriesPerRequest: 0,
		retryStrategy: (times) => Math.min(times * 200, 5000),
	});
	let healthy = true;
	redis.on("ready", () => {
		healthy = true;
		onState("ready");
	});
	redis.on("error", (err: Error) => {
		if (!healthy) return;
		healthy = false;
		onState("error", err);
	});
	return redis;
}

/**
 * Takes one request from `key`'s limit, sets the `X-RateLimit-*` headers when
 * limits are on, and refuses with 429 RATE_LIMITED (and `Retry-After`) when it
 * is spent: the one way the `/ride` and `/driver` pipelines apply the limit.
 */
export async function enforceRateLimit(limiter: PartnerLimiter, key: string, res: ServerResponse): Promise<void> {
	const decision = await limiter.take(key);
	if (limiter.enabled) {
		res.setHeader("X-RateLimit-Limit", String(decision.limit));
		res.setHeader("X-RateLimit-Remaining", String(decision.remaining));
	}
	if (!decision.allowed) {
		throw new ApiError("RATE_LIMITED", `Rate limit of ${decision.limit} requests per minute exceeded; retry in ${decision.retryAfterSeconds} s`, {
			retryAfter: decision.retryAfterSeconds,
		});
	}
}
