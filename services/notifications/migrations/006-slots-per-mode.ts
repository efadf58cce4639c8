import type { Migration } from "../../../mixins/db.mixin";

export const slotsPerModeMigration: Migration = {
	// Delivery slots per (partner, mode): webhook_claim_v4 is v3 (005) with the walk, the partner cap, the
	// round-robin and the host share made per (partner, mode) (the breaker stays per (partner, host), and so does
	// its half-open probe), so a test load test filling its slots, or a test endpoint that hangs, never holds back
	// the same partner's live webhooks. It also returns the ride's mode (ride_events.mode, orders migration 004),
	// which notifications signs by. webhook_deliveries.mode is copied from the ride event at ingest; pending and
	// failed rows from before take it from their ride event. v3 and its index stay for instances of the previous
	// version during a rollout (a later migration may drop them).
	name: "006-slots-per-mode",
	async up(_qi, sequelize) {
		await sequelize.query("ALTER TABLE webhook_deliveries ADD COLUMN mode text NOT NULL DEFAULT 'test' CHECK (mode IN ('test','live'))");
		await sequelize.query(`
				DO $$ BEGIN
					IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'ride_events' AND column_name = 'mode') THEN
						UPDATE webhook_deliveries d SET mode = e.mode
						FROM ride_events e WHERE e.id = d.event_id AND d.state IN ('pending', 'failed') AND e.mode <> d.mode;
					END IF;
				END $$`);
		await sequelize.query(
			"CREATE INDEX webhook_deliveries_claim_mode ON webhook_deliveries (kind, partner_id, mode, host, next_attempt_at, event_position) WHERE state = 'pending'",
		);
		await sequelize.query(`
				CREATE FUNCTION webhook_claim_v4(
					p_status_limit integer, p_location_limit integer, p_token uuid, p_owner text, p_lease_ms double precision,
					p_location_ttl_ms double precision, p_partner_cap integer, p_host_cap integer)
				RETURNS TABLE (event_id text, order_id text, partner_id text, mode text, kind text, host text, sequence integer, attempts integer,
					round_attempts integer, first_attempt_at timestamptz, occurred_at timestamptz, event_created_at timestamptz,
					webhook_url text, payload jsonb)
				LANGUAGE plpgsql
				-- The cached plan is generic from the first call: a custom plan would be re-planned for every call.
				SET plan_cache_mode = force_generic_plan
				AS $fn$
				#variable_conflict use_column
				DECLARE
					k text;
					lim integer;
				BEGIN
					-- Nothing due and free of a kind with free slots: answer at once, without the lock. Most calls are
					-- like this (a tick after every finished try, a poll with nothing due), and each used to run the whole
					-- claim under the lock. An event that becomes due just after this look is claimed by the next tick
					-- (its hint's, a finished try's or the poll's), as with any claim that ran a moment earlier.
					IF NOT ((p_status_limit > 0 AND EXISTS (
					           SELECT 1 FROM webhook_deliveries d WHERE d.state = 'pending' AND d.kind = 'status'
					             AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())))
					        OR (p_location_limit > 0 AND EXISTS (
					           SELECT 1 FROM webhook_deliveries d WHERE d.state = 'pending' AND d.kind = 'location'
					             AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())))) THEN
						RETURN;
					END IF;
					-- One claim at a time across instances, so the in-flight counts below are exact. Taken before the
					-- statements below take their snapshots (each statement of a function gets a fresh one), so they see
					-- every claim committed before ours.
					PERFORM pg_advisory_xact_lock(716270001);
					FOREACH k IN ARRAY ARRAY['status', 'location'] LOOP
						lim := CASE WHEN k = 'status' THEN p_status_limit ELSE p_location_limit END;
						CONTINUE WHEN lim <= 0;
						CONTINUE WHEN NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.state = 'pending' AND d.kind = k
						                            AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now()));
						RETURN QUERY
						-- v4: the walk is over (partner, mode, host), so each mode of a partner has its own slots.
						WITH RECURSIVE pairs AS (
						  (SELECT d.partner_id, d.mode, d.host FROM webhook_deliveries d WHERE d.state = 'pending' AND d.kind = k
						   ORDER BY d.partner_id, d.mode, d.host LIMIT 1)
						  UNION ALL
						  SELECT n.partner_id, n.mode, n.host FROM pairs p CROSS JOIN LATERAL (
						    SELECT d.partner_id, d.mode, d.host FROM webhook_deliveries d
						    WHERE d.state = 'pending' AND d.kind = k AND (d.partner_id, d.mode, d.host) > (p.partner_id, p.mode, p.host)
						    ORDER BY d.partner_id, d.mode, d.host LIMIT 1) n
						), leased AS (
						  SELECT d.partner_id, d.mode, d.host, d.kind FROM webhook_deliveries d
						  WHERE d.state = 'pending' AND d.lease_token IS NOT NULL AND d.lease_until > now()
						), leased_partner AS (
						  -- v4: the partner cap is counted per (partner, mode).
						  SELECT l.partner_id, l.mode, count(*)::int AS n FROM leased l WHERE l.kind = k GROUP BY l.partner_id, l.mode
						), leased_host AS (
						  -- v4: the host's share per (partner, mode, host): hung test tries never fill it for live ones.
						  SELECT l.partner_id, l.mode, l.host, (count(*) FILTER (WHERE l.kind = k))::int AS n
						  FROM leased l GROUP BY l.partner_id, l.mode, l.host
						), leased_probe AS (
						  -- The half-open breaker's single probe stays one per (partner, host), whatever the mode (the breaker's key).
						  SELECT l.partner_id, l.host, count(*)::int AS n_all FROM leased l GROUP BY l.partner_id, l.host
						), room AS (
						  SELECT pr.partner_id, pr.mode, pr.host,
						         GREATEST(0, p_partner_cap - COALESCE(lp.n, 0)) AS partner_room,
						         CASE WHEN b.open_until IS NULL THEN GREATEST(0, p_host_cap - COALESCE(lh.n, 0))
						              WHEN b.open_until > now() THEN 0
						              ELSE GREATEST(0, 1 - COALESCE(lq.n_all, 0)) END AS host_room
						  FROM pairs pr
						  LEFT JOIN leased_partner lp ON lp.partner_id = pr.partner_id AND lp.mode = pr.mode
						  LEFT JOIN leased_host lh ON lh.partner_id = pr.partner_id AND lh.mode = pr.mode AND lh.host = pr.host
						  LEFT JOIN leased_probe lq ON lq.partner_id = pr.partner_id AND lq.host = pr.host
						  -- v3: the breaker of this partner's deliveries to the host (webhook_partner_hosts), not the host's.
						  LEFT JOIN webhook_partner_hosts b ON b.partner_id = pr.partner_id AND b.host = pr.host
						), cand AS (
						  SELECT c.event_id, c.partner_id, c.mode, c.host, c.next_attempt_at, c.event_position, r.partner_room, r.host_room
						  FROM room r CROSS JOIN LATERAL (
						    SELECT d.event_id, d.partner_id, d.mode, d.host, d.next_attempt_at, d.event_position
						    FROM webhook_deliveries d
						    WHERE d.state = 'pending' AND d.kind = k AND d.partner_id = r.partner_id AND d.mode = r.mode AND d.host = r.host
						      AND d.next_attempt_at <= now()
						      AND (d.lease_until IS NULL OR d.lease_until < now())
						      AND NOT EXISTS (
						        SELECT 1 FROM ride_events e
						        LEFT JOIN webhook_deliveries p ON p.event_id = e.id
						        WHERE e.order_id = d.order_id AND e.kind = 'status' AND e.sequence < d.sequence
						          AND (p.event_id IS NULL OR p.state = 'pending'))
						      -- v3: a status event waits while an older location event of its ride is in flight, so the
						      -- position never reaches the partner after the later status (the try ends within its timeout;
						      -- then the position is no longer the newest event and is never tried again).
						      AND (d.kind = 'location' OR NOT EXISTS (
						        SELECT 1 FROM webhook_deliveries l
						        WHERE l.order_id = d.order_id AND l.kind = 'location' AND l.sequence < d.sequence
						          AND l.state = 'pending' AND l.lease_token IS NOT NULL AND l.lease_until > now()))
						      AND (d.kind = 'status' OR (
						        d.event_created_at >= now() - make_interval(secs => p_location_ttl_ms / 1000)
						        AND NOT EXISTS (SELECT 1 FROM ride_events n WHERE n.order_id = d.order_id AND n.sequence > d.sequence)))
						    ORDER BY d.next_attempt_at, d.event_position
						    LIMIT LEAST(r.partner_room, r.host_room, lim)
						  ) c
						  WHERE r.partner_room > 0 AND r.host_room > 0
						), by_partner AS (
						  SELECT cand.*, row_number() OVER (PARTITION BY cand.partner_id, cand.mode ORDER BY cand.next_attempt_at, cand.event_position) AS p_rank FROM cand
						), by_host AS (
						  SELECT bp.*, row_number() OVER (PARTITION BY bp.partner_id, bp.mode, bp.host ORDER BY bp.p_rank, bp.next_attempt_at, bp.event_position) AS h_rank
						  FROM by_partner bp WHERE bp.p_rank <= bp.partner_room
						), picked AS (
						  SELECT bh.event_id FROM by_host bh WHERE bh.h_rank <= bh.host_room ORDER BY bh.p_rank, bh.next_attempt_at, bh.event_position LIMIT lim
						), due AS (
						  SELECT d.event_id FROM webhook_deliveries d JOIN picked ON picked.event_id = d.event_id
						  WHERE d.state = 'pending' AND (d.lease_until IS NULL OR d.lease_until < now())
						  FOR UPDATE OF d SKIP LOCKED
						), leased_now AS (
						  UPDATE webhook_deliveries w
						  SET lease_token = p_token, lease_owner = p_owner, lease_until = now() + make_interval(secs => p_lease_ms / 1000)
						  FROM due, ride_events e
						  WHERE w.event_id = due.event_id AND e.id = w.event_id
						  RETURNING w.event_id, w.order_id, w.partner_id, e.mode, w.kind, w.host, w.sequence, w.attempts, w.round_attempts,
						            w.first_attempt_at, w.occurred_at, w.event_created_at, e.webhook_url, e.payload
						)
						SELECT * FROM leased_now;
					END LOOP;
				END
				$fn$`);
	},
	async down(_qi, sequelize) {
		await sequelize.query("DROP FUNCTION IF EXISTS webhook_claim_v4(integer, integer, uuid, text, double precision, double precision, integer, integer)");
		await sequelize.query("DROP INDEX IF EXISTS webhook_deliveries_claim_mode");
		await sequelize.query("ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS mode");
	},
};
