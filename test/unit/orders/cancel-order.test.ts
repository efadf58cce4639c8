import { cancelOrder, type CancelDeps } from "../../../services/orders/cancel-order";
import type { OrderRow } from "../../../services/orders/order-view";
import type { MoveChanges } from "../../../services/orders/orders.repo";
import { destinationPoint } from "../../../lib/geo";
import { orderRowFixture } from "../../helpers/order-rows";

/**
 * The cancel use case with a fake repository: the fee is judged on the order
 * as read and written only onto that version; a change in between makes it
 * judge again on the new state.
 */

const NOW = Date.parse("2026-12-01T10:00:00Z");
const SCOPE = { partnerId: "ptn_1", mode: "test" as const };
const TERMS = {
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
const driver = { id: "drv_1", name: "Ravi", phone: "+919800000001", vehicleNumber: "KA01AB1234" };

function accepted(overrides: Partial<OrderRow> = {}): OrderRow {
	const pickup = orderRowFixture().pickup;
	return orderRowFixture({
		status: "accepted",
		version: 3,
		driver,
		driver_location: destinationPoint(pickup, 90, 3000),
		eta: 600,
		accepted_at: new Date(NOW - 600_000),
		fare_terms: TERMS,
		...overrides,
	});
}

function fakeDeps(reads: OrderRow[], moveResults: Array<OrderRow | null>) {
	const moves: Array<{ version?: number; changes: MoveChanges }> = [];
	const deps: CancelDeps = {
		graceSeconds: 120,
		now: () => NOW,
		orders: {
			findOrder: async () => reads.shift() ?? null,
			applyMove: async (_from, _to, changes, _driver, version) => {
				moves.push({ version, changes });
				const row = moveResults.shift();
				return row ? { row, eventId: "evt_1" } : null;
			},
		},
		announceMove: () => undefined,
	};
	return { deps, moves };
}

it("writes the fee judged on the version read, and only onto that version", async () => {
	const cancelled = accepted({ status: "customer_cancelled", version: 4, cancellation_fee_paise: 0, cancellation_rule: "driver_far" });
	const { deps, moves } = fakeDeps([], [cancelled]);
	const answer = await cancelOrder(deps, { orderId: "ord_abc", confirmFee: 0, reasonCode: "DRIVER_TOO_FAR" }, accepted(), SCOPE);
	expect(answer).toEqual({
		code: "RIDE_CANCELLED",
		orderId: "ord_abc",
		status: "customer_cancelled",
		cancellationFee: { amount: 0, currency: "INR", rule: "driver_far" },
	});
	expect(moves).toEqual([
		{ version: 3, changes: expect.objectContaining({ cancellation: { feePaise: 0, rule: "driver_far", reasonCode: "DRIVER_TOO_FAR" } }) },
	]);
});

it("judges again when the ride changed in between: the driver came near, so a confirmed free cancel is refused", async () => {
	const near = accepted({ version: 4, driver_location: orderRowFixture().pickup, eta: 30 });
	const { deps, moves } = fakeDeps([near], [null]);
	await expect(cancelOrder(deps, { orderId: "ord_abc", confirmFee: 0, reasonCode: "OTHER" }, accepted(), SCOPE)).rejects.toMatchObject({
		type: "CANCELLATION_FEE_CHANGED",
		data: { details: expect.arrayContaining([{ field: "cancellationFee.amount", message: "50" }]) },
	});
	expect(moves).toHaveLength(1);
});

it("previews without writing, and refuses preview and confirmed cancels of a started ride", async () => {
	const { deps, moves } = fakeDeps([], []);
	expect(await cancelOrder(deps, { orderId: "ord_abc", preview: true }, accepted({ status: "arrived" }), SCOPE)).toEqual({
		code: "CANCEL_PREVIEW",
		orderId: "ord_abc",
		status: "arrived",
		cancellationFee: { amount: 50, currency: "INR", rule: "driver_arrived" },
	});
	await expect(cancelOrder(deps, { orderId: "ord_abc", preview: true }, accepted({ status: "started" }), SCOPE)).rejects.toMatchObject({
		type: "RIDE_NOT_CANCELLABLE",
	});
	await expect(cancelOrder(deps, { orderId: "ord_abc", confirmFee: 500, reasonCode: "OTHER" }, accepted({ status: "started" }), SCOPE)).rejects.toMatchObject(
		{
			type: "RIDE_NOT_CANCELLABLE",
		},
	);
	expect(moves).toEqual([]);
});

it("refuses bad combinations with a 400 naming the field", async () => {
	const { deps } = fakeDeps([], []);
	await expect(cancelOrder(deps, { orderId: "ord_abc", preview: true, confirmFee: 0 }, accepted(), SCOPE)).rejects.toMatchObject({
		type: "VALIDATION_ERROR",
	});
	await expect(cancelOrder(deps, { orderId: "ord_abc", confirmFee: 10 }, accepted(), SCOPE)).rejects.toMatchObject({
		type: "VALIDATION_ERROR",
		data: { details: [expect.objectContaining({ field: "reasonCode" })] },
	});
	await expect(cancelOrder(deps, { orderId: "ord_abc", confirmFee: 10.005, reasonCode: "OTHER" }, accepted(), SCOPE)).rejects.toMatchObject({
		data: { details: [expect.objectContaining({ field: "confirmFee" })] },
	});
});

it("answers a cancelled ride again with the fee it was charged (also to a preview)", async () => {
	const { deps, moves } = fakeDeps([], []);
	const row = accepted({ status: "customer_cancelled", cancellation_fee_paise: 5000, cancellation_rule: "driver_near" });
	expect(await cancelOrder(deps, { orderId: "ord_abc", preview: true }, row, SCOPE)).toMatchObject({
		code: "RIDE_CANCELLED",
		cancellationFee: { amount: 50, rule: "driver_near" },
	});
	expect(moves).toEqual([]);
});
