import type { Migration } from "../../../mixins/db.mixin";
import { newWebhookSecret } from "../../../lib/secrets";
import { AUDIT_TABLE_COLUMNS } from "../../../contracts/audit";
import { FIRST_API_VERSION } from "../../../contracts/versions";

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
	{
		/**
		 * Several keys per partner (label, last use, revocation) and several
		 * webhook secrets during a rotation (valid_until; null = the current
		 * one). partners.disabled_at now means "revoked by an operator".
		 * Existing keys become each partner's "initial" key.
		 */
		name: "002-api-keys-and-webhook-secrets",
		async up(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				await run(`
					CREATE TABLE api_keys (
						id text PRIMARY KEY,
						partner_id text NOT NULL REFERENCES partners (id),
						key_hash text NOT NULL UNIQUE,
						label text NOT NULL,
						created_at timestamptz NOT NULL DEFAULT now(),
						last_used_at timestamptz,
						revoked_at timestamptz
					)`);
				await run("CREATE INDEX api_keys_partner ON api_keys (partner_id)");
				await run(`
					INSERT INTO api_keys (id, partner_id, key_hash, label, created_at, revoked_at)
					SELECT 'key_' || substr(md5(id || api_key_hash), 1, 20), id, api_key_hash, 'initial', created_at, disabled_at FROM partners`);
				await run(`
					CREATE TABLE webhook_secrets (
						id bigserial PRIMARY KEY,
						partner_id text NOT NULL REFERENCES partners (id),
						secret text NOT NULL,
						created_at timestamptz NOT NULL DEFAULT now(),
						valid_until timestamptz
					)`);
				await run("CREATE UNIQUE INDEX webhook_secrets_current ON webhook_secrets (partner_id) WHERE valid_until IS NULL");
				await run("INSERT INTO webhook_secrets (partner_id, secret, created_at) SELECT id, webhook_secret, created_at FROM partners");
				await run("ALTER TABLE partners DROP COLUMN api_key_hash, DROP COLUMN webhook_secret");
			});
		},
		async down(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				await run("ALTER TABLE partners ADD COLUMN api_key_hash text UNIQUE, ADD COLUMN webhook_secret text");
				await run(`UPDATE partners p SET
					api_key_hash = (SELECT key_hash FROM api_keys k WHERE k.partner_id = p.id ORDER BY k.revoked_at IS NOT NULL, k.created_at LIMIT 1),
					webhook_secret = (SELECT secret FROM webhook_secrets s WHERE s.partner_id = p.id AND s.valid_until IS NULL)`);
				await run("ALTER TABLE partners ALTER COLUMN api_key_hash SET NOT NULL, ALTER COLUMN webhook_secret SET NOT NULL");
				await run("DROP TABLE webhook_secrets");
				await run("DROP TABLE api_keys");
			});
		},
	},
	{
		/**
		 * Key modes: every key is `test` (the sandbox) or `live` (real drivers
		 * only). Keys from before are test keys, as they behaved until now.
		 */
		name: "003-api-key-modes",
		async up(_qi, sequelize) {
			await sequelize.query("ALTER TABLE api_keys ADD COLUMN mode text NOT NULL DEFAULT 'test' CHECK (mode IN ('test','live'))");
		},
		async down(_qi, sequelize) {
			await sequelize.query("ALTER TABLE api_keys DROP COLUMN IF EXISTS mode");
		},
	},
	{
		/**
		 * A webhook signing secret per (partner, mode): a leaked test key must not
		 * yield webhooks that verify at the partner's production endpoint.
		 * Secrets from before become `shared` (modes_split_at: this upgrade):
		 * they keep signing live webhooks until a live rotation, and test
		 * webhooks until SHARED_SECRET_TEST_TRANSITION_DAYS after the upgrade or
		 * a test rotation (test_until), whichever comes first, so no partner's
		 * verification breaks on upgrade. Each partner gets its own test secret
		 * now, signing test webhooks next to the shared one; an operator shows
		 * it to the partner by rotating the test secret (docs/OPERATIONS.md).
		 * The current secret is unique per (partner, mode).
		 */
		name: "004-webhook-secrets-per-mode",
		async up(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string, bind?: unknown[]) => sequelize.query(sql, { transaction, ...(bind ? { bind } : {}) });
				await run(`ALTER TABLE webhook_secrets
					ADD COLUMN mode text NOT NULL DEFAULT 'shared' CHECK (mode IN ('test','live','shared')),
					ADD COLUMN modes_split_at timestamptz NOT NULL DEFAULT now(),
					ADD COLUMN test_until timestamptz`);
				await run("DROP INDEX webhook_secrets_current");
				await run("CREATE UNIQUE INDEX webhook_secrets_current ON webhook_secrets (partner_id, mode) WHERE valid_until IS NULL");
				const [partners] = (await run("SELECT id FROM partners ORDER BY id")) as [Array<{ id: string }>, unknown];
				for (const p of partners) {
					await run("INSERT INTO webhook_secrets (partner_id, secret, mode) VALUES ($1, $2, 'test')", [p.id, newWebhookSecret()]);
				}
			});
		},
		async down(_qi, sequelize) {
			await sequelize.transaction(async (transaction) => {
				const run = (sql: string) => sequelize.query(sql, { transaction });
				// Back to one secret per partner: the live (or shared) ones; test secrets go.
				await run("DELETE FROM webhook_secrets WHERE mode = 'test'");
				await run(`DELETE FROM webhook_secrets s WHERE s.mode = 'shared' AND s.valid_until IS NULL
					AND EXISTS (SELECT 1 FROM webhook_secrets l WHERE l.partner_id = s.partner_id AND l.mode = 'live' AND l.valid_until IS NULL)`);
				await run("DROP INDEX webhook_secrets_current");
				await run("CREATE UNIQUE INDEX webhook_secrets_current ON webhook_secrets (partner_id) WHERE valid_until IS NULL");
				await run("ALTER TABLE webhook_secrets DROP COLUMN mode, DROP COLUMN modes_split_at, DROP COLUMN test_until");
			});
		},
	},
	{
		/**
		 * The operator audit trail (lib/audit.ts): every change to partners,
		 * keys and signing secrets, written in the change's transaction. Listed
		 * newest first, overall or per partner.
		 */
		name: "005-audit",
		async up(_qi, sequelize) {
			await sequelize.query(`CREATE TABLE IF NOT EXISTS partners_audit (${AUDIT_TABLE_COLUMNS})`);
			await sequelize.query("CREATE INDEX IF NOT EXISTS partners_audit_subject ON partners_audit (subject, id)");
		},
		async down(_qi, sequelize) {
			await sequelize.query("DROP TABLE IF EXISTS partners_audit");
		},
	},
	{
		/**
		 * API versions (contracts/versions.ts): each partner is pinned to the
		 * version that was current when its first key was made. Partners from
		 * before versions get the first one, the contract they integrated
		 * against. The default also covers inserts by instances of the
		 * previous release during a rollout.
		 */
		name: "006-api-versions",
		async up(_qi, sequelize) {
			await sequelize.query(`ALTER TABLE partners ADD COLUMN IF NOT EXISTS api_version text NOT NULL DEFAULT '${FIRST_API_VERSION}'`);
		},
		async down(_qi, sequelize) {
			await sequelize.query("ALTER TABLE partners DROP COLUMN IF EXISTS api_version");
		},
	},
];
