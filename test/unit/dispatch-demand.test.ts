import { cappedDemand } from "../../services/dispatch/dispatch-rules";
import { readDispatchSettings } from "../../services/dispatch/dispatch.settings";
import { CellIndex } from "../../services/dispatch/spatial-index";
import { destinationPoint, haversineMeters } from "../../lib/geo";
import { seededRandom } from "../../services/fleet/simulation";

describe("surge demand per partner", () => {
	it("counts each partner's searching rides up to the cap", () => {
		expect(cappedDemand([], 3)).toBe(0);
		expect(cappedDemand([30], 3)).toBe(3);
		expect(cappedDemand([1, 2, 3, 30], 3)).toBe(1 + 2 + 3 + 3);
		expect(cappedDemand(new Map([["a", 5], ["b", 1]]).values(), 10)).toBe(6);
	});

	it("DISPATCH_DEMAND_PER_PARTNER defaults to 10 and refuses start-up when invalid, naming it", () => {
		expect(readDispatchSettings({}).demandPerPartner).toBe(10);
		expect(readDispatchSettings({ DISPATCH_DEMAND_PER_PARTNER: "2" }).demandPerPartner).toBe(2);
		for (const bad of ["0", "-1", "1.5", "x"]) expect(() => readDispatchSettings({ DISPATCH_DEMAND_PER_PARTNER: bad })).toThrow(/DISPATCH_DEMAND_PER_PARTNER/);
	});

	it("DISPATCH_SWEEP_PAGE defaults to 1000 and refuses start-up when invalid, naming it", () => {
		expect(readDispatchSettings({}).sweepPage).toBe(1000);
		expect(readDispatchSettings({ DISPATCH_SWEEP_PAGE: "10" }).sweepPage).toBe(10);
		for (const bad of ["0", "10001", "2.5"]) expect(() => readDispatchSettings({ DISPATCH_SWEEP_PAGE: bad })).toThrow(/DISPATCH_SWEEP_PAGE/);
	});

	it("visits exactly the entries within the radius (forEachWithin agrees with countWithin)", () => {
		const centre = { lat: 12.9716, lng: 77.5946 };
		const index = new CellIndex<{ partnerId: string }>(8);
		for (let i = 0; i < 60; i++) index.upsert(`r${i}`, destinationPoint(centre, (i * 37) % 360, i * 100 + 50), { partnerId: i % 2 ? "a" : "b" });
		const seen: string[] = [];
		index.forEachWithin(centre, 3000, (id) => seen.push(id));
		expect(seen.length).toBe(index.countWithin(centre, 3000));
		expect(new Set(seen)).toEqual(new Set(Array.from({ length: 30 }, (_, i) => `r${i}`)));
	});

	it("counts each partner's rides within the radius exactly as a scan does, through moves, partner changes and removals (countGroupsWithin)", () => {
		const rnd = seededRandom("demand-groups");
		const centre = { lat: 12.9716, lng: 77.5946 };
		const index = new CellIndex<{ partnerId: string }>(8, undefined, (d) => d.partnerId);
		const truth = new Map<string, { point: { lat: number; lng: number }; partnerId: string }>();
		const partners = ["ptn_a", "ptn_b", "ptn_c"];
		for (let step = 0; step < 4000; step++) {
			const id = `r${Math.floor(rnd() * 1500)}`;
			if (rnd() < 0.2) {
				index.remove(id);
				truth.delete(id);
				continue;
			}
			const point = destinationPoint(centre, rnd() * 360, rnd() * 6000);
			const partnerId = partners[Math.floor(rnd() * partners.length)];
			index.upsert(id, point, { partnerId });
			truth.set(id, { point, partnerId });
		}
		for (let q = 0; q < 40; q++) {
			const at = destinationPoint(centre, rnd() * 360, rnd() * 4000);
			const radius = 500 + rnd() * 3000;
			const scan = new Map<string, number>();
			for (const t of truth.values()) if (haversineMeters(at, t.point) <= radius) scan.set(t.partnerId, (scan.get(t.partnerId) ?? 0) + 1);
			expect(index.countGroupsWithin(at, radius)).toEqual(scan);
		}
		index.clear();
		expect(index.countGroupsWithin(centre, 5000)).toEqual(new Map());
	});
});
