import type { Migration } from "../../../mixins/db.mixin";

/**
 * Driver tokens with an optional lifetime and a name an operator can read:
 * `expires_at` (null: until revoked; a token past it is refused like a
 * revoked one) and `token_prefix`, the token's first 12 characters (`rdt_`
 * + 48 of its 256 random bits), which lists show and `revokeDriverToken
 * { prefix }` revokes by. Tokens issued before have neither.
 */
export const driverTokenExpiryMigration: Migration = {
	name: "006-driver-token-expiry",
	async up(_qi, sequelize) {
		await sequelize.query("ALTER TABLE driver_tokens ADD COLUMN expires_at timestamptz");
		await sequelize.query("ALTER TABLE driver_tokens ADD COLUMN token_prefix text");
		await sequelize.query("CREATE INDEX driver_tokens_prefix ON driver_tokens (token_prefix) WHERE token_prefix IS NOT NULL");
	},
	async down(_qi, sequelize) {
		await sequelize.query("DROP INDEX IF EXISTS driver_tokens_prefix");
		await sequelize.query("ALTER TABLE driver_tokens DROP COLUMN IF EXISTS token_prefix");
		await sequelize.query("ALTER TABLE driver_tokens DROP COLUMN IF EXISTS expires_at");
	},
};
