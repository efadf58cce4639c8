import {
	ORDERS_RETRY_AFTER_SECONDS,
	type CancelParams,
	type CancelPreviewResult,
	type CancelResult,
	type CancellationFee,
	type RideStatus,
} from "../../contracts/orders";
import { ApiError, orderNotFound, validationError } from "../../lib/errors";
import { cancellationCharge, feeConfirmed, previewAllowed, type CancelCharge } from "./cancel-policy";
import { canTransition, isActive } from "./ride-state";
import { cancellationFeeOf, paiseToMajor, type OrderRow } from "./order-view";
import type { MoveResult, OrdersRepo, PartnerScope } from "./orders.repo";

/**
 * The cancel use case (POST /ride/cancel): a plain cancel (the contract
 * partners had before the policy: same answers, plus `cancellationFee`), a
 * preview (`preview: true`: the fee a cancel now would cost, nothing
 * written) or a confirmed cancel (`confirmFee` + `reasonCode`: only while the
 * fee is at most the confirmed one). The fee is judged on the order as read
 * and the update applies only to that very version of it (a driver's move or
 * position in between means judging again), so the fee charged is the fee
 * of the state the ride was cancelled in. Safe to retry: a cancelled ride
 * answers the same, with the fee it was charged.
 */

/** How often cancel re-reads when the ride changed between its read and its update. */
const CANCEL_ATTEMPTS = 10;

export interface CancelDeps {
	orders: Pick<OrdersRepo, "findOrder" | "applyMove">;
	graceSeconds: number;
	announceMove(from: RideStatus, result: MoveResult, previousDriverId: string | null): void;
	now?: () => number;
}

/** A confirmed fee in paise; a 400 for more than 2 decimals. */
function confirmedPaise(p: CancelParams): number | undefined {
	if (p.confirmFee === undefined) return undefined;
	const paise = Math.round(p.confirmFee * 100);
	if (Math.abs(paise - p.confirmFee * 100) > 1e-6) throw validationError("confirmFee", "confirmFee must have at most 2 decimals");
	return paise;
}

function feeView(charge: CancelCharge, currency: string): CancellationFee {
	return { amount: paiseToMajor(charge.feePaise), currency, rule: charge.rule };
}

function cancelledAnswer(row: OrderRow): CancelResult {
	const answer: CancelResult = { code: "RIDE_CANCELLED", orderId: row.id, status: "customer_cancelled" };
	const fee = cancellationFeeOf(row);
	if (fee) answer.cancellationFee = fee;
	return answer;
}

export async function cancelOrder(deps: CancelDeps, p: CancelParams, first: OrderRow, scope: PartnerScope): Promise<CancelResult | CancelPreviewResult> {
	if (p.preview === true && p.confirmFee !== undefined) throw validationError("confirmFee", "A preview takes no confirmFee: preview first, then confirm");
	if (p.confirmFee !== undefined && p.reasonCode === undefined) throw validationError("reasonCode", "A confirmed cancel (confirmFee) needs a reasonCode");
	const confirmed = confirmedPaise(p);
	const now = deps.now ?? Date.now;
	let row: OrderRow | null = first;
	for (let attempt = 0; attempt < CANCEL_ATTEMPTS; attempt++) {
		if (attempt > 0) row = await deps.orders.findOrder(p.orderId, scope);
		if (!row) throw orderNotFound();
		if (row.status === "customer_cancelled") return cancelledAnswer(row);
		const charge = cancellationCharge({
			status: row.status,
			terms: row.fare_terms ?? null,
			farePaise: row.fare_paise,
			pickup: row.pickup,
			acceptedAtMs: row.accepted_at ? new Date(row.accepted_at).getTime() : null,
			driverLocation: row.driver_location,
			etaSeconds: row.eta,
			nowMs: now(),
			graceSeconds: deps.graceSeconds,
		});
		// A scheduled ride is cancelled like an active one (before its dispatch starts, or while it waits for its rider).
		const cancellable = isActive(row.status) || row.status === "scheduled";
		if (!charge || !cancellable || !canTransition(row.status, "customer_cancelled", "partner")) {
			throw new ApiError("RIDE_NOT_ACTIVE", `The ride is ${row.status} and can no longer be cancelled`);
		}
		if ((p.preview === true || confirmed !== undefined) && !previewAllowed(charge)) {
			throw new ApiError("RIDE_NOT_CANCELLABLE", `The ride is ${row.status}: the rider is on board and the ride ends with the drop`);
		}
		const fee = feeView(charge, row.currency);
		if (p.preview === true) return { code: "CANCEL_PREVIEW", orderId: row.id, status: row.status, cancellationFee: fee };
		if (confirmed !== undefined && !feeConfirmed(charge, confirmed)) {
			throw new ApiError(
				"CANCELLATION_FEE_CHANGED",
				`The cancellation fee is now ${fee.amount} ${fee.currency} (${fee.rule}); confirm that fee to cancel`,
				{
					details: [
						{ field: "cancellationFee.amount", message: String(fee.amount) },
						{ field: "cancellationFee.currency", message: fee.currency },
						{ field: "cancellationFee.rule", message: fee.rule },
					],
				},
			);
		}
		const moved = await deps.orders.applyMove(
			row,
			"customer_cancelled",
			{ cancelReason: p.reason ?? null, eta: null, cancellation: { feePaise: charge.feePaise, rule: charge.rule, reasonCode: p.reasonCode ?? null } },
			undefined,
			row.version,
		);
		if (moved) {
			deps.announceMove(row.status, moved, row.driver?.id ?? null);
			return cancelledAnswer(moved.row);
		}
		// A driver's move or position landed between the read and the update: judge again on the new state.
	}
	throw new ApiError("CONFLICT", "The ride kept changing; try again", { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
}
