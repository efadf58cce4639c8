import type { DispatchSettings } from "../../../services/dispatch/dispatch.settings";
import { RideMirror } from "../../../services/dispatch/ride-mirror";
import { RideSweep } from "../../../services/dispatch/ride-sweep";
import { TX, asDispatchRepo, deferred, dispatchSettings, driverRow, fakeLog, fakeOrders, fakeRepo, internalOrder, rideRow } from "../../helpers/dispatch-fakes";

function setup(overrides: Partial<DispatchSettings> = {}) {
	const settings = dispatchSettings(overrides);
	const repo = fakeRepo();
	const orders = fakeOrders();
	const index = { publish: jest.fn(), setDemand: jest.fn() };
	const onWork = jest.fn();
	const fleetRuns = jest.fn(() => true);
	const stopping = jest.fn(() => false);
	const log = fakeLog();
	const mirror = new RideMirror({ settings, repo: asDispatchRepo(repo), orders, index, onWork, log });
	// The sweep over the real mirror: its reconciles run the mirror's code against the same fakes.
	const sweep = new RideSweep({ settings, repo: asDispatchRepo(repo), orders, mirror, index, fleetRuns, stopping, log });
	return { settings, repo, orders, index, onWork, fleetRuns, stopping, log, mirror, sweep };
}

describe("RideSweep", () => {
	describe("sweep", () => {
		it("reconciles only rides whose mirror disagrees, pages through orders, and closes open mirrors orders no longer lists", async () => {
			const { sweep, repo, orders, settings } = setup({ sweepPage: 2 });
			repo.mirror.openRideIds.mockResolvedValue([{ order_id: "ord_agrees" }, { order_id: "ord_driver" }, { order_id: "ord_ended" }]);
			orders.listActiveStates
				.mockResolvedValueOnce({
					rides: [
						{ orderId: "ord_agrees", status: "accepted", driverId: "drv_1" },
						{ orderId: "ord_driver", status: "accepted", driverId: "drv_2" },
					],
					nextCursor: "ord_driver",
				})
				.mockResolvedValueOnce({ rides: [{ orderId: "ord_unmirrored", status: "searching", driverId: null }], nextCursor: null });
			repo.mirror.mirrorStates.mockImplementation(async (ids) =>
				[
					{ order_id: "ord_agrees", order_status: "accepted", driver_id: "drv_1" },
					{ order_id: "ord_driver", order_status: "accepted", driver_id: "drv_9" },
				].filter((m) => ids.includes(m.order_id)),
			);
			await sweep.run();
			expect(orders.listActiveStates.mock.calls).toEqual([[{ limit: 2 }], [{ limit: settings.sweepPage, after: "ord_driver" }]]);
			expect(orders.get.mock.calls.map((c) => c[0])).toEqual(["ord_driver", "ord_unmirrored", "ord_ended"]);
		});

		it("settles transitions whose lease ran out, giving their call up", async () => {
			const { sweep, repo, orders } = setup();
			repo.mirror.staleTransitions.mockResolvedValue([{ order_id: "ord_1" }]);
			orders.get.mockResolvedValue(internalOrder({ version: 1 }));
			repo.mirror.lockRide.mockResolvedValue(rideRow({ state: "accepting", driver_id: "drv_1", order_version: 1, lease_active: true }));
			await sweep.run();
			expect(repo.mirror.searchAgain).toHaveBeenCalledWith(expect.anything(), "drv_1", false, TX);
		});

		it("one ride failing to reconcile does not stop the others", async () => {
			const { sweep, repo, orders, log } = setup();
			repo.mirror.openRideIds.mockResolvedValue([{ order_id: "ord_a" }, { order_id: "ord_b" }]);
			orders.get.mockRejectedValueOnce(new Error("boom")).mockResolvedValueOnce(null);
			await sweep.run();
			expect(orders.get).toHaveBeenCalledTimes(2);
			expect(log.trouble).toHaveBeenCalledWith(expect.stringContaining("ord_a"));
			expect(repo.mirror.closeRide).toHaveBeenCalledWith("ord_b", TX);
		});

		it("frees orphan drivers, publishes them and logs trouble", async () => {
			const { sweep, repo, index, log } = setup();
			const orphans = [driverRow({ id: "drv_a" }), driverRow({ id: "drv_b" })];
			repo.drivers.freeOrphanDrivers.mockResolvedValue(orphans);
			await sweep.run();
			expect(index.publish).toHaveBeenCalledWith(orphans);
			expect(log.trouble).toHaveBeenCalledWith(expect.stringContaining("Freed 2 driver(s)"));
		});

		it("stops between rides once the service is stopping", async () => {
			const { sweep, repo, orders, stopping } = setup();
			repo.mirror.openRideIds.mockResolvedValue([{ order_id: "ord_a" }, { order_id: "ord_b" }]);
			stopping.mockReturnValue(true);
			await sweep.run();
			expect(orders.get).not.toHaveBeenCalled();
			expect(repo.drivers.freeOrphanDrivers).not.toHaveBeenCalled();
		});

		it("runs one pass at a time: a sweep asked for meanwhile joins the running one", async () => {
			const { sweep, repo } = setup();
			const open = deferred<Array<{ order_id: string }>>();
			repo.mirror.openRideIds.mockReturnValueOnce(open.promise);
			const first = sweep.run();
			const second = sweep.run();
			expect(sweep.current).not.toBeNull();
			open.resolve([]);
			await Promise.all([first, second]);
			expect(repo.mirror.openRideIds).toHaveBeenCalledTimes(1);
			expect(sweep.current).toBeNull();
		});

		it("a failing pass is logged, not thrown", async () => {
			const { sweep, orders, log } = setup();
			orders.listActiveStates.mockRejectedValue(new Error("orders down"));
			await expect(sweep.run()).resolves.toBeUndefined();
			expect(log.trouble).toHaveBeenCalledWith(expect.stringContaining("orders down"));
		});
	});

	describe("the missing fleet warning", () => {
		afterEach(() => jest.useRealTimers());

		it("in simulated mode, warns once a minute when no fleet service runs (not in the first 30 s)", async () => {
			jest.useFakeTimers({ doNotFake: ["nextTick", "setImmediate", "queueMicrotask"] });
			const { sweep, fleetRuns, log } = setup({ fleetMode: "simulated" });
			fleetRuns.mockReturnValue(false);
			const fleetWarnings = () => log.trouble.mock.calls.filter(([m]) => m.includes("FLEET_MODE=simulated")).length;
			await sweep.run();
			expect(fleetWarnings()).toBe(0);
			jest.setSystemTime(Date.now() + 31_000);
			await sweep.run();
			expect(fleetWarnings()).toBe(1);
			await sweep.run();
			expect(fleetWarnings()).toBe(1);
			jest.setSystemTime(Date.now() + 61_000);
			await sweep.run();
			expect(fleetWarnings()).toBe(2);
		});
	});
});
