import { CellIndex, ringLowerBoundM } from "../../../services/dispatch/spatial-index";
import { haversineMeters, destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import { seededRandom, pointInDisk } from "../../../services/fleet/simulation";

const BLR: Point = { lat: 12.9716, lng: 77.5946 };

function bruteNearest(points: Map<string, Point>, q: Point, limit: number, radiusM: number, skip: Set<string> = new Set()) {
	return [...points.entries()]
		.filter(([id]) => !skip.has(id))
		.map(([id, p]) => ({ id, d: haversineMeters(q, p) }))
		.filter((x) => x.d <= radiusM)
		.sort((a, b) => a.d - b.d)
		.slice(0, limit);
}

describe("CellIndex (H3 nearest-driver index)", () => {
	it("finds exactly the brute-force nearest neighbours, in order, within the radius", () => {
		const rand = seededRandom("index-test");
		const index = new CellIndex<null>(8);
		const points = new Map<string, Point>();
		for (let i = 0; i < 3000; i++) {
			const p = pointInDisk(BLR, 15_000, rand);
			points.set(`d${i}`, p);
			index.upsert(`d${i}`, p, null);
		}
		for (let qn = 0; qn < 200; qn++) {
			const q = pointInDisk(BLR, 18_000, rand);
			const radius = [500, 2000, 5000][qn % 3];
			const limit = [1, 5, 20][qn % 3];
			const got = index.nearest(q, { limit, radiusM: radius }).map((n) => n.id);
			expect(got).toEqual(bruteNearest(points, q, limit, radius).map((x) => x.id));
		}
	});

	it("is exact at a coarse resolution and with sparse points far apart", () => {
		const rand = seededRandom("sparse");
		const index = new CellIndex<null>(9);
		const points = new Map<string, Point>();
		for (let i = 0; i < 40; i++) {
			const p = pointInDisk(BLR, 30_000, rand);
			points.set(`s${i}`, p);
			index.upsert(`s${i}`, p, null);
		}
		for (let qn = 0; qn < 50; qn++) {
			const q = pointInDisk(BLR, 30_000, rand);
			expect(index.nearest(q, { limit: 3, radiusM: 20_000 }).map((n) => n.id)).toEqual(bruteNearest(points, q, 3, 20_000).map((x) => x.id));
		}
	});

	it("moves, removes and filters entries", () => {
		const index = new CellIndex<{ tag: string }>(8);
		index.upsert("a", BLR, { tag: "a" });
		index.upsert("b", destinationPoint(BLR, 90, 800), { tag: "b" });
		expect(index.nearest(BLR, { limit: 1, radiusM: 5000 })[0].id).toBe("a");
		// a drives 3 km away: b is now nearest
		index.upsert("a", destinationPoint(BLR, 0, 3000), { tag: "a" });
		expect(index.size).toBe(2);
		expect(index.nearest(BLR, { limit: 1, radiusM: 5000 })[0].id).toBe("b");
		expect(index.nearest(BLR, { limit: 5, radiusM: 5000, accept: (id) => id !== "b" }).map((n) => n.id)).toEqual(["a"]);
		expect(index.countWithin(BLR, 1000)).toBe(1);
		expect(index.countWithin(BLR, 5000)).toBe(2);
		expect(index.remove("b")).toBe(true);
		expect(index.remove("b")).toBe(false);
		expect(index.nearest(BLR, { limit: 5, radiusM: 1000 })).toEqual([]);
		expect(index.get("a")).toEqual({ tag: "a" });
	});

	it("counts exactly what a scan counts", () => {
		const rand = seededRandom("count");
		const index = new CellIndex<null>(8);
		const points: Point[] = [];
		for (let i = 0; i < 2000; i++) {
			const p = pointInDisk(BLR, 8000, rand);
			points.push(p);
			index.upsert(`c${i}`, p, null);
		}
		for (let qn = 0; qn < 30; qn++) {
			const q = pointInDisk(BLR, 8000, rand);
			const r = 1000 + qn * 100;
			expect(index.countWithin(q, r)).toBe(points.filter((p) => haversineMeters(q, p) <= r).length);
		}
	});

	it("works across the antimeridian and near the poles", () => {
		const index = new CellIndex<null>(7);
		index.upsert("east", { lat: 0, lng: 179.999 }, null);
		index.upsert("west", { lat: 0, lng: -179.995 }, null);
		expect(index.nearest({ lat: 0, lng: -179.999 }, { limit: 2, radiusM: 5000 }).map((n) => n.id)).toEqual(["east", "west"]);
		index.upsert("north", { lat: 89.9, lng: 10 }, null);
		expect(index.nearest({ lat: 89.9, lng: 12 }, { limit: 1, radiusM: 10_000 }).map((n) => n.id)).toEqual(["north"]);
	});

	it("has a lower bound that never exceeds the true ring distance", () => {
		expect(ringLowerBoundM(0, 500)).toBe(0);
		expect(ringLowerBoundM(1, 500)).toBe(0);
		expect(ringLowerBoundM(2, 500)).toBeCloseTo(400);
		expect(ringLowerBoundM(10, 500)).toBeLessThan(10 * 1.5 * 500);
	});
});
