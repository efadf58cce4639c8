import type { Migration } from "../../../mixins/db.mixin";

export const migrations: Migration[] = [
	{
		// Server-generated secrets pricing needs when none is configured (the
		// quote signing key). Written once per name, read at start; never per request.
		name: "001-pricing-secrets",
		async up(_qi, sequelize) {
			await sequelize.query(`
				CREATE TABLE pricing_secrets (
					name text PRIMARY KEY,
					secret text NOT NULL,
					created_at timestamptz NOT NULL DEFAULT now()
				)`);
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP TABLE pricing_secrets");
		},
	},
];
