/**
 * The gateway authenticates every request: a resolved API key (or a miss) is
 * remembered for a short while per key hash, so the database sees one lookup
 * per key per TTL. Bounded: when full it starts over rather than grow.
 */
export class AuthCache<V> {
	private readonly entries = new Map<string, { value: V; expires: number }>();

	constructor(
		private readonly ttlMs: number,
		private readonly maxEntries = 10_000,
	) {}

	/** The remembered value, or undefined when unknown or expired. */
	get(key: string, nowMs: number): { value: V } | undefined {
		const hit = this.entries.get(key);
		return hit && hit.expires > nowMs ? { value: hit.value } : undefined;
	}

	set(key: string, value: V, nowMs: number): void {
		if (this.entries.size > this.maxEntries) this.entries.clear();
		this.entries.set(key, { value, expires: nowMs + this.ttlMs });
	}
}
