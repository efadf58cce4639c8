import type { DriverChangedEvent } from "../../../contracts/dispatch";
import { DriverIndex, type DemandOrder } from "../../../services/dispatch/driver-index";
import type { DispatchSettings } from "../../../services/dispatch/dispatch.settings";
import { BLR, TX, away, dispatchSettings, driverRow, fakeLog, fakeRepo, rideRow, settle } from "../../helpers/dispatch-fakes";

function setup(overrides: Partial<DispatchSettings> = {}) {
	const settings = dispatchSettings(overrides);
	const repo = fakeRepo();
	const announce = jest.fn<void, [DriverChangedEvent]>();
	const onWork = jest.fn();
	const log = fakeLog();
	const index = new DriverIndex({ settings, repo, announce, onWork, log });
	return { settings, repo, announce, onWork, log, index };
}

/** A searching ride of `partnerId` picked up at `pickup`. */
function searching(orderId: string, pickup = BLR, partnerId = "prt_1", more: Partial<DemandOrder> = {}): DemandOrder {
	return { orderId, partnerId, serviceType: "cab", mode: "test", pickup, ...more };
}

const change = (over: Partial<DriverChangedEvent> = {}): DriverChangedEvent => ({
	id: "drv_1",
	serviceType: "cab",
	status: "available",
	lat: BLR.lat,
	lng: BLR.lng,
	rev: 1,
	mode: "test",
	orderId: null,
	offlineReason: null,
	...over,
});

describe("DriverIndex", () => {
	describe("publish", () => {
		it("applies each change to the index and announces it to the other instances", () => {
			const { index, announce } = setup();
			index.publish([driverRow({ id: "drv_1", rev: "7" })]);
			expect(index.size("test", "cab")).toBe(1);
			expect(index.nearest({ point: BLR, serviceType: "cab", mode: "test" }).map((n) => n.driverId)).toEqual(["drv_1"]);
			// The revision is a number on the wire even when PostgreSQL hands back a bigint string.
			expect(announce).toHaveBeenCalledWith({
				id: "drv_1",
				serviceType: "cab",
				status: "available",
				lat: BLR.lat,
				lng: BLR.lng,
				rev: 7,
				mode: "test",
				orderId: null,
				offlineReason: null,
			});
		});

		it("a driver that is no longer available leaves the index", () => {
			const { index } = setup();
			index.publish([driverRow({ rev: 1 })]);
			index.publish([driverRow({ rev: 2, status: "offered", order_id: "ord_1" })]);
			expect(index.size("test", "cab")).toBe(0);
		});

		it("wakes the searching rides a newly available driver brings within reach, and signals work when some became due", async () => {
			const { index, repo, onWork } = setup();
			index.setDemand(searching("ord_near", away(BLR, 1000)), true);
			index.setDemand(searching("ord_far", away(BLR, 20_000)), true);
			repo.matching.wakeSearches.mockResolvedValue(1);
			index.publish([driverRow()]);
			expect(repo.matching.wakeSearches).toHaveBeenCalledTimes(1);
			expect(repo.matching.wakeSearches).toHaveBeenCalledWith(["ord_near"]);
			await settle();
			expect(onWork).toHaveBeenCalledTimes(1);
		});

		it("does not signal work when no woken ride was due (all had an offer or were matched meanwhile)", async () => {
			const { index, repo, onWork } = setup();
			index.setDemand(searching("ord_near", away(BLR, 1000)), true);
			repo.matching.wakeSearches.mockResolvedValue(0);
			index.publish([driverRow()]);
			await settle();
			expect(repo.matching.wakeSearches).toHaveBeenCalled();
			expect(onWork).not.toHaveBeenCalled();
		});

		it("wakes nothing for rides of another mode or service type, or out of reach", () => {
			const { index, repo } = setup();
			index.setDemand(searching("ord_live", BLR, "prt_1", { mode: "live" }), true);
			index.setDemand(searching("ord_scooty", BLR, "prt_1", { serviceType: "scooty" }), true);
			index.setDemand(searching("ord_far", away(BLR, 6000)), true);
			index.publish([driverRow()]);
			expect(repo.matching.wakeSearches).not.toHaveBeenCalled();
		});

		it("a ride already within the driver's reach before it moved is not woken again", () => {
			const { index, repo } = setup();
			index.setDemand(searching("ord_near", away(BLR, 1000)), true);
			index.publish([driverRow({ rev: 1 })]);
			repo.matching.wakeSearches.mockClear();
			const moved = away(BLR, 200);
			index.publish([driverRow({ rev: 2, lat: moved.lat, lng: moved.lng })]);
			expect(repo.matching.wakeSearches).not.toHaveBeenCalled();
		});

		it("a failed wake is logged as trouble (the rides' backoff still runs) and signals no work", async () => {
			const { index, repo, onWork, log } = setup();
			index.setDemand(searching("ord_near", away(BLR, 1000)), true);
			repo.matching.wakeSearches.mockRejectedValue(new Error("pool exhausted"));
			index.publish([driverRow()]);
			await settle();
			expect(log.trouble).toHaveBeenCalledWith(expect.stringContaining("pool exhausted"));
			expect(onWork).not.toHaveBeenCalled();
		});
	});

	describe("apply (revisions)", () => {
		it("ignores a change older than (or as old as) the newest one applied", () => {
			const { index } = setup();
			index.apply(change({ rev: 5 }));
			index.apply(change({ rev: 4, status: "offline" }));
			index.apply(change({ rev: 5, status: "offline" }));
			expect(index.size("test", "cab")).toBe(1);
			index.apply(change({ rev: 6, status: "offline" }));
			expect(index.size("test", "cab")).toBe(0);
		});

		it("a driver that changed mode is only in its new mode's index", () => {
			const { index } = setup();
			index.apply(change({ rev: 1, mode: "test" }));
			index.apply(change({ rev: 2, mode: "live" }));
			expect(index.size("test", "cab")).toBe(0);
			expect(index.size("live", "cab")).toBe(1);
		});

		it("an available driver without a position is not indexed", () => {
			const { index } = setup();
			index.apply(change({ lat: null, lng: null }));
			expect(index.size("test", "cab")).toBe(0);
		});
	});

	describe("forget", () => {
		it("removes the driver: no candidate, no supply any more", () => {
			const { index } = setup();
			index.publish([driverRow()]);
			expect(index.hasCandidate(rideRow())).toBe(true);
			index.forget("test", "cab", "drv_1");
			expect(index.size("test", "cab")).toBe(0);
			expect(index.hasCandidate(rideRow())).toBe(false);
			expect(index.supplyDemandAt(BLR, "test").cab.available).toBe(0);
		});
	});

	describe("candidates", () => {
		it("come from the index, nearest first, without the excluded drivers and without asking the database", async () => {
			const { index, repo } = setup();
			const at = (m: number) => away(BLR, m);
			index.publish([
				driverRow({ id: "drv_far", ...at(3000) }),
				driverRow({ id: "drv_near", ...at(500) }),
				driverRow({ id: "drv_excluded", ...at(100) }),
				driverRow({ id: "drv_out", ...at(8000) }),
			]);
			const found = await index.candidates(BLR, "cab", "test", new Set(["drv_excluded"]), TX);
			expect(found).toEqual([{ driverId: "drv_near" }, { driverId: "drv_far" }]);
			expect(repo.drivers.availableInBox).not.toHaveBeenCalled();
		});

		it("at most candidatesPerAttempt of them", async () => {
			const { index } = setup({ candidatesPerAttempt: 2 });
			index.publish([1, 2, 3].map((i) => driverRow({ id: `drv_${i}`, ...away(BLR, i * 100) })));
			expect(await index.candidates(BLR, "cab", "test", new Set(), TX)).toEqual([{ driverId: "drv_1" }, { driverId: "drv_2" }]);
		});

		it("come from the database's box when the index has nobody, keeping only those within the radius", async () => {
			const { index, repo, settings } = setup();
			// A box corner is farther than the radius: the database's box is only a rough cut.
			const corner = away(away(BLR, 4500, 0), 4500, 90);
			repo.drivers.availableInBox.mockResolvedValue([
				{ id: "drv_in", ...away(BLR, 2000) },
				{ id: "drv_corner", ...corner },
			]);
			const found = await index.candidates(BLR, "cab", "test", new Set(["drv_x"]), TX);
			expect(found).toEqual([{ driverId: "drv_in" }]);
			expect(repo.drivers.availableInBox).toHaveBeenCalledWith(BLR, "cab", "test", settings.searchRadiusM, ["drv_x"], settings.candidatesPerAttempt, TX);
		});

		it("an index holding only excluded drivers counts as having nobody", async () => {
			const { index, repo } = setup();
			index.publish([driverRow({ id: "drv_excluded" })]);
			await index.candidates(BLR, "cab", "test", new Set(["drv_excluded"]), TX);
			expect(repo.drivers.availableInBox).toHaveBeenCalledTimes(1);
		});
	});

	describe("supplyDemandAt", () => {
		it("counts supply within the supply radius and each partner's demand up to the cap, per service type", () => {
			const { index } = setup({ demandPerPartner: 3, supplyRadiusM: 3000 });
			index.publish([
				driverRow({ id: "drv_a", ...away(BLR, 500) }),
				driverRow({ id: "drv_b", ...away(BLR, 1500) }),
				// In the search radius (its ETA may count) but outside the supply radius.
				driverRow({ id: "drv_c", ...away(BLR, 4000) }),
			]);
			for (let i = 0; i < 5; i++) index.setDemand(searching(`ord_a${i}`, away(BLR, 100 * i), "prt_a"), true);
			for (let i = 0; i < 2; i++) index.setDemand(searching(`ord_b${i}`, away(BLR, 100 * i), "prt_b"), true);
			index.setDemand(searching("ord_far", away(BLR, 10_000), "prt_c"), true);

			const reply = index.supplyDemandAt(BLR, "test");
			expect(reply.cab.available).toBe(2);
			expect(reply.cab.demand).toBe(3 + 2);
			expect(reply.cab.eta).toBeGreaterThan(0);
			expect(reply.scooty).toEqual({ eta: null, available: 0, demand: 0 });
		});

		it("keeps the modes apart: live supply and demand are not a test quote's", () => {
			const { index } = setup();
			index.publish([driverRow({ mode: "live" })]);
			index.setDemand(searching("ord_live", BLR, "prt_1", { mode: "live" }), true);
			expect(index.supplyDemandAt(BLR, "test").cab).toEqual({ eta: null, available: 0, demand: 0 });
			expect(index.supplyDemandAt(BLR, "live").cab).toMatchObject({ available: 1, demand: 1 });
		});

		it("a ride no longer searching is no demand", () => {
			const { index } = setup();
			const ride = searching("ord_1");
			index.setDemand(ride, true);
			index.setDemand(ride, false);
			expect(index.supplyDemandAt(BLR, "test").cab.demand).toBe(0);
		});
	});

	describe("rebuild, refresh and refreshDemand", () => {
		it("rebuild replaces the index with the table's drivers; refresh re-reads those changed since that read", async () => {
			const { index, repo } = setup();
			index.publish([driverRow({ id: "drv_stale" })]);
			const readAt = new Date("2026-01-01T09:00:00.000Z");
			repo.now.mockResolvedValueOnce(readAt);
			repo.drivers.indexDrivers.mockResolvedValue([driverRow({ id: "drv_1" })]);
			await index.rebuild();
			expect(index.nearest({ point: BLR, serviceType: "cab", mode: "test" }).map((n) => n.driverId)).toEqual(["drv_1"]);

			repo.drivers.driversChangedSince.mockResolvedValue([driverRow({ id: "drv_1", rev: 2, status: "offline" })]);
			await index.refresh();
			expect(repo.drivers.driversChangedSince).toHaveBeenCalledWith(readAt);
			expect(index.size("test", "cab")).toBe(0);
		});

		it("refreshDemand keeps the searching rides read and drops those no longer searching", async () => {
			const { index, repo } = setup();
			index.setDemand(searching("ord_gone"), true);
			repo.mirror.demandRides.mockResolvedValue([
				{ order_id: "ord_1", service_type: "cab", pickup_lat: BLR.lat, pickup_lng: BLR.lng, partner_id: "prt_1", mode: "test" },
			]);
			await index.refreshDemand();
			expect(index.supplyDemandAt(BLR, "test").cab.demand).toBe(1);
			repo.mirror.demandRides.mockResolvedValue([]);
			await index.refreshDemand();
			expect(index.supplyDemandAt(BLR, "test").cab.demand).toBe(0);
		});
	});
});
