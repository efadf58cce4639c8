import {
	bearingDegrees,
	destinationPoint,
	haversineMeters,
	interpolate,
	isValidPoint,
	normalizeBearing,
	normalizeLng,
	roundCoordinate,
} from "../../../lib/geo";

const MG_ROAD = { lat: 12.9716, lng: 77.5946 };
const KORAMANGALA = { lat: 12.9352, lng: 77.6245 };

describe("haversineMeters", () => {
	it("is zero for the same point", () => {
		expect(haversineMeters(MG_ROAD, MG_ROAD)).toBe(0);
	});

	it("gives one degree of latitude ≈ 111.2 km", () => {
		expect(haversineMeters({ lat: 0, lng: 0 }, { lat: 1, lng: 0 })).toBeCloseTo(111_195, -1);
	});

	it("measures a Bengaluru trip (MG Road → Koramangala ≈ 5.2 km) and is symmetric", () => {
		const d = haversineMeters(MG_ROAD, KORAMANGALA);
		expect(d).toBeGreaterThan(5_100);
		expect(d).toBeLessThan(5_300);
		expect(haversineMeters(KORAMANGALA, MG_ROAD)).toBeCloseTo(d, 6);
	});

	it("handles the antimeridian and antipodes", () => {
		expect(haversineMeters({ lat: 0, lng: 179.9 }, { lat: 0, lng: -179.9 })).toBeCloseTo(22_239, -1);
		expect(haversineMeters({ lat: 0, lng: 0 }, { lat: 0, lng: 180 })).toBeCloseTo(Math.PI * 6_371_008.8, 0);
	});
});

describe("bearingDegrees", () => {
	it("points north, east, south and west", () => {
		expect(bearingDegrees({ lat: 0, lng: 0 }, { lat: 1, lng: 0 })).toBeCloseTo(0, 6);
		expect(bearingDegrees({ lat: 0, lng: 0 }, { lat: 0, lng: 1 })).toBeCloseTo(90, 6);
		expect(bearingDegrees({ lat: 1, lng: 0 }, { lat: 0, lng: 0 })).toBeCloseTo(180, 6);
		expect(bearingDegrees({ lat: 0, lng: 1 }, { lat: 0, lng: 0 })).toBeCloseTo(270, 6);
	});

	it("is in [0, 360) and 0 for identical points", () => {
		const b = bearingDegrees(MG_ROAD, KORAMANGALA);
		expect(b).toBeGreaterThanOrEqual(0);
		expect(b).toBeLessThan(360);
		expect(b).toBeGreaterThan(90); // south-east
		expect(b).toBeLessThan(180);
		expect(bearingDegrees(MG_ROAD, MG_ROAD)).toBe(0);
	});

	it("normalizes angles", () => {
		expect(normalizeBearing(-90)).toBe(270);
		expect(normalizeBearing(360)).toBe(0);
		expect(normalizeBearing(725)).toBe(5);
		expect(Object.is(normalizeBearing(-0), 0)).toBe(true);
		expect(normalizeLng(190)).toBe(-170);
		expect(normalizeLng(-190)).toBe(170);
		expect(normalizeLng(77.5)).toBe(77.5);
	});
});

describe("destinationPoint", () => {
	it("inverts haversine and bearing", () => {
		const bearing = bearingDegrees(MG_ROAD, KORAMANGALA);
		const dist = haversineMeters(MG_ROAD, KORAMANGALA);
		const p = destinationPoint(MG_ROAD, bearing, dist);
		expect(haversineMeters(p, KORAMANGALA)).toBeLessThan(0.01);
	});

	it("moves the requested distance in the requested direction", () => {
		for (const bearing of [0, 45, 90, 135, 180, 270, 359]) {
			const p = destinationPoint(MG_ROAD, bearing, 1_000);
			expect(haversineMeters(MG_ROAD, p)).toBeCloseTo(1_000, 3);
			expect(bearingDegrees(MG_ROAD, p)).toBeCloseTo(bearing === 359 ? 359 : bearing, 1);
		}
	});

	it("stays in range across the antimeridian", () => {
		const p = destinationPoint({ lat: 0, lng: 179.99 }, 90, 5_000);
		expect(isValidPoint(p)).toBe(true);
		expect(p.lng).toBeLessThan(0);
	});
});

describe("interpolate", () => {
	it("returns the ends at 0 and 1 and clamps outside", () => {
		expect(interpolate(MG_ROAD, KORAMANGALA, 0)).toEqual(MG_ROAD);
		expect(interpolate(MG_ROAD, KORAMANGALA, 1)).toEqual(KORAMANGALA);
		expect(interpolate(MG_ROAD, KORAMANGALA, -3)).toEqual(MG_ROAD);
		expect(interpolate(MG_ROAD, KORAMANGALA, 7)).toEqual(KORAMANGALA);
	});

	it("splits the path by distance", () => {
		const total = haversineMeters(MG_ROAD, KORAMANGALA);
		for (const f of [0.1, 0.25, 0.5, 0.9]) {
			const p = interpolate(MG_ROAD, KORAMANGALA, f);
			expect(haversineMeters(MG_ROAD, p)).toBeCloseTo(total * f, 2);
			expect(haversineMeters(p, KORAMANGALA)).toBeCloseTo(total * (1 - f), 2);
		}
	});

	it("copes with identical points", () => {
		expect(interpolate(MG_ROAD, MG_ROAD, 0.5)).toEqual(MG_ROAD);
	});
});

describe("roundCoordinate and isValidPoint", () => {
	it("rounds to 5 decimals by default", () => {
		expect(roundCoordinate(12.971634)).toBe(12.97163);
		expect(roundCoordinate(77.594656)).toBe(77.59466);
		expect(roundCoordinate(12.34567, 2)).toBe(12.35);
		expect(Object.is(roundCoordinate(-0.000001), 0)).toBe(true);
	});

	it("accepts only finite in-range points", () => {
		expect(isValidPoint(MG_ROAD)).toBe(true);
		expect(isValidPoint({ lat: 90, lng: -180 })).toBe(true);
		expect(isValidPoint({ lat: 90.1, lng: 0 })).toBe(false);
		expect(isValidPoint({ lat: 0, lng: 180.5 })).toBe(false);
		expect(isValidPoint({ lat: Number.NaN, lng: 0 })).toBe(false);
		expect(isValidPoint({ lat: "1", lng: 0 })).toBe(false);
		expect(isValidPoint(null)).toBe(false);
	});
});
