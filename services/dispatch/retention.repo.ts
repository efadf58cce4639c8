import type { Db } from "../../mixins/db.mixin";

/**
 * Retention of dispatch's history (lib/retention.ts has the pass): answered,
 * expired or cancelled offers, and closed ride mirrors, older than
 * DISPATCH_RETENTION_DAYS. Pending offers and open rides are never removed;
 * nor a closed ride a driver still points at. Both statements lock what they
 * remove `FOR UPDATE SKIP LOCKED` (another instance's pass takes other rows)
 * and read through partial indexes of finished rows (migration 008), so a
 * pass costs what it removes.
 */

/** $1 days, $2 limit. */
const REMOVE_OFFERS_SQL = `
WITH doomed AS (
  SELECT id FROM dispatch_offers
  WHERE state <> 'pending' AND created_at < now() - make_interval(days => $1::int)
  ORDER BY created_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
DELETE FROM dispatch_offers o USING doomed WHERE o.id = doomed.id
RETURNING o.id`;

/** $1 days, $2 limit. */
const REMOVE_RIDES_SQL = `
WITH doomed AS (
  SELECT order_id FROM dispatch_rides r
  WHERE state = 'closed' AND updated_at < now() - make_interval(days => $1::int)
    AND NOT EXISTS (SELECT 1 FROM drivers d WHERE d.order_id = r.order_id)
  ORDER BY updated_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
DELETE FROM dispatch_rides r USING doomed WHERE r.order_id = doomed.order_id
RETURNING r.order_id`;

export class DispatchRetentionRepo {
	constructor(private readonly db: Db) {}

	/** One batch of each: how many went, and the larger of the two (a full one means more may be left). */
	async removeBatch(days: number, limit: number): Promise<{ removed: number; scanned: number }> {
		const offers = (await this.db.rows(REMOVE_OFFERS_SQL, [days, limit])).length;
		const rides = (await this.db.rows(REMOVE_RIDES_SQL, [days, limit])).length;
		return { removed: offers + rides, scanned: Math.max(offers, rides) };
	}
}
