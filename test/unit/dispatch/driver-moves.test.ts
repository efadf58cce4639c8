import type { Context } from "moleculer";
import { ApiError } from "../../../lib/errors";
import { DriverMoves } from "../../../services/dispatch/driver-moves";
import { DriverPresence } from "../../../services/dispatch/driver-presence";
import {
	BLR,
	TX,
	asDispatchRepo,
	away,
	dispatchSettings,
	driverRow,
	fakeLog,
	fakeMetrics,
	fakeOrders,
	fakeRepo,
	internalOrder,
	orderDriver,
	rideRow,
} from "../../helpers/dispatch-fakes";

function setup() {
	const settings = dispatchSettings();
	const repo = fakeRepo();
	const index = { publish: jest.fn(), moved: jest.fn((): string[] => []), wake: jest.fn() };
	const mirror = { applyOrder: jest.fn(async () => undefined), afterRefusal: jest.fn(async () => undefined), reconcile: jest.fn(async () => undefined) };
	const matcher = { endOffer: jest.fn(async () => false), kick: jest.fn() };
	const orders = fakeOrders();
	const metrics = fakeMetrics();
	const log = fakeLog();
	const announcePositions = jest.fn(async () => undefined);
	const presence = new DriverPresence({ settings, repo: asDispatchRepo(repo).drivers, index, announcePositions, log });
	const moves = new DriverMoves({ settings, repo: asDispatchRepo(repo), index, presence, mirror, matcher, orders, metrics, log });
	return { settings, repo, index, mirror, matcher, orders, metrics, log, moves, presence };
}

/** A request's context as moleculer hands it over: the moves only pass it on to orders. */
const ctx = { id: "ctx_1" } as unknown as Context;

/** The driver on ord_1 (on_trip), the ride assigned to it in `status`. */
function onRide(s: ReturnType<typeof setup>, status: "accepted" | "arrived" | "started") {
	const driver = driverRow({ status: "on_trip", order_id: "ord_1", ...away(BLR, 300) });
	s.repo.drivers.driver.mockResolvedValue(driver);
	s.repo.mirror.ride.mockResolvedValue(rideRow({ state: "assigned", order_status: status, driver_id: driver.id }));
	return driver;
}

describe("DriverMoves", () => {
	describe("accept", () => {
		it("takes the open offer, marks the ride accepting, moves the order to accepted with the driver, and applies the answer", async () => {
			const s = setup();
			const { moves, repo, orders, mirror, metrics, index, settings } = s;
			const ride = rideRow();
			const driver = driverRow({ status: "on_trip", order_id: "ord_1", ...away(BLR, 900) });
			const accepted = internalOrder({ status: "accepted", version: 2, driver: orderDriver(driver) });
			repo.mirror.lockRide.mockResolvedValue(ride);
			repo.matching.acceptOffer.mockResolvedValue(true);
			repo.drivers.startTrip.mockResolvedValue(driver);
			repo.drivers.driver.mockResolvedValue(driver);
			orders.transition.mockResolvedValue(accepted);

			const job = await moves.accept("drv_1", "ord_1", ctx);

			expect(repo.matching.acceptOffer).toHaveBeenCalledWith("ord_1", "drv_1", TX);
			expect(repo.mirror.startTransition).toHaveBeenCalledWith("ord_1", "accepting", settings.transitionLeaseMs, TX, driver);
			expect(index.publish).toHaveBeenCalledWith([driver]);
			expect(metrics.offerEnded).toHaveBeenCalledWith("accepted", "cab");
			expect(orders.transition).toHaveBeenCalledWith(
				{
					orderId: "ord_1",
					from: "searching",
					to: "accepted",
					driver: { id: "drv_1", name: driver.name, phone: driver.phone, vehicleNumber: driver.vehicle_number },
					location: { lat: driver.lat, lng: driver.lng, heading: 0 },
					eta: expect.any(Number),
				},
				ctx,
			);
			expect(metrics.matched).toHaveBeenCalledWith("cab", accepted.createdAt);
			expect(mirror.applyOrder).toHaveBeenCalledWith(accepted, { abandonInFlight: true });
			expect(job).toMatchObject({
				offer: null,
				driver: { driverId: "drv_1", status: "on_trip" },
				ride: { orderId: "ord_1", status: "accepted", pickup: BLR },
			});
		});

		it("without an open offer: 409 CONFLICT, nothing sent to orders", async () => {
			const { moves, repo, orders } = setup();
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.acceptOffer.mockResolvedValue(false);
			repo.drivers.driver.mockResolvedValue(driverRow());
			await expect(moves.accept("drv_1", "ord_1")).rejects.toMatchObject({
				code: 409,
				type: "CONFLICT",
				message: expect.stringMatching(/^No open offer/),
			});
			expect(repo.drivers.startTrip).not.toHaveBeenCalled();
			expect(orders.transition).not.toHaveBeenCalled();
		});

		it("an offer taken while the driver is not free for it: the transaction is rolled back whole, 409", async () => {
			const { moves, repo, orders } = setup();
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.acceptOffer.mockResolvedValue(true);
			repo.drivers.startTrip.mockResolvedValue(undefined);
			repo.drivers.driver.mockResolvedValue(driverRow({ status: "offered", order_id: "ord_1" }));
			await expect(moves.accept("drv_1", "ord_1")).rejects.toMatchObject({ code: 409, type: "CONFLICT" });
			// The transaction's work threw, so a real transaction rolls the accepted offer back.
			await expect(repo.tx.mock.results[0].value).rejects.toBeDefined();
			expect(repo.mirror.startTransition).not.toHaveBeenCalled();
			expect(orders.transition).not.toHaveBeenCalled();
		});

		it("a second accept of an offer already taken says so", async () => {
			const { moves, repo } = setup();
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.drivers.driver.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			await expect(moves.accept("drv_1", "ord_1")).rejects.toMatchObject({ code: 409, message: "Offer already accepted" });
		});

		it("refused for good by orders (cancelled meanwhile): takes the order's truth and answers 409 no longer available", async () => {
			const { moves, repo, orders, mirror, metrics } = setup();
			const refusal = new ApiError("CONFLICT", "The ride was cancelled");
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.acceptOffer.mockResolvedValue(true);
			repo.drivers.startTrip.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			orders.transition.mockRejectedValue(refusal);
			await expect(moves.accept("drv_1", "ord_1")).rejects.toMatchObject({
				code: 409,
				type: "CONFLICT",
				message: expect.stringContaining("no longer available"),
			});
			expect(mirror.afterRefusal).toHaveBeenCalledWith("ord_1", refusal);
			expect(mirror.applyOrder).not.toHaveBeenCalled();
			expect(metrics.matched).not.toHaveBeenCalled();
		});

		it("orders not answering: the error goes back as it is and the lease settles it later", async () => {
			const { moves, repo, orders, mirror } = setup();
			const timeout = new Error("Request timed out");
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.acceptOffer.mockResolvedValue(true);
			repo.drivers.startTrip.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			orders.transition.mockRejectedValue(timeout);
			await expect(moves.accept("drv_1", "ord_1")).rejects.toBe(timeout);
			expect(mirror.afterRefusal).not.toHaveBeenCalled();
		});
	});

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

	describe("moveRide", () => {
		it("moves the order one step with the driver's position and applies the answer", async () => {
			const s = setup();
			const driver = onRide(s, "arrived");
			const started = internalOrder({ status: "started", version: 4 });
			s.orders.transition.mockResolvedValue(started);
			const job = await s.moves.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "arrived", "started", "4821", ctx);
			expect(s.orders.transition).toHaveBeenCalledWith(
				{
					orderId: "ord_1",
					from: "arrived",
					to: "started",
					otp: "4821",
					location: { lat: driver.lat, lng: driver.lng, heading: 0 },
					eta: expect.any(Number),
				},
				ctx,
			);
			// Once started, the ETA is from the pickup to the drop: never 0 for a ride of some length.
			expect(s.orders.transition.mock.calls[0][0].eta).toBeGreaterThan(0);
			expect(s.mirror.applyOrder).toHaveBeenCalledWith(started);
			expect(job.ride).toMatchObject({ orderId: "ord_1", status: "started" });
		});

		it("a wrong OTP is counted on the driver and in the metrics, and the refusal goes back unchanged", async () => {
			const s = setup();
			onRide(s, "arrived");
			const wrong = new ApiError("INVALID_OTP", "Wrong OTP");
			s.orders.transition.mockRejectedValue(wrong);
			await expect(s.moves.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "arrived", "started", "0000")).rejects.toBe(wrong);
			expect(s.repo.drivers.countWrongOtp).toHaveBeenCalledWith("drv_1");
			expect(s.metrics.wrongOtp).toHaveBeenCalledWith("cab");
			// A wrong OTP changes nothing about the ride: no reconcile.
			expect(s.mirror.afterRefusal).not.toHaveBeenCalled();
			expect(s.mirror.applyOrder).not.toHaveBeenCalled();
		});

		it("any other definitive refusal takes the order's truth and goes back unchanged", async () => {
			const s = setup();
			onRide(s, "started");
			const refusal = new ApiError("RIDE_NOT_ACTIVE", "The ride was cancelled");
			s.orders.transition.mockRejectedValue(refusal);
			await expect(s.moves.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "started", "dropped")).rejects.toBe(refusal);
			expect(s.mirror.afterRefusal).toHaveBeenCalledWith("ord_1", refusal);
			expect(s.repo.drivers.countWrongOtp).not.toHaveBeenCalled();
		});

		it("a driver not on the ride: 409 CONFLICT, orders not asked", async () => {
			const { moves, repo, orders } = setup();
			repo.drivers.driver.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_other" }));
			await expect(moves.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "accepted", "arrived")).rejects.toMatchObject({
				code: 409,
				message: "The driver is not on this ride",
			});
			expect(orders.transition).not.toHaveBeenCalled();
		});

		it("an accept still being recorded is settled first, then the step goes on", async () => {
			const s = setup();
			const driver = driverRow({ status: "on_trip", order_id: "ord_1" });
			s.repo.drivers.driver.mockResolvedValue(driver);
			s.repo.mirror.ride
				.mockResolvedValueOnce(rideRow({ state: "accepting", driver_id: "drv_1", lease_until: new Date(Date.now() + 60_000) }))
				.mockResolvedValueOnce(rideRow({ state: "assigned", order_status: "accepted", driver_id: "drv_1" }));
			s.orders.transition.mockResolvedValue(internalOrder({ status: "arrived", version: 3 }));
			await s.moves.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "accepted", "arrived");
			// The lease still runs: the accept call may yet answer, so it is not given up.
			expect(s.mirror.reconcile).toHaveBeenCalledWith("ord_1", { abandonInFlight: false });
			expect(s.orders.transition).toHaveBeenCalledWith(expect.objectContaining({ from: "accepted", to: "arrived", eta: 0 }), undefined);
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
			await expect(s.moves.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "accepted", "arrived")).rejects.toMatchObject({
				code: 409,
				type: "NOT_AT_PICKUP",
			});
			expect(s.orders.transition).not.toHaveBeenCalled();
			// With its position at the pickup sent along, the step goes on.
			s.orders.transition.mockResolvedValue(internalOrder({ status: "arrived", version: 3 }));
			await s.moves.moveRide({ driverId: "drv_1", orderId: "ord_1", location: away(BLR, 50) }, "accepted", "arrived");
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

	describe("dropOut", () => {
		it("after the ride started: 409 INVALID_TRANSITION, orders not asked", async () => {
			const s = setup();
			onRide(s, "started");
			await expect(s.moves.dropOut({ driverId: "drv_1", orderId: "ord_1" }, "flat tyre")).rejects.toMatchObject({
				code: 409,
				type: "INVALID_TRANSITION",
			});
			expect(s.orders.transition).not.toHaveBeenCalled();
		});

		it("before it started: the order searches again (only while this driver is its driver), applied, matching kicked", async () => {
			const s = setup();
			onRide(s, "accepted");
			const searching = internalOrder({ status: "searching", version: 5 });
			s.orders.transition.mockResolvedValue(searching);
			await s.moves.dropOut({ driverId: "drv_1", orderId: "ord_1" }, "flat tyre", ctx);
			expect(s.orders.transition).toHaveBeenCalledWith(
				{ orderId: "ord_1", from: "accepted", to: "searching", driver: { id: "drv_1" }, reason: "flat tyre" },
				ctx,
			);
			expect(s.mirror.applyOrder).toHaveBeenCalledWith(searching, { abandonInFlight: true });
			expect(s.matcher.kick).toHaveBeenCalledTimes(1);
		});

		it("a view one step behind (a CONFLICT) is corrected from orders and tried once more", async () => {
			const s = setup();
			const driver = onRide(s, "accepted");
			s.orders.transition.mockRejectedValueOnce(new ApiError("CONFLICT", "from does not match")).mockResolvedValueOnce(internalOrder({ version: 6 }));
			s.orders.get.mockResolvedValue(internalOrder({ status: "arrived", version: 5, driver: orderDriver(driver) }));
			await s.moves.dropOut({ driverId: "drv_1", orderId: "ord_1" }, undefined);
			expect(s.orders.transition.mock.calls.map((c) => c[0].from)).toEqual(["accepted", "arrived"]);
			expect(s.orders.transition.mock.calls[1][0].reason).toBe("driver dropped out");
		});

		it("a CONFLICT because another driver has the ride now: 409, and the order's truth applied", async () => {
			const s = setup();
			onRide(s, "accepted");
			const current = internalOrder({ status: "accepted", version: 7, driver: orderDriver(driverRow({ id: "drv_2" })) });
			s.orders.transition.mockRejectedValue(new ApiError("CONFLICT", "not your ride"));
			s.orders.get.mockResolvedValue(current);
			await expect(s.moves.dropOut({ driverId: "drv_1", orderId: "ord_1" }, undefined)).rejects.toMatchObject({
				code: 409,
				message: "The driver is no longer on this ride",
			});
			expect(s.mirror.applyOrder).toHaveBeenCalledWith(current);
			expect(s.orders.transition).toHaveBeenCalledTimes(1);
		});
	});

	describe("register and driverJob", () => {
		it("register is idempotent by phone, and a simulated driver is a test driver", async () => {
			const { moves, repo } = setup();
			const existing = driverRow({ id: "drv_old" });
			repo.drivers.driverByPhone.mockResolvedValue(existing);
			const params = { name: "Ravi K", phone: existing.phone, vehicleNumber: "KA01AB1234", serviceType: "cab" as const, simulated: true };
			await expect(moves.register(params)).resolves.toMatchObject({ driverId: "drv_old" });
			expect(repo.drivers.insertDriver).toHaveBeenCalledWith(expect.stringMatching(/^drv_/), { ...params, mode: "test" });
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
