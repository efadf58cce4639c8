import { DriverPresence } from "../../../services/dispatch/driver-presence";
import { BLR, away, dispatchSettings, driverRow, fakeDriversRepo, fakeLog } from "../../helpers/dispatch-fakes";
import type { DriverRow, DriversRepo } from "../../../services/dispatch/drivers.repo";

function setup(settings = dispatchSettings({ maxSpeedKmh: 250, jumpToleranceM: 200, silentAfterMs: 60_000 })) {
	const repo = fakeDriversRepo();
	const index = { publish: jest.fn(), moved: jest.fn((): string[] => []), wake: jest.fn() };
	const announcePositions = jest.fn(async () => undefined);
	const log = fakeLog();
	const presence = new DriverPresence({ settings, repo: repo as unknown as DriversRepo, index, announcePositions, log });
	return { repo, index, announcePositions, log, presence };
}

const T0 = new Date("2026-01-01T10:00:00.000Z");

describe("DriverPresence", () => {
	beforeEach(() => {
		jest.useFakeTimers();
		jest.setSystemTime(T0);
	});
	afterEach(() => jest.useRealTimers());

	describe("report", () => {
		it("records the position in memory and the index, and writes it only at the flush, once for many reports", async () => {
			const { presence, repo, index, announcePositions } = setup();
			repo.driver.mockResolvedValue(driverRow({ location_at: T0 }));
			jest.setSystemTime(T0.getTime() + 4_000);
			await presence.report("drv_1", away(BLR, 30));
			jest.setSystemTime(T0.getTime() + 8_000);
			const last = away(BLR, 60);
			await presence.report("drv_1", last);
			expect(repo.driver).toHaveBeenCalledTimes(1);
			expect(index.moved).toHaveBeenCalledTimes(2);
			expect(repo.recordPositions).not.toHaveBeenCalled();

			await presence.flush();
			expect(repo.recordPositions).toHaveBeenCalledWith([{ driverId: "drv_1", lat: last.lat, lng: last.lng, heading: 90, at: T0.getTime() + 8_000 }]);
			expect(announcePositions).toHaveBeenCalledWith({ positions: [["drv_1", last.lat, last.lng, 90, T0.getTime() + 8_000]] });
			await presence.flush();
			expect(repo.recordPositions).toHaveBeenCalledTimes(1);
		});

		it("a position that brings the driver near searching rides is written at once, then wakes them", async () => {
			const { presence, repo, index } = setup();
			repo.driver.mockResolvedValue(driverRow());
			index.moved.mockReturnValueOnce(["ord_near"]);
			await presence.report("drv_1", BLR);
			expect(repo.recordPositions).toHaveBeenCalledWith([expect.objectContaining({ driverId: "drv_1", lat: BLR.lat })]);
			expect(repo.recordPositions.mock.invocationCallOrder[0]).toBeLessThan(index.wake.mock.invocationCallOrder[0]);
			expect(index.wake).toHaveBeenCalledWith(["ord_near"]);
			expect(presence.pendingCount).toBe(0);
		});

		it("refuses a position implying an impossible speed with 422 LOCATION_IMPLAUSIBLE, recording nothing", async () => {
			const { presence, repo, index } = setup();
			repo.driver.mockResolvedValue(driverRow({ location_at: T0 }));
			jest.setSystemTime(T0.getTime() + 4_000);
			// 250 km/h for 4 s is ~278 m, plus 200 m of tolerance: 2 km is too far.
			await expect(presence.report("drv_1", away(BLR, 2_000))).rejects.toMatchObject({ code: 422, type: "LOCATION_IMPLAUSIBLE" });
			expect(index.moved).not.toHaveBeenCalled();
			expect(presence.pendingCount).toBe(0);
			await expect(presence.report("drv_1", away(BLR, 400))).resolves.toMatchObject({ status: "available" });
		});

		it("a simulated driver (the sandbox's own) is not speed-checked", async () => {
			const { presence, repo } = setup();
			repo.driver.mockResolvedValue(driverRow({ simulated: true, location_at: T0 }));
			jest.setSystemTime(T0.getTime() + 1_000);
			await expect(presence.report("drv_1", away(BLR, 50_000))).resolves.toMatchObject({ simulated: true });
		});

		it("a driver offline for silence is back with its next position (a state change, at once)", async () => {
			const { presence, repo, index } = setup();
			repo.driver.mockResolvedValue(driverRow({ status: "offline", offline_reason: "silent", location_at: T0 }));
			const back = driverRow({ status: "available", rev: 9 });
			repo.backFromSilence.mockResolvedValue(back);
			await expect(presence.report("drv_1", BLR)).resolves.toBe(back);
			expect(index.publish).toHaveBeenCalledWith([back]);
		});

		it("a driver that went offline itself stays offline when it reports", async () => {
			const { presence, repo } = setup();
			repo.driver.mockResolvedValue(driverRow({ status: "offline", offline_reason: "driver" }));
			await expect(presence.report("drv_1", BLR)).resolves.toMatchObject({ status: "offline" });
			expect(repo.backFromSilence).not.toHaveBeenCalled();
		});

		it("an unknown driver is 404", async () => {
			const { presence } = setup();
			await expect(presence.report("drv_x", BLR)).rejects.toMatchObject({ code: 404, type: "DRIVER_NOT_FOUND" });
		});
	});

	describe("following other instances", () => {
		it("state changes update a known driver in revision order; unknown drivers are not cached from them", async () => {
			const { presence, repo } = setup();
			repo.driver.mockImplementation(async (id: string) => (id === "drv_1" ? driverRow({ rev: 3 }) : undefined));
			await presence.driver("drv_1");
			const base = { id: "drv_1", serviceType: "cab" as const, lat: BLR.lat, lng: BLR.lng, mode: "test" as const, offlineReason: null };
			presence.applyChange({ ...base, status: "offered", orderId: "ord_1", rev: 5 });
			presence.applyChange({ ...base, status: "available", orderId: null, rev: 4 });
			await expect(presence.driver("drv_1")).resolves.toMatchObject({ status: "offered", order_id: "ord_1" });
			presence.applyChange({ ...base, id: "drv_2", status: "available", orderId: null, rev: 1 });
			await expect(presence.driver("drv_2")).rejects.toMatchObject({ code: 404 });
		});

		it("positions from another instance move known drivers, never backwards in time", async () => {
			const { presence, repo, index } = setup();
			repo.driver.mockResolvedValue(driverRow({ location_at: T0 }));
			await presence.driver("drv_1");
			const p = away(BLR, 100);
			presence.applyPositions({ positions: [["drv_1", p.lat, p.lng, 45, T0.getTime() + 1_000]] });
			presence.applyPositions({ positions: [["drv_1", BLR.lat, BLR.lng, 0, T0.getTime() + 500]] });
			await expect(presence.driver("drv_1")).resolves.toMatchObject({ lat: p.lat, lng: p.lng, heading: 45 });
			expect((index.moved.mock.calls as DriverRow[][][]).flat(2).map((r) => r.lat)).toEqual([p.lat]);
		});
	});

	describe("flush and the silence sweep", () => {
		it("a failed flush keeps its positions for the next one unless newer ones came", async () => {
			const { presence, repo, log } = setup();
			repo.driver.mockResolvedValue(driverRow());
			await presence.report("drv_1", BLR);
			repo.recordPositions.mockRejectedValueOnce(new Error("database gone"));
			await presence.flush();
			expect(log.trouble).toHaveBeenCalledWith(expect.stringMatching(/retried at the next flush/));
			expect(presence.pendingCount).toBe(1);
			await presence.flush();
			expect(repo.recordPositions).toHaveBeenCalledTimes(2);
			expect(presence.pendingCount).toBe(0);
		});

		it("takes silent drivers offline page by page and publishes them", async () => {
			const { presence, repo, index } = setup();
			const page = Array.from({ length: 1_000 }, (_, i) => driverRow({ id: `drv_${i}`, status: "offline", offline_reason: "silent" }));
			repo.offlineSilent.mockResolvedValueOnce(page).mockResolvedValueOnce([driverRow({ id: "drv_last", status: "offline" })]);
			await expect(presence.sweepSilent()).resolves.toBe(1_001);
			expect(repo.offlineSilent).toHaveBeenCalledWith(60_000, 1_000);
			expect(index.publish).toHaveBeenCalledTimes(2);
		});
	});
});
