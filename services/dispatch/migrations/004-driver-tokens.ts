import type { Migration } from "../../../mixins/db.mixin";

/** Driver API tokens: only the SHA-256 of each token is stored; revoking sets revoked_at. */
export const driverTokensMigration: Migration = {
	name: "004-driver-tokens",
	async up(_qi, sequelize) {
		await sequelize.query(`
			CREATE TABLE driver_tokens (
				id text PRIMARY KEY,
				driver_id text NOT NULL REFERENCES drivers (id),
				token_hash text NOT NULL UNIQUE,
				created_at timestamptz NOT NULL DEFAULT now(),
				revoked_at timestamptz
			)`);
		await sequelize.query("CREATE INDEX driver_tokens_driver ON driver_tokens (driver_id)");
	},
	async down(_qi, sequelize) {
		await sequelize.query("DROP TABLE IF EXISTS driver_tokens");
	},
};
