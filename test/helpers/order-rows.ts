import type { Place, ServiceType } from "../../contracts/common";
import type { OrderRow } from "../../services/orders/order-view";
import type { NewOrder } from "../../services/orders/orders.repo";

/**
 * Order fixtures for the orders tests: one booking, as create-order hands it
 * to the insert (`newOrderFixture`) and as a row of `orders` comes back
 * (`orderRowFixture`). `overrides` set any field; each call builds fresh
 * objects, so a test may change what it gets.
 */

/** The trip every fixture books: a cab from MG Road, Bengaluru, 5.2 km, 16 min, ₹182.50, OTP 0421. */
function booking() {
	return {
		serviceType: "cab" as ServiceType,
		pickup: { lat: 12.9716, lng: 77.5946, address: "MG Road" } as Place,
		drop: { lat: 12.9352, lng: 77.6245 } as Place,
		farePaise: 18250,
		currency: "INR",
		fareBreakdown: { baseFare: 50 } as Record<string, unknown>,
		distance: 5234,
		duration: 960,
		otp: "0421",
		webhookURL: "https://partner.example.com/hooks",
	};
}

/** A new order as create-order passes it to `insertOrder`: test mode, no quote, no metadata. */
export function newOrderFixture(overrides: Partial<NewOrder> = {}): NewOrder {
	return {
		id: "ord_abc",
		status: "searching",
		partnerId: "ptn_1",
		mode: "test",
		riderId: "rdr_1",
		quoteId: null,
		metadata: null,
		pickupAt: null,
		dispatchAt: null,
		...booking(),
		...overrides,
	};
}

/** A row of `orders` as PostgreSQL returns it: the booking searching (version 0, no driver yet), test mode, no metadata. */
export function orderRowFixture(overrides: Partial<OrderRow> = {}): OrderRow {
	const b = booking();
	return {
		id: "ord_abc",
		partner_id: "ptn_1",
		mode: "test",
		rider_id: "rdr_1",
		status: "searching",
		service_type: b.serviceType,
		pickup: b.pickup,
		drop: b.drop,
		fare_paise: b.farePaise,
		currency: b.currency,
		fare_breakdown: b.fareBreakdown,
		distance: b.distance,
		duration: b.duration,
		quote_id: null,
		otp: b.otp,
		otp_tries: 0,
		webhook_url: b.webhookURL,
		metadata: null,
		driver: null,
		driver_location: null,
		eta: null,
		version: 0,
		cancel_reason: null,
		created_at: new Date("2026-11-22T10:15:30.123Z"),
		updated_at: new Date("2026-11-22T10:15:31.000Z"),
		...overrides,
	};
}
