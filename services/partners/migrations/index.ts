import type { Migration } from "../../../mixins/db.mixin";

export const migrations: Migration[] = [
	{
		name: "001-partners",
		async up(_qi, sequelize) {
			await sequelize.query(`
				CREATE TABLE partners (
					id text PRIMARY KEY,
					name text NOT NULL,
					api_key_hash text NOT NULL UNIQUE,
					webhook_secret text NOT NULL,
					created_at timestamptz NOT NULL DEFAULT now(),
					disabled_at timestamptz
				)`);
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP TABLE partners");
		},
	},
];
