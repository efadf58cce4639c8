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
];
