import { SupplyCache, UNKNOWN_REPLY } from "../../../services/pricing/supply";

/** Pricing's cache of dispatch answers per ~100 m cell: short-lived, and a real LRU when full. */
describe("SupplyCache", () => {
	const cell = (i: number) => ({ lat: 12 + i / 100, lng: 77 });

	it("answers within the TTL and forgets after it", () => {
		const cache = new SupplyCache(2000);
		cache.set(cell(0), UNKNOWN_REPLY, 0);
		expect(cache.get({ lat: 12.0001, lng: 77.0004 }, 1999)).toBe(UNKNOWN_REPLY);
		expect(cache.get(cell(0), 2000)).toBeUndefined();
	});

	it("is off with a TTL of 0", () => {
		const cache = new SupplyCache(0);
		cache.set(cell(0), UNKNOWN_REPLY, 0);
		expect(cache.get(cell(0), 0)).toBeUndefined();
	});

	it("when full evicts the least recently used cell, not the whole cache", () => {
		const cache = new SupplyCache(60_000, 3);
		for (const i of [0, 1, 2]) cache.set(cell(i), UNKNOWN_REPLY, 0);
		// Cell 0 is in use: a flood of new places must not push it out.
		expect(cache.get(cell(0), 1)).toBe(UNKNOWN_REPLY);
		cache.set(cell(3), UNKNOWN_REPLY, 2);
		expect(cache.get(cell(0), 3)).toBe(UNKNOWN_REPLY);
		expect(cache.get(cell(3), 3)).toBe(UNKNOWN_REPLY);
		expect(cache.get(cell(2), 3)).toBe(UNKNOWN_REPLY);
		expect(cache.get(cell(1), 3)).toBeUndefined();
		for (let i = 10; i < 1000; i++) cache.set(cell(i), UNKNOWN_REPLY, 4);
		expect(cache.size).toBe(3);
	});
});
