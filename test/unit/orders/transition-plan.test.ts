import { planTransition } from "../../../services/orders/transition-plan";

const DRIVER = { id: "drv_1", name: "Ravi", phone: "+919800000001", vehicleNumber: "KA01AB1234" };

describe("planTransition (orders.transition before anything is written)", () => {
	it("assigns the driver, the location and the eta on accepted", () => {
		const plan = planTransition(
			{ orderId: "ord_1", to: "accepted", driver: { ...DRIVER, location: { lat: 1, lng: 2 } }, eta: 120 },
			{ status: "searching", otp: "1234" },
		);
		expect(plan).toEqual({
			from: "searching",
			actor: "driver",
			changes: { driver: DRIVER, driverLocation: { lat: 1, lng: 2 }, eta: 120 },
			expectDriverId: undefined,
		});
	});

	it("refuses an accepted without a full driver (400), an illegal move (409) and a stale from (409)", () => {
		expect(() => planTransition({ orderId: "o", to: "accepted", driver: { id: "drv_1" } }, { status: "searching", otp: "1" })).toThrow(
			expect.objectContaining({ code: 400 }),
		);
		expect(() => planTransition({ orderId: "o", to: "dropped" }, { status: "searching", otp: "1" })).toThrow(
			expect.objectContaining({ type: "INVALID_TRANSITION" }),
		);
		expect(() => planTransition({ orderId: "o", to: "arrived", from: "accepted" }, { status: "searching", otp: "1" })).toThrow(
			expect.objectContaining({ type: "CONFLICT" }),
		);
	});

	it("starts only with the ride's OTP", () => {
		expect(() => planTransition({ orderId: "o", to: "started", otp: "0000" }, { status: "arrived", otp: "1234" })).toThrow(
			expect.objectContaining({ type: "INVALID_OTP" }),
		);
		expect(planTransition({ orderId: "o", to: "started", otp: "1234" }, { status: "arrived", otp: "1234" }).changes).toEqual({ eta: null });
	});

	it("forgets the driver on a drop-out, counting only that driver's, and lets the system end a search", () => {
		expect(planTransition({ orderId: "o", to: "searching", driver: { id: "drv_1" } }, { status: "accepted", otp: "1" })).toEqual({
			from: "accepted",
			actor: "driver",
			// The next driver gets a fresh set of OTP tries.
			changes: { driver: null, driverLocation: null, eta: null, resetOtpTries: true },
			expectDriverId: "drv_1",
		});
		expect(planTransition({ orderId: "o", to: "no_driver_found" }, { status: "searching", otp: "1" }).actor).toBe("system");
	});
});
