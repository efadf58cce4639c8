import { cancellationCharge, driverIsNear, feeConfirmed, previewAllowed, type CancelPolicyInput } from "../../../services/orders/cancel-policy";
import { destinationPoint } from "../../../lib/geo";

const PICKUP = { lat: 12.9716, lng: 77.5946 };
const NOW = Date.parse("2026-12-01T10:00:00Z");

function input(overrides: Partial<CancelPolicyInput> = {}): CancelPolicyInput {
	return {
		status: "accepted",
		terms: { cancellationFeePaise: 5000 },
		farePaise: 18250,
		pickup: PICKUP,
		acceptedAtMs: NOW - 300_000,
		driverLocation: destinationPoint(PICKUP, 90, 3000),
		etaSeconds: 600,
		nowMs: NOW,
		graceSeconds: 120,
		...overrides,
	};
}

describe("cancellation policy", () => {
	it("is free while scheduled or searching", () => {
		expect(cancellationCharge(input({ status: "searching", acceptedAtMs: null, driverLocation: null }))).toEqual({ feePaise: 0, rule: "searching" });
		expect(cancellationCharge(input({ status: "scheduled" }))).toEqual({ feePaise: 0, rule: "scheduled" });
	});

	it("is free within the grace period after acceptance, even with the driver near", () => {
		const near = destinationPoint(PICKUP, 0, 100);
		expect(cancellationCharge(input({ acceptedAtMs: NOW - 119_999, driverLocation: near, etaSeconds: 20 }))).toEqual({ feePaise: 0, rule: "grace_period" });
		// Exactly at the end of the grace period the policy's next rule applies.
		expect(cancellationCharge(input({ acceptedAtMs: NOW - 120_000, driverLocation: near, etaSeconds: 20 }))).toEqual({
			feePaise: 5000,
			rule: "driver_near",
		});
	});

	it("after the grace period: free while the driver is far, the fixed fee once near by distance or by ETA", () => {
		expect(cancellationCharge(input())).toEqual({ feePaise: 0, rule: "driver_far" });
		expect(cancellationCharge(input({ driverLocation: destinationPoint(PICKUP, 45, 499), etaSeconds: 600 }))?.rule).toBe("driver_near");
		expect(cancellationCharge(input({ driverLocation: destinationPoint(PICKUP, 45, 501), etaSeconds: 121 }))?.rule).toBe("driver_far");
		expect(cancellationCharge(input({ etaSeconds: 120 }))).toEqual({ feePaise: 5000, rule: "driver_near" });
		expect(cancellationCharge(input({ driverLocation: null, etaSeconds: null }))?.rule).toBe("driver_far");
	});

	it("charges the fixed fee once the driver arrived, and a plain cancel of a started ride the fare", () => {
		expect(cancellationCharge(input({ status: "arrived", acceptedAtMs: NOW - 1000 }))).toEqual({ feePaise: 5000, rule: "driver_arrived" });
		const started = cancellationCharge(input({ status: "started" }))!;
		expect(started).toEqual({ feePaise: 18250, rule: "ride_started" });
		expect(previewAllowed(started)).toBe(false);
		expect(previewAllowed(cancellationCharge(input({ status: "arrived" }))!)).toBe(true);
	});

	it("has no fixed fee for rides booked without terms, and nothing to charge once a ride ended", () => {
		expect(cancellationCharge(input({ status: "arrived", terms: null }))).toEqual({ feePaise: 0, rule: "driver_arrived" });
		for (const status of ["dropped", "customer_cancelled", "no_driver_found"]) expect(cancellationCharge(input({ status }))).toBeNull();
	});

	it("confirms a fee at most the confirmed one", () => {
		expect(feeConfirmed({ feePaise: 5000, rule: "driver_near" }, 5000)).toBe(true);
		expect(feeConfirmed({ feePaise: 5000, rule: "driver_near" }, 4999)).toBe(false);
		expect(feeConfirmed({ feePaise: 0, rule: "driver_far" }, 0)).toBe(true);
	});

	it("counts a driver as near by distance or by ETA", () => {
		expect(driverIsNear(PICKUP, PICKUP, null)).toBe(true);
		expect(driverIsNear(PICKUP, null, 119)).toBe(true);
		expect(driverIsNear(PICKUP, null, null)).toBe(false);
	});
});
