import { createdEvent } from "../../../services/orders/create-order";
import { toOrder, type OrderRow } from "../../../services/orders/order-view";
import { orderRowFixture } from "../../helpers/order-rows";

/**
 * The orders.created hint carries the order's snapshot (issue 9) so dispatch
 * mirrors the ride without calling orders.get back; it keeps the old fields,
 * keeps the booking key's mode, and carries no more of the partner's data
 * than dispatch needs (of the metadata, only the sandbox directive; never
 * the OTP or the webhook URL).
 */

/** The row of a live order just inserted, whose metadata carries the partner's own fields. */
function row(overrides: Partial<OrderRow> = {}): OrderRow {
	const at = new Date("2026-11-23T10:00:00.123Z");
	return orderRowFixture({ mode: "live", metadata: { partnerRef: "b-1", secretNote: "x" }, created_at: at, updated_at: at, ...overrides });
}

it("carries the old fields and the snapshot dispatch mirrors, in the order's own mode", () => {
	const r = row();
	const event = createdEvent(r, toOrder(r));
	expect(event).toEqual({
		orderId: "ord_abc",
		partnerId: "ptn_1",
		mode: "live",
		serviceType: "cab",
		pickup: { lat: 12.9716, lng: 77.5946, address: "MG Road" },
		drop: { lat: 12.9352, lng: 77.6245 },
		status: "searching",
		version: 0,
		updatedAt: "2026-11-23T10:00:00.123Z",
	});
	expect(JSON.stringify(event)).not.toMatch(/0421|partner\.example|secretNote|partnerRef/);
	const t = row({ mode: "test" });
	expect(createdEvent(t, toOrder(t)).mode).toBe("test");
});

it("carries metadata.sandbox as sent, and nothing else of the metadata", () => {
	for (const sandbox of ["fast", { scenario: "driver_drop_out" }, 42]) {
		const r = row({ mode: "test", metadata: { sandbox, partnerRef: "b-2" } });
		const event = createdEvent(r, toOrder(r));
		expect(event.sandbox).toEqual(sandbox);
		expect(JSON.stringify(event)).not.toMatch(/partnerRef/);
	}
	const none = row({ metadata: null });
	expect("sandbox" in createdEvent(none, toOrder(none))).toBe(false);
});
