import type { Migration } from "../../../mixins/db.mixin";

/**
 * The cancellation policy and the final fare (cancel-policy.ts,
 * final-fare.ts): the terms a ride was booked on, when its driver accepted,
 * arrived and started (the grace period, waiting at the pickup, the trip's
 * duration), what a cancel cost and why, and the final fare once dropped.
 * All nullable: rides booked before keep working (no terms = no fixed fee,
 * the quote holds).
 */
export const fareTermsMigration: Migration = {
	name: "008-fare-terms",
	async up(_qi, sequelize) {
		await sequelize.query(`
			ALTER TABLE orders
				ADD COLUMN IF NOT EXISTS fare_terms jsonb,
				ADD COLUMN IF NOT EXISTS accepted_at timestamptz,
				ADD COLUMN IF NOT EXISTS arrived_at timestamptz,
				ADD COLUMN IF NOT EXISTS started_at timestamptz,
				ADD COLUMN IF NOT EXISTS cancellation_fee_paise integer CHECK (cancellation_fee_paise >= 0),
				ADD COLUMN IF NOT EXISTS cancellation_rule text,
				ADD COLUMN IF NOT EXISTS cancel_reason_code text,
				ADD COLUMN IF NOT EXISTS final_fare jsonb`);
	},
	async down(_qi, sequelize) {
		await sequelize.query(`
			ALTER TABLE orders
				DROP COLUMN IF EXISTS fare_terms, DROP COLUMN IF EXISTS accepted_at, DROP COLUMN IF EXISTS arrived_at,
				DROP COLUMN IF EXISTS started_at, DROP COLUMN IF EXISTS cancellation_fee_paise, DROP COLUMN IF EXISTS cancellation_rule,
				DROP COLUMN IF EXISTS cancel_reason_code, DROP COLUMN IF EXISTS final_fare`);
	},
};
