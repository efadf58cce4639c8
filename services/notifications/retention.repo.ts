import type { Db } from "../../mixins/db.mixin";

/**
 * Retention of webhook deliveries (lib/retention.ts has the pass), and the
 * question orders' retention asks before removing a ride. `ride_events` is
 * orders' table, only read here.
 */

/**
 * Removes finished deliveries (delivered, failed, superseded, expired) that
 * finished more than $1 days ago, oldest first, at most $2, with their
 * attempts (ON DELETE CASCADE, through `webhook_attempts_event`). Pending
 * ones are never removed, whatever their age. `FOR UPDATE SKIP LOCKED`:
 * another instance's pass takes other rows. The partial index
 * `webhook_deliveries_finished` (migration 007) keeps the read to the rows
 * removed.
 */
const REMOVE_FINISHED_SQL = `
WITH doomed AS (
  SELECT event_id FROM webhook_deliveries
  WHERE state <> 'pending' AND finished_at < now() - make_interval(days => $1::int)
  ORDER BY finished_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
DELETE FROM webhook_deliveries d USING doomed WHERE d.event_id = doomed.event_id
RETURNING d.event_id`;

/**
 * The rides among $1 that may not be removed yet: one of their events is
 * pending, or is not taken in yet (no delivery row and above the safety
 * net's cursor; at or below it every event was taken in, so a missing row
 * there is one retention removed after it finished).
 */
const UNDELIVERED_ORDERS_SQL = `
SELECT DISTINCT e.order_id FROM ride_events e
LEFT JOIN webhook_deliveries d ON d.event_id = e.id
WHERE e.order_id = ANY($1::text[])
  AND (d.state = 'pending'
       OR (d.event_id IS NULL
           AND e.position > (SELECT COALESCE(max(position), 0) FROM webhook_ingest_cursor WHERE name = 'safety_net')))`;

export class NotificationsRetentionRepo {
	constructor(private readonly db: Db) {}

	/** How many deliveries went. */
	async removeFinished(days: number, limit: number): Promise<number> {
		return (await this.db.rows<{ event_id: string }>(REMOVE_FINISHED_SQL, [days, limit])).length;
	}

	async undeliveredOrders(orderIds: string[]): Promise<string[]> {
		if (orderIds.length === 0) return [];
		return (await this.db.rows<{ order_id: string }>(UNDELIVERED_ORDERS_SQL, [orderIds])).map((r) => r.order_id);
	}
}
