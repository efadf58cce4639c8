import type { Migration } from "../../../mixins/db.mixin";

/**
 * Manual sandbox rides (`sandbox = 'manual'`, contracts/sandbox.ts) wait
 * until the partner advances them: matching never looks at them (so the
 * dispatch timeout never ends them) and the location cadence never sends for
 * them; their offers, no-driver ends and location events come from the
 * sandbox actions (sandbox-steps.ts). One trigger keeps them out of both
 * queues whichever statement writes the row (insert, backoff, wake-up,
 * search again after a drop-out): `next_match_at` stays at infinity and
 * `next_location_at` null, so the due-work indexes never hold them and
 * waiting costs nothing. The flag itself is the mirrored `sandbox` column.
 */
export const sandboxManualMigration: Migration = {
	name: "009-sandbox-manual",
	async up(_qi, sequelize) {
		await sequelize.query(`
			CREATE FUNCTION dispatch_rides_manual_waits() RETURNS trigger LANGUAGE plpgsql AS $fn$
			BEGIN
				NEW.next_match_at := 'infinity';
				NEW.next_location_at := NULL;
				RETURN NEW;
			END
			$fn$`);
		await sequelize.query(
			"CREATE TRIGGER dispatch_rides_manual_waits BEFORE INSERT OR UPDATE ON dispatch_rides FOR EACH ROW WHEN (NEW.sandbox = 'manual') EXECUTE FUNCTION dispatch_rides_manual_waits()",
		);
	},
	async down(_qi, sequelize) {
		await sequelize.query("DROP TRIGGER IF EXISTS dispatch_rides_manual_waits ON dispatch_rides");
		await sequelize.query("DROP FUNCTION IF EXISTS dispatch_rides_manual_waits()");
	},
};
