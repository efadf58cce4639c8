import type { Migration } from "../../../mixins/db.mixin";

/**
 * Sandbox advances of manual rides (services/orders/sandbox-advance.ts): a
 * short lease on the order, taken by one conditional update, so two advances
 * of one ride racing on any instances never take a step twice (the second
 * answers 409 CONFLICT). A crashed advance's lease simply runs out. Whether a
 * ride is manual is its stored `metadata.sandbox`; nothing to add for that.
 */
export const sandboxAdvanceMigration: Migration = {
	name: "006-sandbox-advance",
	async up(_qi, sequelize) {
		await sequelize.query("ALTER TABLE orders ADD COLUMN IF NOT EXISTS sandbox_advance_until timestamptz");
	},
	async down(_qi, sequelize) {
		await sequelize.query("ALTER TABLE orders DROP COLUMN IF EXISTS sandbox_advance_until");
	},
};
