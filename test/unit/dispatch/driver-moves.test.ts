import { BLR, away, driverRow, internalOrder, rideRow, driverParts } from "../../helpers/dispatch-fakes";

const setup = driverParts;

describe("DriverMoves", () => {
	describe("decline", () => {
		it("ends the offer as declined", async () => {
			const { moves, matcher, repo } = setup();
			matcher.endOffer.mockResolvedValue(true);
			repo.drivers.driver.mockResolvedValue(driverRow());
			await expect(moves.decline("drv_1", "ord_1")).resolves.toMatchObject({ driverId: "drv_1", status: "available" });
			expect(matcher.endOffer).toHaveBeenCalledWith("drv_1", "ord_1", "declined");
		});

		it("409 without an open offer; 404 for an unknown driver", async () => {
			const { moves, repo } = setup();
			repo.drivers.driver.mockResolvedValueOnce(driverRow());
			await expect(moves.decline("drv_1", "ord_1")).rejects.toMatchObject({ code: 409, type: "CONFLICT" });
			await expect(moves.decline("drv_x", "ord_1")).rejects.toMatchObject({ code: 404, type: "DRIVER_NOT_FOUND" });
		});
	});

	describe("goOnline, setLocation and goOffline", () => {
		it("goOnline publishes the driver and kicks matching; an unknown driver is 404", async () => {
			const { moves, repo, index, matcher } = setup();
			const row = driverRow();
			repo.drivers.setDriverLocation.mockResolvedValueOnce(row);
			await expect(moves.goOnline("drv_1", { lat: BLR.lat, lng: BLR.lng })).resolves.toMatchObject({ driverId: "drv_1", status: "available" });
			expect(repo.drivers.setDriverLocation).toHaveBeenCalledWith("drv_1", { lat: BLR.lat, lng: BLR.lng }, true);
			expect(index.publish).toHaveBeenCalledWith([row]);
			expect(matcher.kick).toHaveBeenCalledTimes(1);
			await expect(moves.goOnline("drv_x", BLR)).rejects.toMatchObject({ code: 404, type: "DRIVER_NOT_FOUND" });
		});

		it("setLocation without a heading faces the way the driver moved, and writes nothing until the flush", async () => {
			const { moves, repo, presence } = setup();
			repo.drivers.driver.mockResolvedValue(driverRow());
			const east = away(BLR, 500, 90);
			await expect(moves.setLocation("drv_1", east)).resolves.toMatchObject({ lat: east.lat, lng: east.lng, heading: 90 });
			expect(repo.drivers.setDriverLocation).not.toHaveBeenCalled();
			expect(presence.pendingCount).toBe(1);
		});

		it("arrived only near the pickup (409 NOT_AT_PICKUP), by the newest known position", async () => {
			const s = setup();
			const driver = driverRow({ status: "on_trip", order_id: "ord_1", ...away(BLR, 2_000) });
			s.repo.drivers.driver.mockResolvedValue(driver);
			s.repo.mirror.ride.mockResolvedValue(rideRow({ state: "assigned", order_status: "accepted", driver_id: driver.id }));
			await expect(s.steps.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "accepted", "arrived")).rejects.toMatchObject({
				code: 409,
				type: "NOT_AT_PICKUP",
			});
			expect(s.orders.transition).not.toHaveBeenCalled();
			// With its position at the pickup sent along, the step goes on.
			s.orders.transition.mockResolvedValue(internalOrder({ status: "arrived", version: 3 }));
			await s.steps.moveRide({ driverId: "drv_1", orderId: "ord_1", location: away(BLR, 50) }, "accepted", "arrived");
			expect(s.orders.transition).toHaveBeenCalledTimes(1);
		});

		it("goOffline with a pending offer declines the offer first, then goes offline", async () => {
			const { moves, repo, matcher, index } = setup();
			const offline = driverRow({ status: "offline", rev: 4 });
			repo.drivers.driver.mockResolvedValueOnce(driverRow({ status: "offered", order_id: "ord_1" })).mockResolvedValueOnce(driverRow());
			matcher.endOffer.mockResolvedValue(true);
			repo.drivers.setDriverOffline.mockResolvedValue(offline);
			await expect(moves.goOffline("drv_1")).resolves.toMatchObject({ status: "offline" });
			expect(matcher.endOffer).toHaveBeenCalledWith("drv_1", "ord_1", "declined");
			expect(matcher.endOffer.mock.invocationCallOrder[0]).toBeLessThan(repo.drivers.setDriverOffline.mock.invocationCallOrder[0]);
			expect(repo.drivers.setDriverOffline).toHaveBeenCalledTimes(1);
			expect(index.publish).toHaveBeenCalledWith([offline]);
		});

		it("goOffline while on a trip: 409 DRIVER_NOT_AVAILABLE, the driver stays", async () => {
			const { moves, repo } = setup();
			repo.drivers.driver.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			await expect(moves.goOffline("drv_1")).rejects.toMatchObject({ code: 409, type: "DRIVER_NOT_AVAILABLE" });
			expect(repo.drivers.setDriverOffline).not.toHaveBeenCalled();
		});

		it("goOffline gives up with 409 when the driver's state keeps changing", async () => {
			const { moves, repo } = setup();
			repo.drivers.driver.mockResolvedValue(driverRow());
			await expect(moves.goOffline("drv_1")).rejects.toMatchObject({ code: 409, type: "CONFLICT" });
			expect(repo.drivers.setDriverOffline).toHaveBeenCalledTimes(5);
		});
	});

	describe("register and driverJob", () => {
		it("register is idempotent by phone, and a simulated driver is a test driver", async () => {
			const { moves, repo } = setup();
			const existing = driverRow({ id: "drv_old" });
			repo.drivers.driverByPhone.mockResolvedValue(existing);
			const params = { name: "Ravi K", phone: existing.phone, vehicleNumber: "KA01AB1234", serviceType: "cab" as const, simulated: true };
			await expect(moves.register(params)).resolves.toMatchObject({ driverId: "drv_old" });
			expect(repo.drivers.insertDriver).toHaveBeenCalledWith(expect.stringMatching(/^drv_/), { ...params, mode: "test" }, undefined);
		});

		it("driverJob shows a pending offer, or the ride the driver is on", async () => {
			const { moves, repo } = setup();
			const expiresAt = new Date("2026-01-01T10:00:15.000Z");
			repo.drivers.driver.mockResolvedValueOnce(driverRow({ status: "offered", order_id: "ord_1" }));
			repo.matching.openOfferOf.mockResolvedValue({ ...rideRow(), expires_at: expiresAt, distance_m: 600, eta: 95 });
			const offered = await moves.driverJob("drv_1");
			expect(offered.offer).toMatchObject({ orderId: "ord_1", expiresAt: expiresAt.toISOString(), distanceM: 600, eta: 95, pickup: BLR });
			expect(offered.ride).toBeNull();

			repo.drivers.driver.mockResolvedValueOnce(driverRow({ id: "drv_2", status: "on_trip", order_id: "ord_1" }));
			repo.mirror.ride.mockResolvedValue(rideRow({ state: "assigned", order_status: "arrived" }));
			const riding = await moves.driverJob("drv_2");
			expect(riding).toMatchObject({ offer: null, ride: { orderId: "ord_1", status: "arrived" } });
		});

		it("driverJob of an idle driver this instance knows reads nothing", async () => {
			const { moves, repo } = setup();
			repo.drivers.driver.mockResolvedValueOnce(driverRow());
			await moves.driverJob("drv_1");
			await expect(moves.driverJob("drv_1")).resolves.toMatchObject({ offer: null, ride: null, driver: { status: "available" } });
			expect(repo.drivers.driver).toHaveBeenCalledTimes(1);
			expect(repo.matching.openOfferOf).not.toHaveBeenCalled();
		});
	});
});
