import type { Migration } from "../../../mixins/db.mixin";

/**
 * Retention (retention.repo.ts): finished offers and closed rides oldest
 * first, so a pass reads only what it removes; pending offers and open
 * rides are not in these indexes.
 */
export const retentionMigration: Migration = {
	name: "008-retention",
	async up(_qi, sequelize) {
		await sequelize.query("CREATE INDEX IF NOT EXISTS dispatch_offers_finished ON dispatch_offers (created_at) WHERE state <> 'pending'");
		await sequelize.query("CREATE INDEX IF NOT EXISTS dispatch_rides_closed ON dispatch_rides (updated_at) WHERE state = 'closed'");
	},
	async down(_qi, sequelize) {
		await sequelize.query("DROP INDEX IF EXISTS dispatch_offers_finished");
		await sequelize.query("DROP INDEX IF EXISTS dispatch_rides_closed");
	},
};
