import { LRUCache } from "lru-cache";

/** An injected clock is read on every check (no ttlResolution caching). */
function clock(now: (() => number) | undefined): { perf?: { now: () => number }; ttlResolution?: number } {
	return now ? { perf: { now }, ttlResolution: 0 } : {};
}

/**
 * A resolved API key (or a miss) remembered for a short while per key hash:
 * partners keeps one in front of the database (one lookup per key per TTL),
 * and each gateway one in front of partners.authenticate (no broker call per
 * request). Both are cleared on partners.changed; their TTLs add up to
 * AUTH_CACHE_BOUND_MS (contracts/partners.ts), the safety net when that event is lost.
 *
 * Two size-bounded LRUs with a TTL (lru-cache): known keys, and misses. Misses
 * have their own bound, so any number of random keys evicts only other misses,
 * never a partner's good key. `clear()` on partners.changed (a key or a
 * partner revoked); the TTL is the safety net when that event is lost.
 *
 * Dispatch keeps one for driver tokens (`hitsStayWhileUsed`: a token in use
 * is not re-read every TTL; misses still last one TTL from when they were seen).
 */
export class AuthCache<V extends object> {
	private readonly hits: LRUCache<string, V>;
	private readonly misses: LRUCache<string, true>;
	private gen = 0;

	/** `now` is for tests (a fake clock); `hitsStayWhileUsed` restarts a hit's TTL on every get. */
	constructor(ttlMs: number, maxEntries = 10_000, maxMisses = 10_000, now?: () => number, options: { hitsStayWhileUsed?: boolean } = {}) {
		this.hits = new LRUCache<string, V>({ max: maxEntries, ttl: ttlMs, updateAgeOnGet: options.hitsStayWhileUsed === true, ...clock(now) });
		this.misses = new LRUCache<string, true>({ max: maxMisses, ttl: ttlMs, ...clock(now) });
	}

	/** The remembered value (null for a remembered miss), or undefined when unknown or expired. */
	get(key: string): { value: V | null } | undefined {
		const hit = this.hits.get(key);
		if (hit !== undefined) return { value: hit };
		return this.misses.get(key) ? { value: null } : undefined;
	}

	/**
	 * Bumped by clear(): a lookup that began before a clear must not put back
	 * what it read (it may predate the revocation that caused the clear).
	 */
	get generation(): number {
		return this.gen;
	}

	/** Remembers `value` unless the cache was cleared since `generation` was read. */
	set(key: string, value: V | null, generation = this.gen): void {
		if (generation !== this.gen) return;
		if (value === null) {
			this.hits.delete(key);
			this.misses.set(key, true);
		} else {
			this.misses.delete(key);
			this.hits.set(key, value);
		}
	}

	/** Forget everything (keys revoked or created somewhere). */
	clear(): void {
		this.gen++;
		this.hits.clear();
		this.misses.clear();
	}

	get size(): { hits: number; misses: number } {
		return { hits: this.hits.size, misses: this.misses.size };
	}
}

/**
 * "At most once per interval per key", bounded: api_keys.last_used_at is
 * written at most once a minute per key per instance (and the UPDATE itself
 * skips rows touched in the last minute, so N instances stay cheap too).
 */
export class OncePer {
	private readonly seen: LRUCache<string, true>;

	constructor(intervalMs: number, max = 10_000, now?: () => number) {
		this.seen = new LRUCache<string, true>({ max, ttl: intervalMs, ...clock(now) });
	}

	/** True the first time for `key` in the interval, false after. */
	take(key: string): boolean {
		if (this.seen.get(key)) return false;
		this.seen.set(key, true);
		return true;
	}
}
