import type { Migration } from "../../../mixins/db.mixin";

export const migrations: Migration[] = [
	{
		// A rider is identified by (partner, phone): the unique key is what makes
		// the upsert safe under concurrent create-order calls.
		name: "001-riders",
		async up(_qi, sequelize) {
			await sequelize.query(`
				CREATE TABLE riders (
					id text PRIMARY KEY,
					partner_id text NOT NULL,
					phone text NOT NULL,
					name text NOT NULL,
					email text,
					created_at timestamptz NOT NULL DEFAULT now(),
					updated_at timestamptz NOT NULL DEFAULT now(),
					CONSTRAINT riders_partner_phone_key UNIQUE (partner_id, phone)
				)`);
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP TABLE riders");
		},
	},
	{
		/**
		 * Riders per mode: one row per (partner, mode, phone), so a test booking
		 * (a load test, a leaked test key) never overwrites the stored name or
		 * email of the live rider with the same phone. Rows from before are
		 * `live`: they hold what live bookings wrote, and a test booking now
		 * makes its own row.
		 */
		name: "002-riders-per-mode",
		async up(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				await run("ALTER TABLE riders ADD COLUMN mode text NOT NULL DEFAULT 'live' CHECK (mode IN ('test','live'))");
				await run("ALTER TABLE riders DROP CONSTRAINT riders_partner_phone_key");
				await run("ALTER TABLE riders ADD CONSTRAINT riders_partner_mode_phone_key UNIQUE (partner_id, mode, phone)");
			});
		},
		async down(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				// Test riders go: (partner, phone) is unique again.
				await run("DELETE FROM riders WHERE mode = 'test'");
				await run("ALTER TABLE riders DROP CONSTRAINT riders_partner_mode_phone_key");
				await run("ALTER TABLE riders ADD CONSTRAINT riders_partner_phone_key UNIQUE (partner_id, phone)");
				await run("ALTER TABLE riders DROP COLUMN mode");
			});
		},
	},
];
