import type { Migration } from "../../../mixins/db.mixin";
import { claimPerPartnerHostMigration } from "./005-claim-per-partner-host";
import { slotsPerModeMigration } from "./006-slots-per-mode";

/**
 * Tables of the notifications service: the delivery state of every ride
 * event (`webhook_deliveries`, one row per `ride_events` row, keyed by the
 * event id) and every try made (`webhook_attempts`). `ride_events` itself
 * belongs to orders and is only read here.
 */
export const migrations: Migration[] = [
	{
		name: "001-webhook-deliveries",
		async up(_qi, sequelize) {
			await sequelize.query(`
				CREATE TABLE webhook_deliveries (
					event_id text PRIMARY KEY,
					order_id text NOT NULL,
					partner_id text NOT NULL,
					kind text NOT NULL CHECK (kind IN ('status','location')),
					sequence integer NOT NULL,
					event_position bigint NOT NULL,
					occurred_at timestamptz NOT NULL,
					event_created_at timestamptz NOT NULL,
					state text NOT NULL DEFAULT 'pending'
						CHECK (state IN ('pending','delivered','failed','superseded','expired')),
					-- every try ever made, for operators and /ride/events
					attempts integer NOT NULL DEFAULT 0,
					-- tries since ingest or the last replay: drives the retry schedule
					round_attempts integer NOT NULL DEFAULT 0,
					first_attempt_at timestamptz,
					next_attempt_at timestamptz NOT NULL DEFAULT now(),
					-- the claim: who holds the event in flight, until when, and the claim's fencing token
					lease_token uuid,
					lease_owner text,
					lease_until timestamptz,
					last_status integer,
					last_error text,
					last_attempt_at timestamptz,
					delivered_at timestamptz,
					finished_at timestamptz,
					ingested_at timestamptz NOT NULL DEFAULT now()
				)`);
			// The claim scans due pending events; the partial index stays as small as the backlog.
			await sequelize.query("CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending'");
			// Per-order ordering checks and superseding.
			await sequelize.query("CREATE INDEX webhook_deliveries_order ON webhook_deliveries (order_id, sequence)");
			// The ingest window (max ingested position, and its value some time ago at start-up).
			await sequelize.query("CREATE INDEX webhook_deliveries_position ON webhook_deliveries (event_position)");
			// replayFailed { partnerId, since }.
			await sequelize.query("CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (partner_id, occurred_at) WHERE state = 'failed'");

			await sequelize.query(`
				CREATE TABLE webhook_attempts (
					id text PRIMARY KEY,
					event_id text NOT NULL REFERENCES webhook_deliveries (event_id) ON DELETE CASCADE,
					attempt integer NOT NULL,
					started_at timestamptz NOT NULL,
					duration_ms integer NOT NULL,
					http_status integer,
					outcome text NOT NULL
						CHECK (outcome IN ('delivered','TIMEOUT','CONNECTION','DNS','BLOCKED_ADDRESS','HTTP_3XX','HTTP_4XX','HTTP_5XX')),
					response_snippet text,
					instance text NOT NULL
				)`);
			await sequelize.query("CREATE INDEX webhook_attempts_event ON webhook_attempts (event_id, started_at)");
			await sequelize.query("CREATE INDEX webhook_attempts_started ON webhook_attempts (started_at)");
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP TABLE IF EXISTS webhook_attempts, webhook_deliveries");
		},
	},
	{
		// Fair claiming (per partner, per host, per kind), the per-host circuit breaker, and the safety-net ingest's cursor.
		name: "002-fair-delivery",
		async up(_qi, sequelize) {
			// host:port of the event's webhook URL (WEBHOOK_HOST_SQL in notifications.repo.ts), set at ingest.
			await sequelize.query("ALTER TABLE webhook_deliveries ADD COLUMN host text NOT NULL DEFAULT ''");
			await sequelize.query(`
				DO $$ BEGIN
					IF to_regclass('ride_events') IS NOT NULL THEN
						UPDATE webhook_deliveries d
						SET host = lower(COALESCE(substring(e.webhook_url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?([^/?#]*)'), ''))
						FROM ride_events e WHERE e.id = d.event_id AND d.state = 'pending';
					END IF;
				END $$`);
			// The claim walks the (partner, host) pairs with pending work and reads each pair's due events.
			await sequelize.query(
				"CREATE INDEX webhook_deliveries_fair ON webhook_deliveries (kind, partner_id, host, next_attempt_at) WHERE state = 'pending'",
			);
			// Tries in flight per partner and per host (as small as what is in flight).
			await sequelize.query(
				"CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (partner_id, host, kind) WHERE state = 'pending' AND lease_token IS NOT NULL",
			);
			await sequelize.query(`
				CREATE TABLE webhook_hosts (
					host text PRIMARY KEY,
					failures integer NOT NULL DEFAULT 0,
					opens integer NOT NULL DEFAULT 0,
					open_until timestamptz,
					updated_at timestamptz NOT NULL DEFAULT now()
				)`);
			await sequelize.query("CREATE TABLE webhook_ingest_cursor (name text PRIMARY KEY, position bigint NOT NULL)");
			// Positions already ingested count as swept (a row still missing below them predates the safety net).
			await sequelize.query(
				"INSERT INTO webhook_ingest_cursor (name, position) SELECT 'safety_net', COALESCE(max(event_position), 0) FROM webhook_deliveries",
			);
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP TABLE IF EXISTS webhook_hosts, webhook_ingest_cursor");
			await sequelize.query("DROP INDEX IF EXISTS webhook_deliveries_fair, webhook_deliveries_leased");
			await sequelize.query("ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS host");
		},
	},
	{
		// The claim made cheap (docs/ARCHITECTURE.md, "The claim"; measured with bench/webhook-claim.ts):
		//  - an index in the claim's own order per (kind, partner, host): each pair's due events are read in
		//    (next_attempt_at, event_position) order and the scan stops at its limit, where the old index made it
		//    check the order rule for the whole backlog and sort it (16 ms at 2,000 pending, growing with it);
		//    it also serves the walk over the pairs, so it replaces webhook_deliveries_fair;
		//  - the claim as a function (notifications.repo.ts calls it): one round trip instead of four (begin, lock,
		//    claim, commit), a plan kept per session instead of re-planning the large statement on every call
		//    (3-14 ms of planning per claim), and both kinds in one call; a kind with nothing pending is skipped at
		//    the cost of one index probe. The statement is 002's CLAIM_SQL, unchanged in meaning. A later change
		//    is a new function (_v2) in a new migration, so instances of both versions can run side by side during
		//    a rollout.
		name: "003-fast-claim",
		async up(_qi, sequelize) {
			await sequelize.query(
				"CREATE INDEX webhook_deliveries_claim ON webhook_deliveries (kind, partner_id, host, next_attempt_at, event_position) WHERE state = 'pending'",
			);
			await sequelize.query("DROP INDEX IF EXISTS webhook_deliveries_fair");
			await sequelize.query(`
				CREATE FUNCTION webhook_claim_v1(
					p_status_limit integer, p_location_limit integer, p_token uuid, p_owner text, p_lease_ms double precision,
					p_location_ttl_ms double precision, p_partner_cap integer, p_host_cap integer)
				RETURNS TABLE (event_id text, order_id text, partner_id text, kind text, host text, sequence integer, attempts integer,
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
					-- One claim at a time across instances, so the in-flight counts below are exact. Taken before the
					-- statements below take their snapshots (each statement of a function gets a fresh one), so they see
					-- every claim committed before ours.
					PERFORM pg_advisory_xact_lock(716270001);
					FOREACH k IN ARRAY ARRAY['status', 'location'] LOOP
						lim := CASE WHEN k = 'status' THEN p_status_limit ELSE p_location_limit END;
						CONTINUE WHEN lim <= 0;
						CONTINUE WHEN NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.state = 'pending' AND d.kind = k);
						RETURN QUERY
						WITH RECURSIVE pairs AS (
						  (SELECT d.partner_id, d.host FROM webhook_deliveries d WHERE d.state = 'pending' AND d.kind = k ORDER BY d.partner_id, d.host LIMIT 1)
						  UNION ALL
						  SELECT n.partner_id, n.host FROM pairs p CROSS JOIN LATERAL (
						    SELECT d.partner_id, d.host FROM webhook_deliveries d
						    WHERE d.state = 'pending' AND d.kind = k AND (d.partner_id, d.host) > (p.partner_id, p.host)
						    ORDER BY d.partner_id, d.host LIMIT 1) n
						), leased AS (
						  SELECT d.partner_id, d.host, d.kind FROM webhook_deliveries d
						  WHERE d.state = 'pending' AND d.lease_token IS NOT NULL AND d.lease_until > now()
						), leased_partner AS (
						  SELECT l.partner_id, count(*)::int AS n FROM leased l WHERE l.kind = k GROUP BY l.partner_id
						), leased_host AS (
						  SELECT l.host, (count(*) FILTER (WHERE l.kind = k))::int AS n, count(*)::int AS n_all FROM leased l GROUP BY l.host
						), room AS (
						  SELECT pr.partner_id, pr.host,
						         GREATEST(0, p_partner_cap - COALESCE(lp.n, 0)) AS partner_room,
						         CASE WHEN b.open_until IS NULL THEN GREATEST(0, p_host_cap - COALESCE(lh.n, 0))
						              WHEN b.open_until > now() THEN 0
						              ELSE GREATEST(0, 1 - COALESCE(lh.n_all, 0)) END AS host_room
						  FROM pairs pr
						  LEFT JOIN leased_partner lp ON lp.partner_id = pr.partner_id
						  LEFT JOIN leased_host lh ON lh.host = pr.host
						  LEFT JOIN webhook_hosts b ON b.host = pr.host
						), cand AS (
						  SELECT c.event_id, c.partner_id, c.host, c.next_attempt_at, c.event_position, r.partner_room, r.host_room
						  FROM room r CROSS JOIN LATERAL (
						    SELECT d.event_id, d.partner_id, d.host, d.next_attempt_at, d.event_position
						    FROM webhook_deliveries d
						    WHERE d.state = 'pending' AND d.kind = k AND d.partner_id = r.partner_id AND d.host = r.host
						      AND d.next_attempt_at <= now()
						      AND (d.lease_until IS NULL OR d.lease_until < now())
						      AND NOT EXISTS (
						        SELECT 1 FROM ride_events e
						        LEFT JOIN webhook_deliveries p ON p.event_id = e.id
						        WHERE e.order_id = d.order_id AND e.kind = 'status' AND e.sequence < d.sequence
						          AND (p.event_id IS NULL OR p.state = 'pending'))
						      AND (d.kind = 'status' OR (
						        d.event_created_at >= now() - make_interval(secs => p_location_ttl_ms / 1000)
						        AND NOT EXISTS (SELECT 1 FROM ride_events n WHERE n.order_id = d.order_id AND n.sequence > d.sequence)))
						    ORDER BY d.next_attempt_at, d.event_position
						    LIMIT LEAST(r.partner_room, r.host_room, lim)
						  ) c
						  WHERE r.partner_room > 0 AND r.host_room > 0
						), by_partner AS (
						  SELECT cand.*, row_number() OVER (PARTITION BY cand.partner_id ORDER BY cand.next_attempt_at, cand.event_position) AS p_rank FROM cand
						), by_host AS (
						  SELECT bp.*, row_number() OVER (PARTITION BY bp.host ORDER BY bp.p_rank, bp.next_attempt_at, bp.event_position) AS h_rank
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
						  RETURNING w.event_id, w.order_id, w.partner_id, w.kind, w.host, w.sequence, w.attempts, w.round_attempts,
						            w.first_attempt_at, w.occurred_at, w.event_created_at, e.webhook_url, e.payload
						)
						SELECT * FROM leased_now;
					END LOOP;
				END
				$fn$`);
		},
		async down(_qi, sequelize) {
			await sequelize.query(
				"DROP FUNCTION IF EXISTS webhook_claim_v1(integer, integer, uuid, text, double precision, double precision, integer, integer)",
			);
			await sequelize.query(
				"CREATE INDEX IF NOT EXISTS webhook_deliveries_fair ON webhook_deliveries (kind, partner_id, host, next_attempt_at) WHERE state = 'pending'",
			);
			await sequelize.query("DROP INDEX IF EXISTS webhook_deliveries_claim");
		},
	},
	{
		// webhook_claim_v2: v1 (003) plus a look before the lock. A call with nothing due and free (not leased) of a
		// kind with free slots answers at once, without the lock and without the claim statement; v1 only skipped a
		// kind with nothing pending at all, and in-flight events are pending, so at 500 events/s the tick after each
		// finished try ran the whole claim under the lock for nothing. Same claim otherwise; v1 stays for instances
		// still running the previous version during a rollout (a later migration may drop it).
		name: "004-claim-look-first",
		async up(_qi, sequelize) {
			await sequelize.query(`
				CREATE FUNCTION webhook_claim_v2(
					p_status_limit integer, p_location_limit integer, p_token uuid, p_owner text, p_lease_ms double precision,
					p_location_ttl_ms double precision, p_partner_cap integer, p_host_cap integer)
				RETURNS TABLE (event_id text, order_id text, partner_id text, kind text, host text, sequence integer, attempts integer,
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
						WITH RECURSIVE pairs AS (
						  (SELECT d.partner_id, d.host FROM webhook_deliveries d WHERE d.state = 'pending' AND d.kind = k ORDER BY d.partner_id, d.host LIMIT 1)
						  UNION ALL
						  SELECT n.partner_id, n.host FROM pairs p CROSS JOIN LATERAL (
						    SELECT d.partner_id, d.host FROM webhook_deliveries d
						    WHERE d.state = 'pending' AND d.kind = k AND (d.partner_id, d.host) > (p.partner_id, p.host)
						    ORDER BY d.partner_id, d.host LIMIT 1) n
						), leased AS (
						  SELECT d.partner_id, d.host, d.kind FROM webhook_deliveries d
						  WHERE d.state = 'pending' AND d.lease_token IS NOT NULL AND d.lease_until > now()
						), leased_partner AS (
						  SELECT l.partner_id, count(*)::int AS n FROM leased l WHERE l.kind = k GROUP BY l.partner_id
						), leased_host AS (
						  SELECT l.host, (count(*) FILTER (WHERE l.kind = k))::int AS n, count(*)::int AS n_all FROM leased l GROUP BY l.host
						), room AS (
						  SELECT pr.partner_id, pr.host,
						         GREATEST(0, p_partner_cap - COALESCE(lp.n, 0)) AS partner_room,
						         CASE WHEN b.open_until IS NULL THEN GREATEST(0, p_host_cap - COALESCE(lh.n, 0))
						              WHEN b.open_until > now() THEN 0
						              ELSE GREATEST(0, 1 - COALESCE(lh.n_all, 0)) END AS host_room
						  FROM pairs pr
						  LEFT JOIN leased_partner lp ON lp.partner_id = pr.partner_id
						  LEFT JOIN leased_host lh ON lh.host = pr.host
						  LEFT JOIN webhook_hosts b ON b.host = pr.host
						), cand AS (
						  SELECT c.event_id, c.partner_id, c.host, c.next_attempt_at, c.event_position, r.partner_room, r.host_room
						  FROM room r CROSS JOIN LATERAL (
						    SELECT d.event_id, d.partner_id, d.host, d.next_attempt_at, d.event_position
						    FROM webhook_deliveries d
						    WHERE d.state = 'pending' AND d.kind = k AND d.partner_id = r.partner_id AND d.host = r.host
						      AND d.next_attempt_at <= now()
						      AND (d.lease_until IS NULL OR d.lease_until < now())
						      AND NOT EXISTS (
						        SELECT 1 FROM ride_events e
						        LEFT JOIN webhook_deliveries p ON p.event_id = e.id
						        WHERE e.order_id = d.order_id AND e.kind = 'status' AND e.sequence < d.sequence
						          AND (p.event_id IS NULL OR p.state = 'pending'))
						      AND (d.kind = 'status' OR (
						        d.event_created_at >= now() - make_interval(secs => p_location_ttl_ms / 1000)
						        AND NOT EXISTS (SELECT 1 FROM ride_events n WHERE n.order_id = d.order_id AND n.sequence > d.sequence)))
						    ORDER BY d.next_attempt_at, d.event_position
						    LIMIT LEAST(r.partner_room, r.host_room, lim)
						  ) c
						  WHERE r.partner_room > 0 AND r.host_room > 0
						), by_partner AS (
						  SELECT cand.*, row_number() OVER (PARTITION BY cand.partner_id ORDER BY cand.next_attempt_at, cand.event_position) AS p_rank FROM cand
						), by_host AS (
						  SELECT bp.*, row_number() OVER (PARTITION BY bp.host ORDER BY bp.p_rank, bp.next_attempt_at, bp.event_position) AS h_rank
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
						  RETURNING w.event_id, w.order_id, w.partner_id, w.kind, w.host, w.sequence, w.attempts, w.round_attempts,
						            w.first_attempt_at, w.occurred_at, w.event_created_at, e.webhook_url, e.payload
						)
						SELECT * FROM leased_now;
					END LOOP;
				END
				$fn$`);
		},
		async down(_qi, sequelize) {
			await sequelize.query(
				"DROP FUNCTION IF EXISTS webhook_claim_v2(integer, integer, uuid, text, double precision, double precision, integer, integer)",
			);
		},
	},
	claimPerPartnerHostMigration,
	slotsPerModeMigration,
	{
		/**
		 * Retention (retention.repo.ts): finished deliveries oldest first, so a
		 * pass reads only what it removes; pending ones are not in the index.
		 */
		name: "007-retention",
		async up(_qi, sequelize) {
			await sequelize.query("CREATE INDEX IF NOT EXISTS webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE state <> 'pending'");
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP INDEX IF EXISTS webhook_deliveries_finished");
		},
	},
];
