import { QueryTypes, type Sequelize } from "sequelize";
import type { AuthenticatedPartner, PartnerSigning, PartnerSummary } from "../../contracts/partners";

/**
 * Every statement of partners, on its one table `partners`. API keys are
 * stored only as their SHA-256 hash (lib/secrets.ts): callers pass hashes.
 */

const INSERT_SQL = `INSERT INTO partners (id, name, api_key_hash, webhook_secret) VALUES ($1, $2, $3, $4)
				 ON CONFLICT (api_key_hash) DO NOTHING RETURNING id`;
const BY_KEY_HASH_SQL = "SELECT id, name FROM partners WHERE api_key_hash = $1 AND disabled_at IS NULL";
const SIGNING_SECRET_SQL = "SELECT id, webhook_secret FROM partners WHERE id = $1";
const LIST_SQL = "SELECT id, name, created_at, disabled_at FROM partners ORDER BY created_at";
const SET_SECRET_BY_KEY_HASH_SQL = "UPDATE partners SET webhook_secret = $2 WHERE api_key_hash = $1";

interface PartnerRow {
	id: string;
	name: string;
	webhook_secret: string;
	created_at: Date;
	disabled_at: Date | null;
}

export class PartnersRepo {
	constructor(private readonly sequelize: Sequelize) {}

	private select<R extends object>(sql: string, bind: unknown[]): Promise<R[]> {
		return this.sequelize.query<R>(sql, { bind, type: QueryTypes.SELECT });
	}

	/** The new partner's id, or null when that API key is already taken. */
	async insert(id: string, name: string, apiKeyHash: string, webhookSecret: string): Promise<string | null> {
		const rows = await this.select<{ id: string }>(INSERT_SQL, [id, name, apiKeyHash, webhookSecret]);
		return rows[0]?.id ?? null;
	}

	/** The enabled partner holding this key, or null. */
	async findByKeyHash(apiKeyHash: string): Promise<AuthenticatedPartner | null> {
		const [row] = await this.select<PartnerRow>(BY_KEY_HASH_SQL, [apiKeyHash]);
		return row ? { partnerId: row.id, name: row.name } : null;
	}

	async signingSecret(partnerId: string): Promise<PartnerSigning | null> {
		const [row] = await this.select<PartnerRow>(SIGNING_SECRET_SQL, [partnerId]);
		return row ? { partnerId: row.id, webhookSecret: row.webhook_secret } : null;
	}

	async list(): Promise<PartnerSummary[]> {
		const rows = await this.select<PartnerRow>(LIST_SQL, []);
		return rows.map((r) => ({ partnerId: r.id, name: r.name, createdAt: r.created_at, disabled: r.disabled_at !== null }));
	}

	async setWebhookSecretByKeyHash(apiKeyHash: string, webhookSecret: string): Promise<void> {
		await this.sequelize.query(SET_SECRET_BY_KEY_HASH_SQL, { bind: [apiKeyHash, webhookSecret] });
	}
}
