/**
 * Per-partner token bucket, in memory. Each gateway instance keeps its own
 * buckets, so with N gateway replicas a partner can reach N times the
 * configured rate (documented in the OpenAPI document). Pure: the caller
 * passes the clock.
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
