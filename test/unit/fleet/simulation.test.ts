import {
	compressed,
	legDurationMs,
	offerStep,
	pickSlots,
	positionOnLeg,
	reportIntervalMs,
	rideStep,
	seedDriver,
	spawnDriver,
	seededRandom,
} from "../../../services/fleet/simulation";
import { readFleetSettings, seededCount, spawnSlots } from "../../../services/fleet/fleet.settings";
import { destinationPoint, haversineMeters } from "../../../lib/geo";
import type { SimRide } from "../../../contracts/dispatch";

const BLR = { lat: 12.9716, lng: 77.5946 };

describe("simulated fleet rules", () => {
	const settings = { ...readFleetSettings({ SIM_SPEED: "60" }) };

	it("seeds the same drivers for the same inputs (idempotent seeding) within the radius", () => {
		const a = seedDriver(0, BLR, "cab", 7, 4000);
		const b = seedDriver(0, BLR, "cab", 7, 4000);
		expect(a).toEqual(b);
		expect(a.phone).toMatch(/^\+[1-9][0-9]{6,14}$/);
		expect(seedDriver(0, BLR, "scooty", 7, 4000).phone).not.toBe(a.phone);
		expect(seedDriver(1, BLR, "cab", 7, 4000).phone).not.toBe(a.phone);
		for (let n = 0; n < 100; n++) expect(haversineMeters(BLR, seedDriver(0, BLR, "scooty", n, 4000).home)).toBeLessThanOrEqual(4000.5);
		const phones = new Set(Array.from({ length: 500 }, (_, n) => seedDriver(2, BLR, "cab", n, 4000).phone));
		expect(phones.size).toBe(500);
	});

	it("spawns a driver close to a pickup", () => {
		const d = spawnDriver(3, BLR, "scooty", seededRandom("spawn"));
		const dist = haversineMeters(BLR, d.home);
		expect(dist).toBeGreaterThanOrEqual(299);
		expect(dist).toBeLessThanOrEqual(1201);
		expect(d.phone).toMatch(/^\+[1-9][0-9]{6,14}$/);
	});

	it("a spawn slot is a driver's identity: the same slot is the same phone wherever and whatever type it spawns for", () => {
		const far = destinationPoint(BLR, 45, 50_000);
		expect(spawnDriver(7, BLR, "cab").phone).toBe(spawnDriver(7, far, "scooty").phone);
		const phones = new Set(Array.from({ length: 1000 }, (_, slot) => spawnDriver(slot, BLR, "cab").phone));
		expect(phones.size).toBe(1000);
		// Never one of the seeded drivers' phones.
		expect(spawnDriver(0, BLR, "cab").phone.startsWith("+9170")).toBe(false);
	});

	it("picks distinct slots within the bound, none when there are no slots", () => {
		const rand = seededRandom("slots");
		for (let i = 0; i < 50; i++) {
			const picked = pickSlots(140, 8, rand);
			expect(new Set(picked).size).toBe(8);
			for (const s of picked) expect(s >= 0 && s < 140).toBe(true);
		}
		expect(pickSlots(3, 8, rand).sort()).toEqual([0, 1, 2]);
		expect(pickSlots(0, 8, rand)).toEqual([]);
	});

	it("SIM_MAX_DRIVERS bounds seeded plus spawned drivers (default 200) and refuses a bound below the seeded drivers", () => {
		const defaults = readFleetSettings({});
		expect(seededCount(defaults)).toBe(3 * 2 * 10);
		expect(defaults.maxDrivers).toBe(200);
		expect(spawnSlots(defaults)).toBe(140);
		const small = readFleetSettings({ SIM_CITIES: "12.97,77.59", FLEET_DRIVERS_PER_CITY: "2", SIM_MAX_DRIVERS: "10" });
		expect(spawnSlots(small)).toBe(6);
		expect(() => readFleetSettings({ SIM_CITIES: "12.97,77.59", FLEET_DRIVERS_PER_CITY: "2", SIM_MAX_DRIVERS: "3" })).toThrow(/SIM_MAX_DRIVERS/);
		expect(() => readFleetSettings({ SIM_MAX_DRIVERS: "many" })).toThrow(/SIM_MAX_DRIVERS/);
		// A seeded fleet larger than 200 raises the default bound to it (it still starts).
		expect(readFleetSettings({ FLEET_DRIVERS_PER_CITY: "50" }).maxDrivers).toBe(300);
	});

	it("compresses leg durations and delays by SIM_SPEED", () => {
		const to = destinationPoint(BLR, 90, 1000);
		// 1000 m × 1.3 at 20 km/h = 234 s = 234 000 ms; /60 = 3900 ms
		expect(legDurationMs(BLR, to, "cab", settings, null)).toBeCloseTo(3900, 0);
		expect(legDurationMs(BLR, to, "cab", settings, "fast")).toBe(settings.fastLegMs);
		expect(compressed(60_000, 60, null)).toBe(1000);
		expect(compressed(60_000, 60, "fast")).toBe(0);
		expect(reportIntervalMs(settings)).toBe(Math.max(settings.minReportIntervalMs, 5000 / 60));
	});

	it("moves along the leg facing its direction", () => {
		const to = destinationPoint(BLR, 90, 1000);
		const mid = positionOnLeg(BLR, to, 0.5);
		expect(haversineMeters(BLR, mid)).toBeCloseTo(500, 0);
		expect(mid.heading).toBe(90);
		expect(positionOnLeg(BLR, to, 1)).toMatchObject({ lat: to.lat, lng: to.lng });
	});

	it("accepts offers after the (compressed) accept delay", () => {
		const offer = { driverId: "drv_a", orderId: "ord_a", offeredAt: "2026-01-01T00:00:00.000Z", expiresAt: "2026-01-01T00:00:15.000Z", sandbox: null };
		const t0 = Date.parse(offer.offeredAt);
		expect(offerStep(offer, t0, settings)).toEqual({ kind: "wait" });
		expect(offerStep(offer, t0 + settings.acceptDelayMs / 60, settings)).toEqual({ kind: "accept" });
		expect(offerStep({ ...offer, sandbox: "fast" }, t0, settings)).toEqual({ kind: "accept" });
	});

	describe("rideStep derives progress from the phase and its start (restart-safe)", () => {
		const pickup = destinationPoint(BLR, 0, 1000);
		const drop = destinationPoint(pickup, 90, 3000);
		const since = "2026-01-01T00:00:00.000Z";
		const t0 = Date.parse(since);
		const ride = (r: Partial<SimRide>): SimRide => ({
			driverId: "drv_a",
			orderId: "ord_a",
			serviceType: "cab",
			status: "accepted",
			phaseSince: since,
			origin: BLR,
			pickup,
			drop,
			sandbox: null,
			dropOuts: 0,
			...r,
		});
		const toPickupMs = legDurationMs(BLR, pickup, "cab", settings, null);
		const tripMs = legDurationMs(pickup, drop, "cab", settings, null);

		it("drives to the pickup, then arrives", () => {
			const step = rideStep(ride({}), t0 + toPickupMs / 2, settings);
			expect(step.kind).toBe("report");
			if (step.kind === "report") expect(haversineMeters(BLR, step.location)).toBeCloseTo(500, -1);
			expect(rideStep(ride({}), t0 + toPickupMs + 1, settings)).toMatchObject({ kind: "arrive", location: { lat: pickup.lat, lng: pickup.lng } });
		});

		it("boards for the compressed boarding delay, then starts", () => {
			expect(rideStep(ride({ status: "arrived" }), t0 + 10, settings)).toEqual({ kind: "wait" });
			expect(rideStep(ride({ status: "arrived" }), t0 + settings.boardingDelayMs / 60, settings)).toEqual({ kind: "start" });
		});

		it("drives to the drop, then drops", () => {
			expect(rideStep(ride({ status: "started" }), t0 + tripMs / 3, settings).kind).toBe("report");
			expect(rideStep(ride({ status: "started" }), t0 + tripMs + 1, settings)).toMatchObject({
				kind: "drop",
				location: { lat: drop.lat, lng: drop.lng },
			});
		});

		it("drops out halfway in the driver_drop_out scenario, only the first driver", () => {
			expect(rideStep(ride({ sandbox: "driver_drop_out" }), t0 + toPickupMs * 0.6, settings).kind).toBe("dropOut");
			expect(rideStep(ride({ sandbox: "driver_drop_out", dropOuts: 1 }), t0 + toPickupMs * 0.6, settings).kind).toBe("report");
		});
	});
});
