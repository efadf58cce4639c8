import { METADATA_MAX_BYTES } from "../../../contracts/orders";
import {
	buildEventPayload,
	generateOtp,
	majorToPaise,
	paiseToMajor,
	serialisedBytes,
	toInternalOrder,
	toOrder,
	type OrderRow,
} from "../../../services/orders/order-view";
import { orderRowFixture } from "../../helpers/order-rows";

/** A test-mode order's row, `updated_at` given as a string (the views take a string or a Date). */
function row(overrides: Partial<OrderRow> = {}): OrderRow {
	return orderRowFixture({
		metadata: { partnerRef: "booking-8812" },
		created_at: new Date("2026-11-22T10:15:30.123Z"),
		updated_at: "2026-11-22T10:15:31.000Z",
		...overrides,
	});
}

const driver = { id: "drv_1", name: "Ravi", phone: "+919800000001", vehicleNumber: "KA01AB1234" };

describe("generateOtp", () => {
	it("is always exactly 4 digits, leading zeros kept", () => {
		for (let i = 0; i < 5000; i++) expect(generateOtp()).toMatch(/^[0-9]{4}$/);
	});

	it("covers the whole range (not a constant or a narrow band)", () => {
		const seen = new Set<string>();
		const firstDigits = new Set<string>();
		for (let i = 0; i < 5000; i++) {
			const otp = generateOtp();
			seen.add(otp);
			firstDigits.add(otp[0]!);
		}
		expect(seen.size).toBeGreaterThan(3000);
		expect(firstDigits.size).toBe(10);
	});
});

describe("money", () => {
	it("stores paise and presents major units with at most 2 decimals", () => {
		expect(majorToPaise(182)).toBe(18200);
		expect(majorToPaise(61.05)).toBe(6105);
		expect(majorToPaise(0.1 + 0.2)).toBe(30);
		expect(paiseToMajor(18250)).toBe(182.5);
		expect(paiseToMajor(6105)).toBe(61.05);
		for (const paise of [0, 1, 99, 12345, 999999]) expect(majorToPaise(paiseToMajor(paise))).toBe(paise);
	});
});

describe("toOrder", () => {
	it("maps a searching row to the contract's Order", () => {
		expect(toOrder(row())).toEqual({
			orderId: "ord_abc",
			otp: "0421",
			status: "searching",
			serviceType: "cab",
			pickup: { lat: 12.9716, lng: 77.5946, address: "MG Road" },
			drop: { lat: 12.9352, lng: 77.6245 },
			fare: { totalAmount: 182.5, currency: "INR" },
			distance: 5234,
			duration: 960,
			driver: null,
			metadata: { partnerRef: "booking-8812" },
			createdAt: "2026-11-22T10:15:30.123Z",
			updatedAt: "2026-11-22T10:15:31.000Z",
		});
	});

	it("shows the driver with the last known location once assigned", () => {
		const order = toOrder(row({ status: "accepted", driver, driver_location: { lat: 12.97, lng: 77.59, heading: 90 } }));
		expect(order.driver).toEqual({ ...driver, location: { lat: 12.97, lng: 77.59, heading: 90 } });
		expect(toOrder(row({ status: "accepted", driver })).driver).toEqual({ ...driver, location: null });
	});

	it("answers metadata null when the partner sent none", () => {
		expect(toOrder(row({ metadata: null })).metadata).toBeNull();
	});

	it("does not leak stored extras from the driver or place objects", () => {
		const order = toOrder(
			row({
				pickup: { lat: 1, lng: 2, secret: "x" } as never,
				driver: { ...driver, internal: "x" } as never,
				driver_location: { lat: 1, lng: 2, speed: 3 } as never,
			}),
		);
		expect(order.pickup).toEqual({ lat: 1, lng: 2 });
		expect(order.driver).toEqual({ ...driver, location: { lat: 1, lng: 2 } });
	});
});

describe("toInternalOrder", () => {
	it("has every field but the OTP, plus ownership, version and dispatch fields", () => {
		const internal = toInternalOrder(row({ status: "accepted", driver, driver_location: { lat: 1, lng: 2 }, eta: 120, version: 3, quote_id: "qt_x" }));
		expect(internal).not.toHaveProperty("otp");
		expect(internal).toMatchObject({
			orderId: "ord_abc",
			partnerId: "ptn_1",
			riderId: "rdr_1",
			status: "accepted",
			version: 3,
			eta: 120,
			location: { lat: 1, lng: 2 },
			webhookURL: "https://partner.example.com/hooks",
			quoteId: "qt_x",
			fareBreakdown: { baseFare: 50 },
			cancelReason: null,
			driver: { ...driver, location: { lat: 1, lng: 2 } },
		});
		expect(JSON.stringify(internal)).not.toContain("0421");
	});

	it("carries the order's key mode for dispatch", () => {
		expect(toInternalOrder(row()).mode).toBe("test");
		expect(toInternalOrder(row({ mode: "live" })).mode).toBe("live");
	});
});

describe("buildEventPayload", () => {
	it("builds a status event with driver, latest location, eta and metadata", () => {
		const payload = buildEventPayload({
			eventId: "evt_1",
			row: row({ status: "accepted", driver, driver_location: { lat: 12.97, lng: 77.59, heading: 90 }, eta: 120 }),
			status: "accepted",
			sequence: 1,
			occurredAt: new Date("2026-11-22T10:16:00.000Z"),
		});
		expect(payload).toEqual({
			eventId: "evt_1",
			orderId: "ord_abc",
			status: "accepted",
			sequence: 1,
			occurredAt: "2026-11-22T10:16:00.000Z",
			mode: "test",
			driver: { ...driver, location: { lat: 12.97, lng: 77.59, heading: 90 } },
			location: { lat: 12.97, lng: 77.59, heading: 90 },
			eta: 120,
			etaToPickupSeconds: 120,
			metadata: { partnerRef: "booking-8812" },
		});
	});

	it("carries the ride's mode (a live ride's webhooks say live)", () => {
		const payload = buildEventPayload({ eventId: "evt_3", row: row({ mode: "live" }), status: "accepted", sequence: 1, occurredAt: new Date() });
		expect(payload.mode).toBe("live");
	});

	it("leaves out driver, location and eta before a driver is assigned, but always carries metadata", () => {
		const payload = buildEventPayload({
			eventId: "evt_2",
			row: row({ metadata: null }),
			status: "no_driver_found",
			sequence: 1,
			occurredAt: "2026-11-22T10:20:00Z",
		});
		expect(payload).toEqual({
			eventId: "evt_2",
			orderId: "ord_abc",
			status: "no_driver_found",
			sequence: 1,
			occurredAt: "2026-11-22T10:20:00.000Z",
			mode: "test",
			metadata: null,
		});
		expect(Object.keys(payload)).toEqual(["eventId", "orderId", "status", "sequence", "occurredAt", "mode", "metadata"]);
	});

	it("keeps eta 0 (arrived at the pickup) and builds location events", () => {
		const payload = buildEventPayload({
			eventId: "evt_3",
			row: row({ status: "started", driver, driver_location: { lat: 1, lng: 2 }, eta: 0 }),
			status: "location_updated",
			sequence: 7,
			occurredAt: "2026-11-22T10:30:00Z",
		});
		expect(payload.status).toBe("location_updated");
		expect(payload.sequence).toBe(7);
		expect(payload.eta).toBe(0);
		expect(payload.location).toEqual({ lat: 1, lng: 2 });
	});
});

describe("metadata size", () => {
	it("counts UTF-8 bytes of the serialised JSON", () => {
		expect(serialisedBytes({ a: 1 })).toBe(7);
		expect(serialisedBytes({ a: "é" })).toBe(10);
		const justFits = { k: "x".repeat(METADATA_MAX_BYTES - 8) };
		expect(serialisedBytes(justFits)).toBe(METADATA_MAX_BYTES);
		expect(serialisedBytes({ k: "x".repeat(METADATA_MAX_BYTES - 7) })).toBe(METADATA_MAX_BYTES + 1);
	});
});
