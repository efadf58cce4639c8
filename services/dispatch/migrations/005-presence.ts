import type { Migration } from "../../../mixins/db.mixin";

/**
 * Presence: why an offline driver is offline (`offline_reason`: it said so,
 * its app went silent, its tokens were revoked; a silent one comes back with
 * its next position), and the index the silence sweep reads: available
 * drivers by when they were last heard of, so a sweep reads only the ones
 * gone silent, not the fleet.
 */
export const presenceMigration: Migration = {
	name: "005-presence",
	async up(_qi, sequelize) {
		await sequelize.query(`ALTER TABLE drivers ADD COLUMN offline_reason text CHECK (offline_reason IN ('driver','silent','revoked'))`);
		await sequelize.query("CREATE INDEX drivers_available_seen ON drivers (location_at) WHERE status = 'available'");
	},
	async down(_qi, sequelize) {
		await sequelize.query("DROP INDEX IF EXISTS drivers_available_seen");
		await sequelize.query("ALTER TABLE drivers DROP COLUMN IF EXISTS offline_reason");
	},
};
