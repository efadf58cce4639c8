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
];
