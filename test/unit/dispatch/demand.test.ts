import { cappedDemand } from "../../../services/dispatch/dispatch-rules";
import { readDispatchSettings } from "../../../services/dispatch/dispatch.settings";
import { CellIndex } from "../../../services/dispatch/spatial-index";
import { demandIds, demandIndexes, syncDemand } from "../../../services/dispatch/driver-index";
import { destinationPoint, haversineMeters } from "../../../lib/geo";
import { seededRandom } from "../../../services/fleet/simulation";

describe("surge demand per partner", () => {
	it("counts each partner's searching rides up to the cap", () => {
		expect(cappedDemand([], 3)).toBe(0);
		expect(cappedDemand([30], 3)).toBe(3);
		expect(cappedDemand([1, 2, 3, 30], 3)).toBe(1 + 2 + 3 + 3);
		expect(
			cappedDemand(
				new Map([
					["a", 5],
					["b", 1],
				]).values(),
				10,
			),
		).toBe(6);
	});

	it("DISPATCH_DEMAND_PER_PARTNER defaults to 10 and refuses start-up when invalid, naming it", () => {
		expect(readDispatchSettings({}).demandPerPartner).toBe(10);
		expect(readDispatchSettings({ DISPATCH_DEMAND_PER_PARTNER: "2" }).demandPerPartner).toBe(2);
		for (const bad of ["0", "-1", "1.5", "x"])
			expect(() => readDispatchSettings({ DISPATCH_DEMAND_PER_PARTNER: bad })).toThrow(/DISPATCH_DEMAND_PER_PARTNER/);
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

describe("demand refresh (syncDemand)", () => {
	const centre = { lat: 12.9716, lng: 77.5946 };
	const row = (id: string, lat: number, lng: number, partner: string, mode: "test" | "live" = "test", type: "scooty" | "cab" = "cab") => ({
		order_id: id,
		service_type: type,
		pickup_lat: lat,
		pickup_lng: lng,
		partner_id: partner,
		mode,
	});
	/** What each index holds: id → [lat, lng, partner]. */
	const contents = (indexes: ReturnType<typeof demandIndexes>) =>
		Object.fromEntries(
			(["test", "live"] as const).flatMap((mode) =>
				(["scooty", "cab"] as const).map((type) => [
					`${mode}/${type}`,
					Object.fromEntries([...indexes[mode][type].values()].map((v) => [v.id, [v.point.lat, v.point.lng, v.item.partnerId]])),
				]),
			),
		);

	it("ends as a rebuild from the rows would, keeps rides added after the read, and pauses between slices", async () => {
		const indexes = demandIndexes(8);
		const cab = indexes.test.cab;
		cab.upsert("same", centre, { partnerId: "a" });
		cab.upsert("moved", centre, { partnerId: "a" });
		cab.upsert("repartnered", centre, { partnerId: "a" });
		cab.upsert("ended", centre, { partnerId: "a" });
		const before = demandIds(indexes);
		// An event adds a ride while the read runs: the read does not have it.
		cab.upsert("after-read", centre, { partnerId: "b" });
		const many = Array.from({ length: 2500 }, (_, i) => row(`bulk${i}`, 12.9 + i / 100_000, 77.6, `p${i % 7}`, "live", "scooty"));
		const rows = [row("same", centre.lat, centre.lng, "a"), row("moved", 12.99, 77.61, "a"), row("repartnered", centre.lat, centre.lng, "c"), ...many];
		let pauses = 0;
		await syncDemand(indexes, rows, before, async () => void pauses++);

		const rebuilt = demandIndexes(8);
		for (const r of rows) rebuilt[r.mode][r.service_type].upsert(r.order_id, { lat: r.pickup_lat, lng: r.pickup_lng }, { partnerId: r.partner_id });
		rebuilt.test.cab.upsert("after-read", centre, { partnerId: "b" });
		expect(contents(indexes)).toEqual(contents(rebuilt));
		expect(cab.has("ended")).toBe(false);
		// Per-partner counts (surge) agree with the rebuild's, around both places.
		for (const point of [centre, { lat: 12.99, lng: 77.61 }, { lat: 12.91, lng: 77.6 }]) {
			for (const mode of ["test", "live"] as const) {
				for (const type of ["scooty", "cab"] as const) {
					expect(indexes[mode][type].countGroupsWithin(point, 5000)).toEqual(rebuilt[mode][type].countGroupsWithin(point, 5000));
				}
			}
		}
		expect(pauses).toBe(2); // 2,503 rows in slices of 1,000
	});
});
