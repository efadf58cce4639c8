import { drivenMetersAtDrop, haversineSql } from "../../../services/dispatch/driven-distance";
import { destinationPoint, haversineMeters } from "../../../lib/geo";

const PICKUP = { lat: 12.9716, lng: 77.5946 };

describe("driven distance", () => {
	it("adds the last leg from the pickup when nothing was sampled yet", () => {
		const end = destinationPoint(PICKUP, 90, 1234);
		expect(drivenMetersAtDrop({ driven_m: 0, driven_lat: null, driven_lng: null, pickup_lat: PICKUP.lat, pickup_lng: PICKUP.lng }, end)).toBe(1234);
	});

	it("adds the last leg from the last sample to the sum so far", () => {
		const sample = destinationPoint(PICKUP, 0, 3000);
		const end = destinationPoint(sample, 90, 500);
		const ride = { driven_m: 3000, driven_lat: sample.lat, driven_lng: sample.lng, pickup_lat: PICKUP.lat, pickup_lng: PICKUP.lng };
		expect(drivenMetersAtDrop(ride, end)).toBe(3500);
		expect(drivenMetersAtDrop(ride, null)).toBe(3000);
		expect(drivenMetersAtDrop({ pickup_lat: PICKUP.lat, pickup_lng: PICKUP.lng }, PICKUP)).toBe(0);
	});

	it("writes lib/geo's haversine in SQL (the same formula and radius)", () => {
		const sql = haversineSql("a_lat", "a_lng", "b_lat", "b_lng");
		const b = destinationPoint(PICKUP, 33, 2500);
		// Evaluate the SQL's arithmetic with JavaScript's Math: same names, same order.
		const js = sql
			.replace(/a_lat/g, String(PICKUP.lat))
			.replace(/a_lng/g, String(PICKUP.lng))
			.replace(/b_lat/g, String(b.lat))
			.replace(/b_lng/g, String(b.lng))
			.replace(/radians\(/g, "rad(")
			.replace(/\b(asin|least|sqrt|power|sin|cos)\(/g, (_m, f: string) => `${f === "least" ? "Math.min" : f === "power" ? "Math.pow" : `Math.${f}`}(`);
		const value = new Function("rad", `return ${js};`)((d: number) => (d * Math.PI) / 180) as number;
		expect(value).toBeCloseTo(haversineMeters(PICKUP, b), 6);
	});
});
