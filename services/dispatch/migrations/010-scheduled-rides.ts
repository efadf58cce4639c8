import type { Migration } from "../../../mixins/db.mixin";

/**
 * Scheduled rides: a ride whose dispatch orders started at its lead time
 * searches no later than `search_until` (its pickup time less
 * SCHEDULE_SEARCH_MARGIN_SECONDS), so its `no_driver_found` reaches the
 * partner before the pickup time. Null for rides booked now. The matching
 * indexes are unchanged: the deadline is read from rows already found.
 */
export const scheduledRidesMigration: Migration = {
	name: "010-scheduled-rides",
	async up(_qi, sequelize) {
		await sequelize.query("ALTER TABLE dispatch_rides ADD COLUMN IF NOT EXISTS search_until timestamptz");
	},
	async down(_qi, sequelize) {
		await sequelize.query("ALTER TABLE dispatch_rides DROP COLUMN IF EXISTS search_until");
	},
};
