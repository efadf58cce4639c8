import type { Migration } from "../../../mixins/db.mixin";

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
			await sequelize.query("CREATE INDEX webhook_deliveries_fair ON webhook_deliveries (kind, partner_id, host, next_attempt_at) WHERE state = 'pending'");
			// Tries in flight per partner and per host (as small as what is in flight).
			await sequelize.query("CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (partner_id, host, kind) WHERE state = 'pending' AND lease_token IS NOT NULL");
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
];
