import { computeFinalFare, waitingChargePaise, waitingSecondsOf, type FinalFareInput } from "../../../services/orders/final-fare";
import { computeFare } from "../../../lib/fare-math";
import { destinationPoint } from "../../../lib/geo";
import type { FareTerms } from "../../../contracts/pricing";

const PICKUP = { lat: 12.9716, lng: 77.5946 };
const DROP = destinationPoint(PICKUP, 135, 5000);
const TERMS: FareTerms = {
	currency: "INR",
	baseFarePaise: 5000,
	perKmPaise: 1400,
	perMinutePaise: 150,
	minimumFarePaise: 8000,
	taxBasisPoints: 500,
	surgeTenths: 10,
	waitingPerMinutePaise: 200,
	freeWaitingSeconds: 180,
	cancellationFeePaise: 5000,
};
const QUOTE = computeFare(TERMS, 6000, 900, 10);
const T0 = Date.parse("2026-12-01T10:00:00Z");

function input(overrides: Partial<FinalFareInput> = {}): FinalFareInput {
	return {
		terms: TERMS,
		quotedPaise: QUOTE.total,
		quotedBreakdown: { baseFare: 50, distanceFare: 84, timeFare: 22.5, surgeMultiplier: 1, tax: 7.83 },
		quotedDistance: 6000,
		quotedDuration: 900,
		currency: "INR",
		bookedDrop: DROP,
		droppedAt: DROP,
		drivenMeters: 6000,
		arrivedAtMs: T0,
		startedAtMs: T0 + 60_000,
		droppedAtMs: T0 + 60_000 + 900_000,
		...overrides,
	};
}

describe("final fare", () => {
	it("keeps the quote at the booked drop, whatever route and time it took", () => {
		const fare = computeFinalFare(input({ drivenMeters: 10_000, droppedAtMs: T0 + 60_000 + 3_600_000, droppedAt: destinationPoint(DROP, 0, 499) }));
		expect(fare).toMatchObject({ basis: "quote", tripFare: QUOTE.total / 100, waitingCharge: 0, totalAmount: QUOTE.total / 100, distance: 10_000 });
		expect(fare.duration).toBe(3600);
		expect(fare.fareBreakdown).toEqual(input().quotedBreakdown);
	});

	it("adds waiting beyond the free minutes, per second pro rata, rounded once", () => {
		// 5 min 7 s waited, 3 min free: 127 s charged at ₹2/min = 423.33 paise → 423.
		const fare = computeFinalFare(input({ startedAtMs: T0 + 307_000, droppedAtMs: T0 + 307_000 + 900_000 }));
		expect(fare).toMatchObject({ waitingSeconds: 307, chargedWaitingSeconds: 127, waitingCharge: 4.23, basis: "quote" });
		expect(fare.totalAmount).toBe((QUOTE.total + 423) / 100);
	});

	it("meters a ride ended away from the booked drop on the distance driven, never above the quote", () => {
		const end = destinationPoint(PICKUP, 135, 2000);
		const fare = computeFinalFare(input({ droppedAt: end, drivenMeters: 2000, droppedAtMs: T0 + 60_000 + 240_000 }));
		const expected = computeFare(TERMS, 2000, 240, 10);
		expect(fare).toMatchObject({ basis: "metered", tripFare: expected.total / 100, distance: 2000, duration: 240 });
		expect(fare.tripFare).toBeLessThan(fare.quotedAmount);
		// A slow ride is charged at the quote's pace for that distance (2 km at 6 km/15 min = 300 s), not for its time.
		const slow = computeFinalFare(input({ droppedAt: end, drivenMeters: 2000, droppedAtMs: T0 + 60_000 + 3_000_000 }));
		expect(slow.tripFare).toBe(computeFare(TERMS, 2000, 300, 10).total / 100);
		// Driving far and ending elsewhere still costs at most the quote.
		const far = computeFinalFare(input({ droppedAt: end, drivenMeters: 50_000 }));
		expect(far).toMatchObject({ basis: "quote", tripFare: QUOTE.total / 100 });
	});

	it("keeps the quote without terms or a measured distance (rides booked before either existed)", () => {
		const end = destinationPoint(PICKUP, 135, 2000);
		expect(computeFinalFare(input({ droppedAt: end, terms: null })).basis).toBe("quote");
		expect(computeFinalFare(input({ droppedAt: end, drivenMeters: null }))).toMatchObject({ basis: "quote", distance: 6000 });
		expect(computeFinalFare(input({ terms: null, startedAtMs: T0 + 600_000 })).waitingCharge).toBe(0);
	});

	it("rounds the waiting charge half up in integers", () => {
		expect(waitingChargePaise(200, 127)).toBe(423);
		expect(waitingChargePaise(100, 3)).toBe(5); // 5.0
		expect(waitingChargePaise(10, 3)).toBe(1); // 0.5 → 1
		expect(waitingChargePaise(6000, 0)).toBe(0);
		expect(waitingSecondsOf(T0, T0 + 1999)).toBe(1);
		expect(waitingSecondsOf(null, T0)).toBe(0);
	});
});
