import type { Db } from "../../mixins/db.mixin";
import { TERMINAL_STATUSES } from "../../contracts/orders";

/**
 * Retention of finished rides (lib/retention.ts has the pass): a ride that
 * ended more than ORDERS_RETENTION_DAYS ago is removed with its ride events
 * and feedback. Active rides are never candidates (the partial index
 * `orders_finished_updated` holds only finished ones, oldest first).
 */

const FINISHED_SQL = TERMINAL_STATUSES.map((s) => `'${s}'`).join(",");

/** Where a pass is in the finished rides (it moves past the rides it had to keep). */
export interface FinishedKey {
	at: string;
	id: string;
}

/**
 * The oldest finished rides past the window, after `($3, $4)` within one
 * pass. $1 days, $2 limit, $3 updated_at text or null, $4 id.
 */
const CANDIDATES_SQL = `
SELECT id, updated_at::text AS at FROM orders
WHERE status IN (${FINISHED_SQL}) AND updated_at < now() - make_interval(days => $1::int)
  AND ($3::timestamptz IS NULL OR (updated_at, id) > ($3::timestamptz, $4::text))
ORDER BY updated_at, id
LIMIT $2`;

/**
 * Removes the named rides with their events and feedback, in one statement
 * (one transaction). The rides are locked `FOR UPDATE SKIP LOCKED` and
 * re-checked (finished, past the window): another instance's pass removing
 * the same rides is skipped, never waited for. $1 ids, $2 days.
 */
const REMOVE_SQL = `
WITH doomed AS (
  SELECT id FROM orders
  WHERE id = ANY($1::text[]) AND status IN (${FINISHED_SQL}) AND updated_at < now() - make_interval(days => $2::int)
  FOR UPDATE SKIP LOCKED
), events AS (
  DELETE FROM ride_events e USING doomed WHERE e.order_id = doomed.id RETURNING 1
), feedback_rows AS (
  DELETE FROM feedback f USING doomed WHERE f.order_id = doomed.id RETURNING 1
)
DELETE FROM orders o USING doomed WHERE o.id = doomed.id
RETURNING o.id, (SELECT count(*) FROM events)::int AS events`;

export class OrdersRetentionRepo {
	constructor(private readonly db: Db) {}

	async finishedBefore(days: number, limit: number, after: FinishedKey | undefined): Promise<FinishedKey[]> {
		return this.db.rows<FinishedKey>(CANDIDATES_SQL, [days, limit, after?.at ?? null, after?.id ?? ""]);
	}

	/** The ids removed. */
	async remove(ids: string[], days: number): Promise<string[]> {
		if (ids.length === 0) return [];
		return (await this.db.rows<{ id: string }>(REMOVE_SQL, [ids, days])).map((r) => r.id);
	}
}
