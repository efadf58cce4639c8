import type { FinishedKey, OrdersRetentionRepo } from "./retention.repo";

/**
 * One batch of orders' retention (lib/retention.ts runs the pass): the
 * oldest finished rides past ORDERS_RETENTION_DAYS, minus those
 * notifications still has something to deliver for (a pending event, or one
 * it has not taken in yet: kept until delivered or given up), are removed
 * with their ride events and feedback. When notifications cannot answer the
 * batch fails and nothing is removed: a ride is never removed unasked.
 */
export interface OrdersRetentionDeps {
	repo: Pick<OrdersRetentionRepo, "finishedBefore" | "remove">;
	/** notifications.undeliveredOrders: the ids among these that must be kept. */
	undeliveredOrders: (orderIds: string[]) => Promise<string[]>;
}

export async function removeFinishedOrders(
	deps: OrdersRetentionDeps,
	days: number,
	limit: number,
	after: FinishedKey | undefined,
): Promise<{ removed: number; scanned: number; next: FinishedKey | undefined }> {
	const candidates = await deps.repo.finishedBefore(days, limit, after);
	if (candidates.length === 0) return { removed: 0, scanned: 0, next: after };
	const kept = new Set(await deps.undeliveredOrders(candidates.map((c) => c.id)));
	const removable = candidates.filter((c) => !kept.has(c.id)).map((c) => c.id);
	const removed = await deps.repo.remove(removable, days);
	// Past the last candidate: kept rides are read again at the next pass, not in this one.
	return { removed: removed.length, scanned: candidates.length, next: candidates[candidates.length - 1] };
}
