import type { Migration } from "../../../mixins/db.mixin";

/**
 * The distance a started ride's driver drove (driven-distance.ts): metres
 * summed over the positions sampled at each location tick, from the pickup
 * on, and the last position sampled. Orders meters a ride that ends away
 * from its booked drop from it (orders' final-fare.ts).
 */
export const drivenDistanceMigration: Migration = {
	name: "011-driven-distance",
	async up(_qi, sequelize) {
		await sequelize.query(`
			ALTER TABLE dispatch_rides
				ADD COLUMN IF NOT EXISTS driven_m double precision NOT NULL DEFAULT 0,
				ADD COLUMN IF NOT EXISTS driven_lat double precision,
				ADD COLUMN IF NOT EXISTS driven_lng double precision`);
	},
	async down(_qi, sequelize) {
		await sequelize.query("ALTER TABLE dispatch_rides DROP COLUMN IF EXISTS driven_m, DROP COLUMN IF EXISTS driven_lat, DROP COLUMN IF EXISTS driven_lng");
	},
};
