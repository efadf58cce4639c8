import { hash } from "node:crypto";
import { LRUCache } from "lru-cache";
import { ApiError } from "../../lib/errors";
import { RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";

/**
 * The failed-authentication throttle. Every unknown credential (API key,
 * driver token) costs its owning service a database lookup, so a client
 * address that sent `limit` unknown ones within a minute is throttled for the
 * rest of that minute: the gateway still asks the owning service, but with
 * `onlyKnown: true`, and the service answers "unknown" without a lookup when
 * no live credential has the digest's 64-bit prefix (lib/known-credentials.ts).
 * A throttled request whose credential is not valid is answered
 * `429 RATE_LIMITED`; a valid one is served. So other callers' failures never
 * lock out a valid key or token, however many share the address (one
 * Ingress, one NAT): the throttle only saves lookups of unknown credentials.
 *
 * A credential this gateway has seen succeed skips the counter (one Redis
 * read less on the hot path): an optimisation, not what lets it through.
 * Only SHA-256 hashes of those credentials are kept, in a bounded LRU.
 *
 * The counter is a rate-limiter-flexible limiter (rate-limiter.ts): shared
 * through Redis when REDIS_URL is set, this gateway's memory otherwise.
 */
export interface ThrottleDecision {
	/** False: the address is throttled; ask the owning service with `onlyKnown: true`. */
	allowed: boolean;
	/** Seconds until the address may try unknown credentials again (0 when allowed). */
	retryAfterSeconds: number;
}

/** The answer to a throttled address whose credential is not a valid one. */
export function throttled(retryAfterSeconds: number): ApiError {
	return new ApiError("RATE_LIMITED", `Too many failed authentications from this address; retry in ${retryAfterSeconds} s`, {
		retryAfter: retryAfterSeconds,
	});
}

const ALLOWED: ThrottleDecision = Object.freeze({ allowed: true, retryAfterSeconds: 0 });
const KNOWN_GOOD_MAX = 10_000;
const KNOWN_GOOD_TTL_MS = 10 * 60_000;

/** The digest the throttle keeps of a key: callers compute it once per request and pass it to each method. */
export function keyHash(apiKey: string): string {
	// One-shot: no Hash object per request.
	return hash("sha256", apiKey, "base64url");
}

export class AuthFailureThrottle {
	private readonly knownGood = new LRUCache<string, true>({ max: KNOWN_GOOD_MAX, ttl: KNOWN_GOOD_TTL_MS });

	constructor(
		/** Counts failures per address per minute; undefined turns the throttle off. */
		private readonly counter: RateLimiterAbstract | undefined,
		readonly limit: number,
		/** Neither Redis nor the insurance answered: the request is let through (and this says why). */
		private readonly onStoreError: (err: unknown) => void = () => undefined,
	) {}

	get enabled(): boolean {
		return this.counter !== undefined && this.limit > 0;
	}

	/** Before authenticating: may this address cost a lookup of this credential, or only of known ones? */
	async check(address: string, apiKey: string, hash?: string): Promise<ThrottleDecision> {
		if (!this.enabled || this.knownGood.has(hash ?? keyHash(apiKey))) return ALLOWED;
		try {
			const res = await this.counter!.get(address);
			if (res && res.consumedPoints >= this.limit) return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) };
			return ALLOWED;
		} catch (err) {
			this.onStoreError(err);
			return ALLOWED;
		}
	}

	/** The key was unknown: one more failure for the address (and the key is no longer known good). */
	async failed(address: string, apiKey: string, hash?: string): Promise<void> {
		if (!this.enabled) return;
		this.knownGood.delete(hash ?? keyHash(apiKey));
		try {
			await this.counter!.consume(address);
		} catch (err) {
			// Over the limit already: the next check says so.
			if (!(err instanceof RateLimiterRes)) this.onStoreError(err);
		}
	}

	/** The key authenticated. */
	succeeded(apiKey: string, hash?: string): void {
		if (this.enabled) this.knownGood.set(hash ?? keyHash(apiKey), true);
	}
}
