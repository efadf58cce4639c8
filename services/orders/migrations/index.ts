import type { Migration } from "../../../mixins/db.mixin";
import { sandboxAdvanceMigration } from "./006-sandbox-advance";
import { scheduledRidesMigration } from "./007-scheduled-rides";
import { fareTermsMigration } from "./008-fare-terms";

/**
 * Tables of the orders service: `orders` (the rides), `ride_events` (the
 * transactional outbox notifications reads), `feedback` and
 * `idempotency_keys` (create-order's Idempotency-Key claims).
 */
export const migrations: Migration[] = [
	{
		name: "001-orders",
		async up(_qi, sequelize) {
			await sequelize.query(`
				CREATE TABLE orders (
					id text PRIMARY KEY,
					partner_id text NOT NULL,
					rider_id text NOT NULL,
					status text NOT NULL CHECK (status IN ('searching','accepted','arrived','started','dropped','customer_cancelled','no_driver_found')),
					service_type text NOT NULL CHECK (service_type IN ('scooty','cab')),
					pickup jsonb NOT NULL,
					"drop" jsonb NOT NULL,
					fare_paise integer NOT NULL CHECK (fare_paise >= 0),
					currency text NOT NULL DEFAULT 'INR',
					fare_breakdown jsonb,
					distance integer NOT NULL,
					duration integer NOT NULL,
					quote_id text,
					otp text NOT NULL CHECK (otp ~ '^[0-9]{4}$'),
					webhook_url text NOT NULL,
					metadata jsonb,
					driver jsonb,
					driver_location jsonb,
					eta integer,
					version integer NOT NULL DEFAULT 0,
					cancel_reason text,
					created_at timestamptz NOT NULL DEFAULT now(),
					updated_at timestamptz NOT NULL DEFAULT now()
				)`);
			// The judge of "one active ride per rider": concurrent create-order
			// calls race on this index, and exactly one insert wins.
			await sequelize.query(`
				CREATE UNIQUE INDEX orders_one_active_per_rider ON orders (rider_id)
				WHERE status IN ('searching','accepted','arrived','started')`);
			// Dispatch's reconciliation sweep (orders.listActive).
			await sequelize.query(`
				CREATE INDEX orders_active_by_status ON orders (status, created_at)
				WHERE status IN ('searching','accepted','arrived','started')`);
			await sequelize.query("CREATE INDEX orders_partner_created ON orders (partner_id, created_at)");

			await sequelize.query(`
				CREATE TABLE ride_events (
					id text PRIMARY KEY,
					order_id text NOT NULL REFERENCES orders (id),
					partner_id text NOT NULL,
					sequence integer NOT NULL,
					kind text NOT NULL CHECK (kind IN ('status','location')),
					status text NOT NULL,
					webhook_url text NOT NULL,
					payload jsonb NOT NULL,
					occurred_at timestamptz NOT NULL,
					created_at timestamptz NOT NULL DEFAULT now(),
					position bigserial NOT NULL,
					CONSTRAINT ride_events_order_sequence UNIQUE (order_id, sequence)
				)`);
			// Notifications scans new rows by insertion order and by age.
			await sequelize.query("CREATE INDEX ride_events_position ON ride_events (position)");
			await sequelize.query("CREATE INDEX ride_events_created_at ON ride_events (created_at)");

			await sequelize.query(`
				CREATE TABLE feedback (
					order_id text PRIMARY KEY REFERENCES orders (id),
					partner_id text NOT NULL,
					rating smallint NOT NULL CHECK (rating BETWEEN 1 AND 5),
					comment text,
					tags text[] NOT NULL DEFAULT '{}',
					created_at timestamptz NOT NULL DEFAULT now()
				)`);

			await sequelize.query(`
				CREATE TABLE idempotency_keys (
					partner_id text NOT NULL,
					key text NOT NULL,
					request_hash text NOT NULL,
					state text NOT NULL CHECK (state IN ('running','done')),
					-- Identifies the call holding a running claim, so only it can finish or release it.
					claim_token text NOT NULL,
					response_status integer,
					response_body jsonb,
					created_at timestamptz NOT NULL DEFAULT now(),
					PRIMARY KEY (partner_id, key)
				)`);
			await sequelize.query("CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)");
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP TABLE IF EXISTS idempotency_keys, feedback, ride_events, orders");
		},
	},
	{
		name: "002-otp-tries-active-keyset",
		async up(_qi, sequelize) {
			// OTP tries per order (services/orders/otp.ts): shared by every orders and dispatch instance.
			await sequelize.query("ALTER TABLE orders ADD COLUMN otp_tries integer NOT NULL DEFAULT 0");
			// orders.listActive pages through the active rides by (created_at, id).
			await sequelize.query(`
				CREATE INDEX orders_active_keyset ON orders (created_at, id)
				WHERE status IN ('searching','accepted','arrived','started')`);
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP INDEX IF EXISTS orders_active_keyset");
			await sequelize.query("ALTER TABLE orders DROP COLUMN IF EXISTS otp_tries");
		},
	},
	{
		/**
		 * Key modes: every order belongs to the mode of the key that booked it
		 * (`test` rides the sandbox drives, `live` rides only real drivers).
		 * Orders from before are test orders. A rider may hold one active ride
		 * per mode, and an Idempotency-Key of a test call never replays for a
		 * live call of the same partner (nor the reverse).
		 */
		name: "003-order-modes",
		async up(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				await run("ALTER TABLE orders ADD COLUMN mode text NOT NULL DEFAULT 'test' CHECK (mode IN ('test','live'))");
				await run("DROP INDEX orders_one_active_per_rider");
				await run(`
					CREATE UNIQUE INDEX orders_one_active_per_rider ON orders (rider_id, mode)
					WHERE status IN ('searching','accepted','arrived','started')`);
				await run("ALTER TABLE idempotency_keys ADD COLUMN mode text NOT NULL DEFAULT 'test' CHECK (mode IN ('test','live'))");
				await run("ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey");
				await run("ALTER TABLE idempotency_keys ADD PRIMARY KEY (partner_id, mode, key)");
			});
		},
		async down(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				await run("DELETE FROM idempotency_keys WHERE mode = 'live'");
				await run("ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey");
				await run("ALTER TABLE idempotency_keys DROP COLUMN mode");
				await run("ALTER TABLE idempotency_keys ADD PRIMARY KEY (partner_id, key)");
				await run("DROP INDEX orders_one_active_per_rider");
				await run(`
					CREATE UNIQUE INDEX orders_one_active_per_rider ON orders (rider_id)
					WHERE status IN ('searching','accepted','arrived','started')`);
				await run("ALTER TABLE orders DROP COLUMN mode");
			});
		},
	},
	{
		/**
		 * The ride's mode on each ride event, so notifications signs a test
		 * ride's webhooks with the test secret, says the mode in the payload
		 * and the `Ride-Mode` header, and counts delivery slots per (partner,
		 * mode) without reading orders. Events from before take their order's
		 * mode. An instance of the previous version (during a rollout) inserts
		 * events without it: the trigger fills it from the order, so no event
		 * is ever signed for the wrong mode.
		 */
		name: "004-ride-event-modes",
		async up(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				await run("ALTER TABLE ride_events ADD COLUMN mode text CHECK (mode IN ('test','live'))");
				await run("UPDATE ride_events e SET mode = o.mode FROM orders o WHERE o.id = e.order_id");
				await run(`
					CREATE FUNCTION ride_events_fill_mode() RETURNS trigger LANGUAGE plpgsql AS $fn$
					BEGIN
						IF NEW.mode IS NULL THEN
							SELECT o.mode INTO NEW.mode FROM orders o WHERE o.id = NEW.order_id;
						END IF;
						RETURN NEW;
					END
					$fn$`);
				await run("CREATE TRIGGER ride_events_fill_mode BEFORE INSERT ON ride_events FOR EACH ROW EXECUTE FUNCTION ride_events_fill_mode()");
				await run("ALTER TABLE ride_events ALTER COLUMN mode SET NOT NULL");
			});
		},
		async down(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				await run("DROP TRIGGER IF EXISTS ride_events_fill_mode ON ride_events");
				await run("DROP FUNCTION IF EXISTS ride_events_fill_mode()");
				await run("ALTER TABLE ride_events DROP COLUMN IF EXISTS mode");
			});
		},
	},
	{
		/**
		 * Retention (services/orders/retention.repo.ts): the pass reads finished
		 * rides oldest first through this partial index, so its cost follows what
		 * it removes, never the size of `orders`; active rides are not in it.
		 */
		name: "005-retention",
		async up(_qi, sequelize) {
			await sequelize.query(`
				CREATE INDEX IF NOT EXISTS orders_finished_updated ON orders (updated_at, id)
				WHERE status IN ('dropped','customer_cancelled','no_driver_found')`);
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP INDEX IF EXISTS orders_finished_updated");
		},
	},
	sandboxAdvanceMigration,
	scheduledRidesMigration,
	fareTermsMigration,
];
