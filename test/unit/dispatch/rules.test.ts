import { etaSeconds, etaBetween, followOrder, isMovingStatus, legTarget, sandboxScenario, type RideMirror } from "../../../services/dispatch/dispatch-rules";
import { effectiveLocationIntervalMs, readDispatchSettings } from "../../../services/dispatch/dispatch.settings";
import { readFleetSettings } from "../../../services/fleet/fleet.settings";
import { destinationPoint } from "../../../lib/geo";

const mirror = (m: Partial<RideMirror>): RideMirror => ({ state: "searching", orderStatus: "searching", driverId: null, leaseActive: false, ...m });

describe("dispatch rules", () => {
	it("computes ETAs in whole seconds from distance, road factor and speed", () => {
		// 1000 m straight × 1.5 road = 1500 m at 18 km/h (5 m/s) = 300 s
		expect(etaSeconds(1000, 18, 1.5)).toBe(300);
		expect(etaSeconds(1001, 18, 1.5)).toBe(301); // rounded up
		expect(etaSeconds(0, 18, 1.5)).toBe(0);
		const a = { lat: 12.9716, lng: 77.5946 };
		const b = destinationPoint(a, 45, 2000);
		expect(etaBetween(a, b, "cab", { scooty: 24, cab: 20 }, 1.3)).toBe(468);
	});

	it("knows which statuses move and where the driver heads", () => {
		const p = { lat: 1, lng: 1 };
		const d = { lat: 2, lng: 2 };
		expect(["accepted", "arrived", "started", "searching", "dropped"].map(isMovingStatus)).toEqual([true, false, true, false, false]);
		expect(legTarget("accepted", p, d)).toBe(p);
		expect(legTarget("arrived", p, d)).toBe(p);
		expect(legTarget("started", p, d)).toBe(d);
		expect(legTarget("dropped", p, d)).toBeNull();
	});

	it("reads sandbox scenarios only in simulated mode and only known ones", () => {
		expect(sandboxScenario({ sandbox: { scenario: "no_driver_found" } }, "simulated")).toBe("no_driver_found");
		expect(sandboxScenario({ sandbox: "driver_drop_out" }, "simulated")).toBe("driver_drop_out");
		expect(sandboxScenario({ sandbox: { scenario: "fast" } }, "live")).toBeNull();
		expect(sandboxScenario({ sandbox: { scenario: "explode" } }, "simulated")).toBeNull();
		expect(sandboxScenario(null, "simulated")).toBeNull();
		expect(sandboxScenario({ partnerRef: "x" }, "simulated")).toBeNull();
		// Test rides only: a live ride ignores sandbox directives even with the simulated fleet running.
		expect(sandboxScenario({ sandbox: { scenario: "no_driver_found" } }, "simulated", "test")).toBe("no_driver_found");
		expect(sandboxScenario({ sandbox: { scenario: "no_driver_found" } }, "simulated", "live")).toBeNull();
		expect(sandboxScenario({ sandbox: "fast" }, "live", "test")).toBeNull();
	});

	describe("followOrder (dispatch's view follows the order)", () => {
		it("closes on any terminal status, once", () => {
			for (const s of ["dropped", "customer_cancelled", "no_driver_found"]) {
				expect(followOrder(mirror({ state: "assigned", orderStatus: "started", driverId: "d1" }), s, "d1", false)).toEqual({ kind: "close" });
				expect(followOrder(mirror({ state: "searching" }), s, null, false)).toEqual({ kind: "close" });
			}
			expect(followOrder(mirror({ state: "closed", orderStatus: "dropped" }), "dropped", "d1", false)).toEqual({ kind: "none" });
		});

		it("treats searching after an assignment as a drop-out", () => {
			expect(followOrder(mirror({ state: "assigned", orderStatus: "arrived", driverId: "d1" }), "searching", null, false)).toEqual({
				kind: "research",
				formerDriverId: "d1",
				droppedOut: true,
			});
		});

		it("leaves in-flight calls alone until their answer or lease is over", () => {
			const accepting = mirror({ state: "accepting", driverId: "d1", leaseActive: true });
			expect(followOrder(accepting, "searching", null, false)).toEqual({ kind: "none" });
			expect(followOrder(accepting, "searching", null, true)).toEqual({ kind: "research", formerDriverId: "d1", droppedOut: false });
			expect(followOrder({ ...accepting, leaseActive: false }, "searching", null, false)).toEqual({
				kind: "research",
				formerDriverId: "d1",
				droppedOut: false,
			});
			const ending = mirror({ state: "ending", leaseActive: true });
			expect(followOrder(ending, "searching", null, false)).toEqual({ kind: "none" });
			expect(followOrder(ending, "searching", null, true)).toEqual({ kind: "resume" });
		});

		it("assigns the order's driver and notices status and driver changes", () => {
			expect(followOrder(mirror({ state: "accepting", driverId: "d1", leaseActive: true }), "accepted", "d1", false)).toEqual({
				kind: "assign",
				driverId: "d1",
				statusChanged: true,
			});
			expect(followOrder(mirror({ state: "assigned", orderStatus: "accepted", driverId: "d1" }), "accepted", "d1", false)).toEqual({ kind: "none" });
			expect(followOrder(mirror({ state: "assigned", orderStatus: "accepted", driverId: "d1" }), "arrived", "d1", false)).toEqual({
				kind: "assign",
				driverId: "d1",
				statusChanged: true,
			});
			expect(followOrder(mirror({ state: "assigned", orderStatus: "accepted", driverId: "d1" }), "accepted", "d2", false)).toEqual({
				kind: "assign",
				driverId: "d2",
				statusChanged: false,
			});
			expect(followOrder(mirror({ state: "searching" }), "started", "d3", false)).toEqual({ kind: "assign", driverId: "d3", statusChanged: true });
		});

		it("does nothing while searching and the order agrees", () => {
			expect(followOrder(mirror({}), "searching", null, false)).toEqual({ kind: "none" });
		});
	});

	describe("settings", () => {
		it("has defaults and reads overrides", () => {
			const s = readDispatchSettings({});
			expect(s.fleetMode).toBe("simulated");
			expect(s.offerTimeoutMs).toBe(15_000);
			expect(s.dispatchTimeoutMs).toBe(120_000);
			expect(s.locationIntervalMs).toBe(5000);
			expect(s.speedsKmh).toEqual({ scooty: 24, cab: 20 });
			const o = readDispatchSettings({ FLEET_MODE: "live", DISPATCH_OFFER_TIMEOUT_MS: "800", LOCATION_INTERVAL_MS: "1000", SPEED_KMH_CAB: "30" });
			expect(o.offerTimeoutMs).toBe(800);
			expect(o.locationIntervalMs).toBe(1000);
			expect(o.speedsKmh.cab).toBe(30);
		});

		it("compresses the location cadence by SIM_SPEED in simulated mode only, with a floor", () => {
			expect(effectiveLocationIntervalMs(5000, "simulated", 10)).toBe(500);
			expect(effectiveLocationIntervalMs(5000, "simulated", 60)).toBe(250);
			expect(effectiveLocationIntervalMs(5000, "live", 60)).toBe(5000);
			expect(effectiveLocationIntervalMs(100, "simulated", 60)).toBe(100);
			expect(readDispatchSettings({ SIM_SPEED: "10" }).locationIntervalMs).toBe(500);
			// Live rides keep the contract's cadence whatever SIM_SPEED: real drivers, real time.
			expect(readDispatchSettings({ SIM_SPEED: "10" }).liveLocationIntervalMs).toBe(5000);
		});

		it("refuses nonsense instead of guessing", () => {
			expect(() => readDispatchSettings({ DISPATCH_OFFER_TIMEOUT_MS: "soon" })).toThrow(/DISPATCH_OFFER_TIMEOUT_MS/);
			expect(() => readDispatchSettings({ SIM_SPEED: "0" })).toThrow(/SIM_SPEED/);
			expect(() => readFleetSettings({ FLEET_DRIVERS_PER_CITY: "-1" })).toThrow(/FLEET_DRIVERS_PER_CITY/);
		});
	});
});
