import type { Context } from "moleculer";
import { ApiError } from "../../../lib/errors";
import { BLR, TX, away, driverRow, internalOrder, orderDriver, rideRow, driverParts } from "../../helpers/dispatch-fakes";

const setup = driverParts;

/** A request's context as moleculer hands it over: the moves only pass it on to orders. */
const ctx = { id: "ctx_1" } as unknown as Context;

/** The driver on ord_1 (on_trip), the ride assigned to it in `status`. */
function onRide(s: ReturnType<typeof setup>, status: "accepted" | "arrived" | "started") {
	const driver = driverRow({ status: "on_trip", order_id: "ord_1", ...away(BLR, 300) });
	s.repo.drivers.driver.mockResolvedValue(driver);
	s.repo.mirror.ride.mockResolvedValue(rideRow({ state: "assigned", order_status: status, driver_id: driver.id }));
	return driver;
}

describe("RideSteps", () => {
	describe("accept", () => {
		it("takes the open offer, marks the ride accepting, moves the order to accepted with the driver, and applies the answer", async () => {
			const s = setup();
			const { steps, repo, orders, mirror, metrics, index, settings } = s;
			const ride = rideRow();
			const driver = driverRow({ status: "on_trip", order_id: "ord_1", ...away(BLR, 900) });
			const accepted = internalOrder({ status: "accepted", version: 2, driver: orderDriver(driver) });
			repo.mirror.lockRide.mockResolvedValue(ride);
			repo.matching.acceptOffer.mockResolvedValue(true);
			repo.drivers.startTrip.mockResolvedValue(driver);
			repo.drivers.driver.mockResolvedValue(driver);
			orders.transition.mockResolvedValue(accepted);

			const job = await steps.accept("drv_1", "ord_1", ctx);

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
			const { steps, repo, orders } = setup();
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.acceptOffer.mockResolvedValue(false);
			repo.drivers.driver.mockResolvedValue(driverRow());
			await expect(steps.accept("drv_1", "ord_1")).rejects.toMatchObject({
				code: 409,
				type: "CONFLICT",
				message: expect.stringMatching(/^No open offer/),
			});
			expect(repo.drivers.startTrip).not.toHaveBeenCalled();
			expect(orders.transition).not.toHaveBeenCalled();
		});

		it("an offer taken while the driver is not free for it: the transaction is rolled back whole, 409", async () => {
			const { steps, repo, orders } = setup();
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.acceptOffer.mockResolvedValue(true);
			repo.drivers.startTrip.mockResolvedValue(undefined);
			repo.drivers.driver.mockResolvedValue(driverRow({ status: "offered", order_id: "ord_1" }));
			await expect(steps.accept("drv_1", "ord_1")).rejects.toMatchObject({ code: 409, type: "CONFLICT" });
			// The transaction's work threw, so a real transaction rolls the accepted offer back.
			await expect(repo.tx.mock.results[0].value).rejects.toBeDefined();
			expect(repo.mirror.startTransition).not.toHaveBeenCalled();
			expect(orders.transition).not.toHaveBeenCalled();
		});

		it("a second accept of an offer already taken says so", async () => {
			const { steps, repo } = setup();
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.drivers.driver.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			await expect(steps.accept("drv_1", "ord_1")).rejects.toMatchObject({ code: 409, message: "Offer already accepted" });
		});

		it("refused for good by orders (cancelled meanwhile): takes the order's truth and answers 409 no longer available", async () => {
			const { steps, repo, orders, mirror, metrics } = setup();
			const refusal = new ApiError("CONFLICT", "The ride was cancelled");
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.acceptOffer.mockResolvedValue(true);
			repo.drivers.startTrip.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			orders.transition.mockRejectedValue(refusal);
			await expect(steps.accept("drv_1", "ord_1")).rejects.toMatchObject({
				code: 409,
				type: "CONFLICT",
				message: expect.stringContaining("no longer available"),
			});
			expect(mirror.afterRefusal).toHaveBeenCalledWith("ord_1", refusal);
			expect(mirror.applyOrder).not.toHaveBeenCalled();
			expect(metrics.matched).not.toHaveBeenCalled();
		});

		it("orders not answering: the error goes back as it is and the lease settles it later", async () => {
			const { steps, repo, orders, mirror } = setup();
			const timeout = new Error("Request timed out");
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.acceptOffer.mockResolvedValue(true);
			repo.drivers.startTrip.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			orders.transition.mockRejectedValue(timeout);
			await expect(steps.accept("drv_1", "ord_1")).rejects.toBe(timeout);
			expect(mirror.afterRefusal).not.toHaveBeenCalled();
		});
	});

	describe("moveRide", () => {
		it("moves the order one step with the driver's position and applies the answer", async () => {
			const s = setup();
			const driver = onRide(s, "arrived");
			const started = internalOrder({ status: "started", version: 4 });
			s.orders.transition.mockResolvedValue(started);
			const job = await s.steps.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "arrived", "started", "4821", ctx);
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
			await expect(s.steps.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "arrived", "started", "0000")).rejects.toBe(wrong);
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
			await expect(s.steps.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "started", "dropped")).rejects.toBe(refusal);
			expect(s.mirror.afterRefusal).toHaveBeenCalledWith("ord_1", refusal);
			expect(s.repo.drivers.countWrongOtp).not.toHaveBeenCalled();
		});

		it("a driver not on the ride: 409 CONFLICT, orders not asked", async () => {
			const { steps, repo, orders } = setup();
			repo.drivers.driver.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_other" }));
			await expect(steps.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "accepted", "arrived")).rejects.toMatchObject({
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
			await s.steps.moveRide({ driverId: "drv_1", orderId: "ord_1" }, "accepted", "arrived");
			// The lease still runs: the accept call may yet answer, so it is not given up.
			expect(s.mirror.reconcile).toHaveBeenCalledWith("ord_1", { abandonInFlight: false });
			expect(s.orders.transition).toHaveBeenCalledWith(expect.objectContaining({ from: "accepted", to: "arrived", eta: 0 }), undefined);
		});
	});

	describe("dropOut", () => {
		it("after the ride started: 409 INVALID_TRANSITION, orders not asked", async () => {
			const s = setup();
			onRide(s, "started");
			await expect(s.steps.dropOut({ driverId: "drv_1", orderId: "ord_1" }, "flat tyre")).rejects.toMatchObject({
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
			await s.steps.dropOut({ driverId: "drv_1", orderId: "ord_1" }, "flat tyre", ctx);
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
			await s.steps.dropOut({ driverId: "drv_1", orderId: "ord_1" }, undefined);
			expect(s.orders.transition.mock.calls.map((c) => c[0].from)).toEqual(["accepted", "arrived"]);
			expect(s.orders.transition.mock.calls[1][0].reason).toBe("driver dropped out");
		});

		it("a CONFLICT because another driver has the ride now: 409, and the order's truth applied", async () => {
			const s = setup();
			onRide(s, "accepted");
			const current = internalOrder({ status: "accepted", version: 7, driver: orderDriver(driverRow({ id: "drv_2" })) });
			s.orders.transition.mockRejectedValue(new ApiError("CONFLICT", "not your ride"));
			s.orders.get.mockResolvedValue(current);
			await expect(s.steps.dropOut({ driverId: "drv_1", orderId: "ord_1" }, undefined)).rejects.toMatchObject({
				code: 409,
				message: "The driver is no longer on this ride",
			});
			expect(s.mirror.applyOrder).toHaveBeenCalledWith(current);
			expect(s.orders.transition).toHaveBeenCalledTimes(1);
		});
	});
});
