import { breakdownOf, computeFare, surgeTenths, toMajor, toPaise, type Tariff } from "../../../services/pricing/fare";
import { parseTariffs, readPricingSettings } from "../../../services/pricing/pricing.settings";
import { createRouteEstimator, greatCircleRoute } from "../../../services/pricing/routing";
import { routedDistanceProblems, straightLineProblems } from "../../../services/pricing/trip";
import { fetchSupplyDemand, normaliseSupplyReply, SupplyCache, UNKNOWN_REPLY } from "../../../services/pricing/supply";
import { haversineMeters } from "../../../lib/geo";

const SCOOTY: Tariff = { currency: "INR", baseFarePaise: 2000, perKmPaise: 500, perMinutePaise: 50, minimumFarePaise: 3000, taxBasisPoints: 500 };

describe("computeFare", () => {
	it("prices the contract's example trip (5234 m, 960 s) in paise", () => {
		const fare = computeFare(SCOOTY, 5234, 960, 10);
		expect(fare).toEqual({
			currency: "INR",
			baseFare: 2000,
			distanceFare: 2617, // 5.234 km × ₹5
			timeFare: 800, // 16 min × ₹0.50
			surgeTenths: 10,
			tax: 271, // 5 % of ₹54.17 = 2.7085
			total: 5688, // 54.17 + 2.7085 = 56.8785, rounded once
			minimumApplied: false,
		});
		expect(breakdownOf(fare)).toEqual({ baseFare: 20, distanceFare: 26.17, timeFare: 8, surgeMultiplier: 1, tax: 2.71 });
		expect(toMajor(fare.total)).toBe(56.88);
	});

	it("rounds once, at the end, half up", () => {
		// 4 m at ₹1/km = 0.4 paise, 1 s at ₹0.24/min = 0.4 paise: each part shows 0, the total is 0.8 → 1.
		const t: Tariff = { currency: "INR", baseFarePaise: 0, perKmPaise: 100, perMinutePaise: 24, minimumFarePaise: 0, taxBasisPoints: 0 };
		const fare = computeFare(t, 4, 1, 10);
		expect(fare.distanceFare).toBe(0);
		expect(fare.timeFare).toBe(0);
		expect(fare.total).toBe(1);
		// Exactly half a paisa rounds up.
		expect(computeFare(t, 5, 0, 10).total).toBe(1);
		expect(computeFare(t, 4, 0, 10).total).toBe(0);
	});

	it("applies surge to the metered fare before tax", () => {
		const fare = computeFare(SCOOTY, 5234, 960, 15);
		// (20 + 26.17 + 8) × 1.5 = 81.255; tax 4.06275; total 85.31775 → 85.32
		expect(fare.total).toBe(8532);
		expect(fare.tax).toBe(406);
		expect(breakdownOf(fare).surgeMultiplier).toBe(1.5);
		// The displayed parts are the un-surged meter readings.
		expect(fare.distanceFare).toBe(2617);
	});

	it("charges the minimum fare (plus tax) when the meter is below it", () => {
		const fare = computeFare(SCOOTY, 100, 30, 10); // 20 + 0.5 + 0.25 = 20.75 < 30
		expect(fare.minimumApplied).toBe(true);
		expect(fare.tax).toBe(150);
		expect(fare.total).toBe(3150);
		// Surge cannot push below the minimum either, and can lift above it.
		expect(computeFare(SCOOTY, 100, 30, 20).total).toBe(4358); // 41.5 × 1.05 = 43.575 → 43.58
	});

	it("computes tax with basis-point precision", () => {
		const t: Tariff = { ...SCOOTY, minimumFarePaise: 0, taxBasisPoints: 1825 }; // 18.25 %
		const fare = computeFare(t, 0, 0, 10); // ₹20 base only
		expect(fare.tax).toBe(365);
		expect(fare.total).toBe(2365);
	});

	it("stays exact for large trips (no floating-point drift)", () => {
		const t: Tariff = { currency: "INR", baseFarePaise: 99_999, perKmPaise: 99_999, perMinutePaise: 99_999, minimumFarePaise: 0, taxBasisPoints: 2_800 };
		const fare = computeFare(t, 1_000_000, 360_000, 50);
		// (999.99 + 999.99 × 1000 + 999.99 × 6000) × 5 × 1.28, in paise
		const expected = Math.round((99_999 + 99_999 * 1000 + 99_999 * 6000) * 5 * 1.28);
		expect(fare.total).toBe(expected);
		expect(Number.isSafeInteger(fare.total)).toBe(true);
	});

	it("refuses nonsense inputs", () => {
		expect(() => computeFare(SCOOTY, -1, 0, 10)).toThrow(RangeError);
		expect(() => computeFare(SCOOTY, 1.5, 0, 10)).toThrow(RangeError);
		expect(() => computeFare(SCOOTY, 1, 0, 9)).toThrow(RangeError);
	});
});

describe("money conversions", () => {
	it("converts exactly between paise and major units", () => {
		expect(toPaise(26.17)).toBe(2617);
		expect(toPaise(0.29)).toBe(29); // 0.29 × 100 = 28.999999999999996 in floating point
		expect(() => toPaise(1.005)).toThrow(/2 decimals/);
		expect(() => toPaise(1.234)).toThrow(/2 decimals/);
		expect(() => toPaise(Number.NaN)).toThrow();
		expect(toMajor(2617)).toBe(26.17);
		expect(toMajor(5)).toBe(0.05);
		expect(() => toMajor(1.5)).toThrow();
	});

	it("never shows more than 2 decimals", () => {
		for (let paise = 0; paise < 20_000; paise += 7) {
			const s = String(toMajor(paise));
			expect(s).toMatch(/^\d+(\.\d{1,2})?$/);
		}
	});
});

describe("surgeTenths", () => {
	const policy = { maxTenths: 20, sensitivity: 0.5 };

	it("is 1.0× while supply covers demand", () => {
		expect(surgeTenths(0, 0, policy)).toBe(10);
		expect(surgeTenths(0, 10, policy)).toBe(10);
		expect(surgeTenths(10, 10, policy)).toBe(10);
		expect(surgeTenths(3, 10, policy)).toBe(10);
	});

	it("rises with the shortage in 0.1 steps, rounding down", () => {
		expect(surgeTenths(14, 10, policy)).toBe(12); // 1 + 0.4 × 0.5 = 1.2 exactly
		expect(surgeTenths(15, 10, policy)).toBe(12); // 1.25 → 1.2
		expect(surgeTenths(20, 10, policy)).toBe(15);
		expect(surgeTenths(30, 10, policy)).toBe(20);
	});

	it("is bounded by the configured maximum", () => {
		expect(surgeTenths(1_000, 1, policy)).toBe(20);
		expect(surgeTenths(5, 0, policy)).toBe(20); // demand and no supply at all
		expect(surgeTenths(1_000, 1, { maxTenths: 13, sensitivity: 0.5 })).toBe(13);
		expect(surgeTenths(1_000, 1, { maxTenths: 10, sensitivity: 0.5 })).toBe(10); // SURGE_MAX=1 turns surge off
	});

	it("treats odd inputs as no surge and always answers an integer in range", () => {
		expect(surgeTenths(Number.NaN, 3, policy)).toBe(10);
		expect(surgeTenths(5, -1, policy)).toBe(10);
		expect(surgeTenths(Infinity, 1, policy)).toBe(10);
		for (let demand = 0; demand < 60; demand += 3) {
			for (let supply = 0; supply < 30; supply += 2) {
				const t = surgeTenths(demand, supply, policy);
				expect(Number.isInteger(t)).toBe(true);
				expect(t).toBeGreaterThanOrEqual(10);
				expect(t).toBeLessThanOrEqual(20);
			}
		}
	});
});

describe("pricing settings", () => {
	it("has sane defaults and never a default signing secret", () => {
		const s = readPricingSettings({});
		expect(s.tariffs.scooty.currency).toBe("INR");
		expect(s.surgeMaxTenths).toBe(20);
		expect(s.maxTripMetres).toBe(100_000);
		expect(s.quoteTtlSeconds).toBe(300);
		expect(s.roadFactor).toBe(1.3);
		expect(s.routing).toBe("greatcircle");
		expect(s.signingSecret).toBeUndefined();
	});

	it("lets TARIFFS_JSON override single fields", () => {
		const t = parseTariffs('{"cab":{"perKm":16.5,"taxPercent":18}}');
		expect(t.cab.perKmPaise).toBe(1650);
		expect(t.cab.taxBasisPoints).toBe(1800);
		expect(t.cab.baseFarePaise).toBe(5000); // default kept
		expect(t.scooty).toEqual(parseTariffs(undefined).scooty);
	});

	it("refuses bad tariffs with a message naming the setting", () => {
		expect(() => parseTariffs("{nope")).toThrow(/TARIFFS_JSON is not valid JSON/);
		expect(() => parseTariffs('{"bike":{}}')).toThrow(/unknown service type "bike"/);
		expect(() => parseTariffs('{"cab":{"perKm":1.234}}')).toThrow(/TARIFFS_JSON.cab.perKm must have at most 2 decimals/);
		expect(() => parseTariffs('{"cab":{"perKm":-1}}')).toThrow(/non-negative/);
		expect(() => parseTariffs('{"cab":{"perkm":1}}')).toThrow(/unknown field "perkm"/);
		expect(() => parseTariffs('{"cab":{"taxPercent":120}}')).toThrow(/taxPercent/);
	});

	it("refuses bad numbers and short secrets", () => {
		expect(readPricingSettings({ SURGE_MAX: "1.5" }).surgeMaxTenths).toBe(15);
		expect(() => readPricingSettings({ SURGE_MAX: "2.05" })).toThrow(/SURGE_MAX/);
		expect(() => readPricingSettings({ SURGE_MAX: "0.5" })).toThrow(/SURGE_MAX/);
		expect(() => readPricingSettings({ MAX_TRIP_KM: "abc" })).toThrow(/MAX_TRIP_KM/);
		expect(() => readPricingSettings({ QUOTE_TTL_SECONDS: "0" })).toThrow(/QUOTE_TTL_SECONDS/);
		expect(() => readPricingSettings({ QUOTE_SIGNING_SECRET: "short" })).toThrow(/QUOTE_SIGNING_SECRET/);
		expect(() => readPricingSettings({ ROUTING: "google" })).toThrow(/ROUTING/);
	});

	it("reads ROUTING in any case and never echoes a refused secret", () => {
		expect(readPricingSettings({}).routing).toBe("greatcircle");
		expect(readPricingSettings({ ROUTING: "OSRM" }).routing).toBe("osrm");
		expect(() => readPricingSettings({ QUOTE_SIGNING_SECRET: "short-secret" })).toThrow(/^QUOTE_SIGNING_SECRET must be at least 32 characters/);
		expect(() => readPricingSettings({ QUOTE_SIGNING_SECRET: "short-secret" })).not.toThrow(/short-secret/);
		expect(() => readPricingSettings({ QUOTE_SIGNING_PREVIOUS_SECRETS: `${"p".repeat(32)},tiny` })).toThrow(/QUOTE_SIGNING_PREVIOUS_SECRETS/);
		expect(readPricingSettings({ QUOTE_SIGNING_PREVIOUS_SECRETS: ` ${"p".repeat(32)} , ` }).previousSigningSecrets).toEqual(["p".repeat(32)]);
		expect(readPricingSettings({ QUOTE_SIGNING_SECRET: "   " }).signingSecret).toBeUndefined();
	});
});

describe("routing", () => {
	const a = { lat: 12.9716, lng: 77.5946 };
	const b = { lat: 12.9352, lng: 77.6245 };

	it("is great-circle distance × road factor at the service type's speed, in integers", () => {
		const r = greatCircleRoute(a, b, 1.3, 24);
		expect(r.distance).toBe(Math.round(haversineMeters(a, b) * 1.3));
		expect(Number.isInteger(r.duration)).toBe(true);
		expect(r.duration).toBe(Math.ceil(r.distance / (24_000 / 3600)));
	});

	it("uses the per-type speed behind the RouteEstimator interface", async () => {
		const router = createRouteEstimator({ routing: "greatcircle", osrmUrl: undefined, roadFactor: 1.3, speedsKmh: { scooty: 30, cab: 15 } });
		const scooty = await router.estimate(a, b, "scooty");
		const cab = await router.estimate(a, b, "cab");
		expect(scooty.distance).toBe(cab.distance);
		expect(cab.duration).toBeGreaterThan(scooty.duration);
	});

	it("refuses ROUTING=osrm clearly (not built yet)", () => {
		expect(() => createRouteEstimator({ routing: "osrm", osrmUrl: "http://osrm:5000", roadFactor: 1.3, speedsKmh: { scooty: 1, cab: 1 } })).toThrow(
			/ROUTING=osrm is not implemented/,
		);
	});
});

describe("trip limits", () => {
	const limits = { minTripMetres: 20, maxTripMetres: 100_000 };
	const p = { lat: 12.9716, lng: 77.5946 };

	it("refuses equal or nearly equal points", () => {
		expect(straightLineProblems(p, p, limits)).toEqual([{ field: "drop", message: expect.stringContaining("at least 20 m") }]);
		expect(straightLineProblems(p, { lat: 12.97165, lng: 77.5946 }, limits)).toHaveLength(1); // ≈ 5.6 m
		expect(straightLineProblems(p, { lat: 12.9719, lng: 77.5946 }, limits)).toEqual([]); // ≈ 33 m
		expect(straightLineProblems(p, p, { minTripMetres: 0, maxTripMetres: 1000 })).toHaveLength(1); // identical is never a trip
	});

	it("refuses trips over the maximum, straight or routed", () => {
		expect(straightLineProblems(p, { lat: 28.6139, lng: 77.209 }, limits)).toEqual([
			{ field: "drop", message: "trip is longer than the maximum of 100 km" },
		]);
		expect(routedDistanceProblems(100_001, limits)).toHaveLength(1);
		expect(routedDistanceProblems(100_000, limits)).toEqual([]);
	});
});

describe("supply from dispatch", () => {
	it("normalises replies defensively", () => {
		expect(normaliseSupplyReply({ scooty: { eta: 179.6, available: 3, demand: 1 }, cab: { eta: null, available: 0, demand: 2 } })).toEqual({
			scooty: { eta: 180, available: 3, demand: 1 },
			cab: { eta: null, available: 0, demand: 2 },
		});
		expect(normaliseSupplyReply({ scooty: { eta: -5, available: "x" } })).toEqual({
			scooty: { eta: null, available: 0, demand: 0 },
			cab: { eta: null, available: 0, demand: 0 },
		});
		expect(normaliseSupplyReply(null)).toEqual(UNKNOWN_REPLY);
	});

	it("degrades to unknown when dispatch fails or never answers", async () => {
		const failures: unknown[] = [];
		const broken = await fetchSupplyDemand(
			() => Promise.reject(new Error("boom")),
			1_000,
			(e) => failures.push(e),
		);
		expect(broken).toEqual(UNKNOWN_REPLY);
		const hung = await fetchSupplyDemand(
			() => new Promise(() => undefined),
			5,
			(e) => failures.push(e),
		);
		expect(hung).toEqual(UNKNOWN_REPLY);
		expect(failures).toHaveLength(2);
		const fine = await fetchSupplyDemand(() => Promise.resolve({ scooty: { eta: 60, available: 1, demand: 0 } }), 1_000);
		expect(fine.scooty.eta).toBe(60);
	});

	it("caches per ~100 m cell for the configured time", () => {
		const cache = new SupplyCache(2_000);
		const reply = normaliseSupplyReply({ cab: { eta: 1, available: 1, demand: 1 } });
		cache.set({ lat: 12.97161, lng: 77.59461 }, reply, 1_000);
		expect(cache.get({ lat: 12.97159, lng: 77.5946 }, 2_000)).toBe(reply); // same cell
		expect(cache.get({ lat: 12.98, lng: 77.5946 }, 2_000)).toBeUndefined(); // another cell
		expect(cache.get({ lat: 12.97161, lng: 77.59461 }, 3_000)).toBeUndefined(); // expired
		const off = new SupplyCache(0);
		off.set({ lat: 1, lng: 1 }, reply, 0);
		expect(off.get({ lat: 1, lng: 1 }, 0)).toBeUndefined();
	});
});
