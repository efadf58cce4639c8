import { LRUCache } from "lru-cache";
import { type Point, SERVICE_TYPES } from "../../contracts/common";
import type { SupplyDemand, SupplyDemandReply } from "../../contracts/dispatch";

/*
 * What pricing needs from dispatch near a pickup, per service type:
 * `dispatch.supplyDemand { point }` → `{ scooty: SupplyDemand, cab: SupplyDemand }`.
 */

/** What we assume when dispatch cannot tell: no ETA, no surge. */
export const UNKNOWN_SUPPLY: SupplyDemand = Object.freeze({ eta: null, available: 0, demand: 0 });

const count = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/**
 * Takes dispatch's reply apart defensively: anything missing or odd falls
 * back to "unknown" for that type instead of failing the estimate.
 */
export function normaliseSupplyReply(reply: unknown): SupplyDemandReply {
	const out = {} as SupplyDemandReply;
	const r = (typeof reply === "object" && reply !== null ? reply : {}) as Record<string, unknown>;
	for (const type of SERVICE_TYPES) {
		const s = r[type] as Partial<SupplyDemand> | undefined;
		if (typeof s !== "object" || s === null) {
			out[type] = UNKNOWN_SUPPLY;
			continue;
		}
		const eta = typeof s.eta === "number" && Number.isFinite(s.eta) && s.eta >= 0 ? Math.round(s.eta) : null;
		out[type] = { eta, available: count(s.available), demand: count(s.demand) };
	}
	return out;
}

export const UNKNOWN_REPLY: SupplyDemandReply = normaliseSupplyReply(undefined);

/**
 * Asks dispatch, never longer than `timeoutMs` and never failing: a slow,
 * absent or broken dispatch yields the "unknown" reply (eta null, surge 1),
 * so quotes keep flowing when dispatch is down.
 */
export async function fetchSupplyDemand(ask: () => Promise<unknown>, timeoutMs: number, onFailure?: (err: unknown) => void): Promise<SupplyDemandReply> {
	let timer: NodeJS.Timeout | undefined;
	const timeout = new Promise<never>((_, reject) => {
		timer = setTimeout(() => reject(new Error(`dispatch.supplyDemand took longer than ${timeoutMs} ms`)), timeoutMs);
	});
	try {
		return normaliseSupplyReply(await Promise.race([ask(), timeout]));
	} catch (err) {
		onFailure?.(err);
		return UNKNOWN_REPLY;
	} finally {
		clearTimeout(timer);
	}
}

/**
 * A short-lived cache of dispatch answers per ~100 m cell, so a burst of
 * estimates around one place costs dispatch one call. A real LRU
 * (`lru-cache`) bounded to `maxEntries` cells: a flood of estimates for new
 * places evicts the least recently used cells one by one, never the whole
 * cache. Expiry follows the caller's clock (`nowMs`), so it is testable.
 */
export class SupplyCache {
	private readonly entries: LRUCache<string, { value: SupplyDemandReply; expires: number }>;

	constructor(
		private readonly ttlMs: number,
		maxEntries = 10_000,
	) {
		this.entries = new LRUCache({ max: Math.max(1, maxEntries) });
	}

	static keyOf(p: Point): string {
		return `${p.lat.toFixed(3)},${p.lng.toFixed(3)}`;
	}

	get(p: Point, nowMs: number): SupplyDemandReply | undefined {
		if (this.ttlMs <= 0) return undefined;
		const key = SupplyCache.keyOf(p);
		const hit = this.entries.get(key);
		if (!hit) return undefined;
		if (hit.expires <= nowMs) {
			this.entries.delete(key);
			return undefined;
		}
		return hit.value;
	}

	set(p: Point, value: SupplyDemandReply, nowMs: number): void {
		if (this.ttlMs <= 0) return;
		this.entries.set(SupplyCache.keyOf(p), { value, expires: nowMs + this.ttlMs });
	}

	get size(): number {
		return this.entries.size;
	}
}
