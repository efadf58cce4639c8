import type { Migration } from "../../../mixins/db.mixin";
import { driverTokensMigration } from "./004-driver-tokens";
import { presenceMigration } from "./005-presence";
import { driverTokenExpiryMigration } from "./006-driver-token-expiry";
import { auditMigration } from "./007-audit";
import { retentionMigration } from "./008-retention";
import { sandboxManualMigration } from "./009-sandbox-manual";
import { scheduledRidesMigration } from "./010-scheduled-rides";
import { drivenDistanceMigration } from "./011-driven-distance";

/**
 * Tables of the dispatch service: `drivers` (the fleet), `dispatch_rides`
 * (dispatch's view of each ride it matches and follows: phase, deadlines,
 * who declined) and `dispatch_offers` (one row per offer to a driver). All
 * progress lives here, not in memory, so any dispatch instance — or a
 * restarted one — carries on with any ride.
 */
export const migrations: Migration[] = [
	{
		name: "001-drivers",
		async up(_qi, sequelize) {
			await sequelize.query(`
				CREATE TABLE drivers (
					id text PRIMARY KEY,
					name text NOT NULL,
					phone text NOT NULL UNIQUE,
					vehicle_number text NOT NULL,
					service_type text NOT NULL CHECK (service_type IN ('scooty','cab')),
					status text NOT NULL DEFAULT 'offline' CHECK (status IN ('offline','available','offered','on_trip')),
					-- The ride the driver is offered or on; set exactly in those two statuses.
					order_id text,
					lat double precision,
					lng double precision,
					heading double precision,
					location_at timestamptz,
					simulated boolean NOT NULL DEFAULT false,
					wrong_otp_count integer NOT NULL DEFAULT 0,
					-- Bumped by every change: the in-memory indexes apply a driver's changes in this order.
					rev bigint NOT NULL DEFAULT 1,
					created_at timestamptz NOT NULL DEFAULT now(),
					updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
					CONSTRAINT drivers_order_matches_status CHECK ((status IN ('offered','on_trip')) = (order_id IS NOT NULL)),
					CONSTRAINT drivers_online_has_location CHECK (status = 'offline' OR (lat IS NOT NULL AND lng IS NOT NULL))
				)`);
			// A ride is held by at most one driver at a time (offered or on it):
			// the database refuses a second, whatever the dispatch instances do.
			await sequelize.query("CREATE UNIQUE INDEX drivers_one_per_order ON drivers (order_id) WHERE order_id IS NOT NULL");
			// The index refresh reads recently changed drivers; the database fallback of matching reads available ones by area.
			await sequelize.query("CREATE INDEX drivers_updated_at ON drivers (updated_at)");
			await sequelize.query("CREATE INDEX drivers_available_area ON drivers (service_type, lat, lng) WHERE status = 'available'");

			await sequelize.query(`
				CREATE TABLE dispatch_rides (
					order_id text PRIMARY KEY,
					service_type text NOT NULL CHECK (service_type IN ('scooty','cab')),
					pickup_lat double precision NOT NULL,
					pickup_lng double precision NOT NULL,
					drop_lat double precision NOT NULL,
					drop_lng double precision NOT NULL,
					-- searching: needs a driver; accepting: an accept is being recorded by orders;
					-- ending: no_driver_found is being recorded; assigned: a driver is on it; closed: over.
					state text NOT NULL CHECK (state IN ('searching','accepting','ending','assigned','closed')),
					-- The order status dispatch last saw (orders is the truth), and that order's
					-- version and update time: an older snapshot never overwrites a newer one.
					order_status text NOT NULL,
					order_version integer NOT NULL DEFAULT 0,
					order_updated_at timestamptz,
					driver_id text,
					sandbox text,
					-- The dispatch timeout counts from here (restarts when a driver drops out).
					search_started_at timestamptz NOT NULL DEFAULT now(),
					next_match_at timestamptz NOT NULL DEFAULT now(),
					-- Drivers who declined, let the offer run out or dropped out: not asked again for this ride.
					excluded_driver_ids text[] NOT NULL DEFAULT '{}',
					drop_outs integer NOT NULL DEFAULT 0,
					-- When order_status was reached; the simulated fleet derives progress from it.
					phase_since timestamptz NOT NULL DEFAULT now(),
					-- Where the driver was when it accepted (start of the leg to the pickup).
					origin_lat double precision,
					origin_lng double precision,
					-- An accepting/ending call to orders counts as in flight until then.
					lease_until timestamptz,
					-- When the next location_updated is due (moving rides only).
					next_location_at timestamptz,
					created_at timestamptz NOT NULL DEFAULT now(),
					updated_at timestamptz NOT NULL DEFAULT now()
				)`);
			await sequelize.query("CREATE INDEX dispatch_rides_searching ON dispatch_rides (next_match_at) WHERE state = 'searching'");
			await sequelize.query("CREATE INDEX dispatch_rides_in_flight ON dispatch_rides (lease_until) WHERE state IN ('accepting','ending')");
			await sequelize.query("CREATE INDEX dispatch_rides_location_due ON dispatch_rides (next_location_at) WHERE state = 'assigned'");
			await sequelize.query("CREATE INDEX dispatch_rides_open ON dispatch_rides (state) WHERE state <> 'closed'");
			await sequelize.query("CREATE INDEX dispatch_rides_created_at ON dispatch_rides (created_at)");

			await sequelize.query(`
				CREATE TABLE dispatch_offers (
					id text PRIMARY KEY,
					order_id text NOT NULL,
					driver_id text NOT NULL,
					state text NOT NULL CHECK (state IN ('pending','accepted','declined','expired','cancelled')),
					distance_m integer NOT NULL,
					eta integer NOT NULL,
					expires_at timestamptz NOT NULL,
					created_at timestamptz NOT NULL DEFAULT now(),
					responded_at timestamptz
				)`);
			// One open offer per ride and per driver, whatever the dispatch instances do.
			await sequelize.query("CREATE UNIQUE INDEX dispatch_offers_pending_order ON dispatch_offers (order_id) WHERE state = 'pending'");
			await sequelize.query("CREATE UNIQUE INDEX dispatch_offers_pending_driver ON dispatch_offers (driver_id) WHERE state = 'pending'");
			await sequelize.query("CREATE INDEX dispatch_offers_pending_expiry ON dispatch_offers (expires_at) WHERE state = 'pending'");
			await sequelize.query("CREATE INDEX dispatch_offers_order ON dispatch_offers (order_id, created_at)");
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP TABLE IF EXISTS dispatch_offers, dispatch_rides, drivers");
		},
	},
	{
		name: "002-ride-partner",
		async up(_qi, sequelize) {
			// The partner a ride is for: surge counts each partner's searching rides only up to a cap.
			await sequelize.query("ALTER TABLE dispatch_rides ADD COLUMN partner_id text");
		},
		async down(_qi, sequelize) {
			await sequelize.query("ALTER TABLE dispatch_rides DROP COLUMN IF EXISTS partner_id");
		},
	},
	{
		name: "003-modes",
		async up(_qi, sequelize) {
			// Drivers and rides have a mode: test rides go only to test drivers (the
			// simulated fleet), live rides only to live drivers. Drivers registered
			// before modes: simulated ones are test, the others live. Rides mirrored
			// before modes came from sandbox-only deployments: test.
			await sequelize.query("ALTER TABLE drivers ADD COLUMN mode text NOT NULL DEFAULT 'live' CHECK (mode IN ('test','live'))");
			await sequelize.query("UPDATE drivers SET mode = 'test' WHERE simulated");
			await sequelize.query("ALTER TABLE dispatch_rides ADD COLUMN mode text NOT NULL DEFAULT 'test' CHECK (mode IN ('test','live'))");
			// The database fallback of matching reads available drivers of one mode by area.
			await sequelize.query("DROP INDEX IF EXISTS drivers_available_area");
			await sequelize.query("CREATE INDEX drivers_available_area ON drivers (mode, service_type, lat, lng) WHERE status = 'available'");
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP INDEX IF EXISTS drivers_available_area");
			await sequelize.query("CREATE INDEX drivers_available_area ON drivers (service_type, lat, lng) WHERE status = 'available'");
			await sequelize.query("ALTER TABLE dispatch_rides DROP COLUMN IF EXISTS mode");
			await sequelize.query("ALTER TABLE drivers DROP COLUMN IF EXISTS mode");
		},
	},
	// The driver API's tokens (004; 003 is dispatch's own).
	driverTokensMigration,
	presenceMigration,
	driverTokenExpiryMigration,
	auditMigration,
	retentionMigration,
	sandboxManualMigration,
	scheduledRidesMigration,
	drivenDistanceMigration,
];
