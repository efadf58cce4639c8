import { noAudit, type AuditHook } from "../../lib/audit";
import type { Db } from "../../mixins/db.mixin";
import { KEY_MODES, type ApiKeySummary, type AuthenticatedPartner, type KeyMode, type PartnerSummary, type WebhookSecretEntry } from "../../contracts/partners";

/**
 * Every statement of partners, on its tables `partners` (disabled_at: revoked
 * by an operator), `api_keys` (several per partner, stored only as their
 * SHA-256 hash, lib/secrets.ts: callers pass hashes) and `webhook_secrets`
 * (per (partner, mode); valid_until null: the current one; older ones sign
 * until valid_until; `shared` ones from before modes, see migration 004).
 * Rows are never deleted: a revoked key or partner stays visible as revoked.
 */

const INSERT_PARTNER_SQL = "INSERT INTO partners (id, name, api_version) VALUES ($1, $2, $3)";
const INSERT_KEY_SQL = `INSERT INTO api_keys (id, partner_id, key_hash, label, mode) VALUES ($1, $2, $3, $4, $5)
				 ON CONFLICT (key_hash) DO NOTHING RETURNING id`;
const INSERT_SECRET_SQL = "INSERT INTO webhook_secrets (partner_id, secret, mode) VALUES ($1, $2, $3)";
const BY_KEY_HASH_SQL = `SELECT p.id, p.name, k.mode, p.api_version FROM api_keys k JOIN partners p ON p.id = k.partner_id
				 WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND p.disabled_at IS NULL`;
// The known-keys set (lib/known-credentials.ts): live keys' digest prefixes, paged by primary key, and the newly created ones.
const LIVE_KEY_PREFIXES_SQL = `SELECT k.id, substr(k.key_hash, 1, 16) AS prefix FROM api_keys k JOIN partners p ON p.id = k.partner_id
				 WHERE k.revoked_at IS NULL AND p.disabled_at IS NULL AND ($1::text IS NULL OR k.id > $1) ORDER BY k.id LIMIT $2`;
const KEY_PREFIXES_SINCE_SQL = "SELECT substr(key_hash, 1, 16) AS prefix FROM api_keys WHERE created_at >= $1 AND revoked_at IS NULL";
const KEY_STATE_SQL = `SELECT k.partner_id, k.revoked_at, k.mode, p.disabled_at FROM api_keys k JOIN partners p ON p.id = k.partner_id WHERE k.key_hash = $1`;
// At most one write per key per minute whatever the number of instances.
const TOUCH_KEY_SQL = "UPDATE api_keys SET last_used_at = now() WHERE key_hash = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')";
/**
 * The secrets that sign mode $2's webhooks now, current first: the mode's own,
 * and a `shared` secret from before modes: for live until rotated, for test
 * until the transition ends ($3 days after the upgrade) or a test rotation
 * ended it (test_until), whichever is first. That end is reported as its
 * validUntil, so signers stop on time without knowing the rule.
 */
const SECRETS_SQL = `SELECT secret, valid_until FROM (
				   SELECT secret, created_at,
				          CASE WHEN mode = 'shared' AND $2 = 'test'
				               THEN LEAST(COALESCE(valid_until, 'infinity'), modes_split_at + make_interval(days => $3::int), COALESCE(test_until, 'infinity'))
				               ELSE valid_until END AS valid_until
				   FROM webhook_secrets WHERE partner_id = $1 AND mode IN ($2, 'shared')) s
				 WHERE valid_until IS NULL OR valid_until > now()
				 ORDER BY valid_until IS NOT NULL, valid_until DESC, created_at DESC`;
const LIST_SQL = "SELECT id, name, created_at, disabled_at, api_version FROM partners ORDER BY created_at";
const API_VERSION_SQL = "SELECT api_version FROM partners WHERE id = $1";
const LOCK_API_VERSION_SQL = "SELECT api_version FROM partners WHERE id = $1 FOR UPDATE";
const SET_API_VERSION_SQL = "UPDATE partners SET api_version = $2 WHERE id = $1";
const PARTNER_SQL = "SELECT id, disabled_at FROM partners WHERE id = $1";
const LOCK_PARTNER_SQL = "SELECT id, disabled_at FROM partners WHERE id = $1 FOR UPDATE";
const LIST_KEYS_SQL = `SELECT id, partner_id, label, mode, created_at, last_used_at, revoked_at FROM api_keys
				 WHERE $1::text IS NULL OR partner_id = $1 ORDER BY partner_id, created_at`;
const REVOKE_KEY_SQL = "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id";
const KEY_PARTNER_SQL = "SELECT partner_id FROM api_keys WHERE id = $1";
const REVOKE_PARTNER_SQL = "UPDATE partners SET disabled_at = now() WHERE id = $1 AND disabled_at IS NULL";
const REVOKE_PARTNER_KEYS_SQL = "UPDATE api_keys SET revoked_at = now() WHERE partner_id = $1 AND revoked_at IS NULL RETURNING id";
/**
 * A rotation of mode $3: its current secret and any older one still in grace
 * end at most `grace` ($2) from now. A live rotation ends the `shared` secret
 * too (it was the live one); a test rotation only ends the shared secret's
 * use for test webhooks (test_until), live ones keep it.
 */
const END_SECRETS_SQL = `UPDATE webhook_secrets SET valid_until = LEAST(COALESCE(valid_until, 'infinity'), now() + make_interval(secs => $2))
				 WHERE partner_id = $1 AND (mode = $3 OR (mode = 'shared' AND $3 = 'live')) AND (valid_until IS NULL OR valid_until > now())
				 RETURNING valid_until`;
const END_SHARED_FOR_TEST_SQL = `UPDATE webhook_secrets SET test_until = LEAST(COALESCE(test_until, 'infinity'), now() + make_interval(secs => $2))
				 WHERE partner_id = $1 AND mode = 'shared' AND (valid_until IS NULL OR valid_until > now())
				   AND modes_split_at + make_interval(days => $3::int) > now()
				 RETURNING LEAST(test_until, valid_until, modes_split_at + make_interval(days => $3::int)) AS valid_until`;
/** Bootstrap: the mode's current secret made equal to $2 (inserted when the mode has none). */
const SET_CURRENT_SECRET_SQL = `INSERT INTO webhook_secrets (partner_id, secret, mode) VALUES ($1, $2, $3)
				 ON CONFLICT (partner_id, mode) WHERE valid_until IS NULL DO UPDATE SET secret = EXCLUDED.secret WHERE webhook_secrets.secret <> EXCLUDED.secret
				 RETURNING partner_id`;

type Iso = Date | string;
const iso = (d: Iso): string => new Date(d).toISOString();
const isoOrNull = (d: Iso | null): string | null => (d === null ? null : iso(d));

interface PartnerRow {
	id: string;
	name: string;
	created_at: Date;
	disabled_at: Date | null;
	api_version: string;
}

interface KeyRow {
	id: string;
	partner_id: string;
	label: string;
	mode: KeyMode;
	created_at: Iso;
	last_used_at: Iso | null;
	revoked_at: Iso | null;
}

/** What bootstrap needs to know about a key: whose, and whether an operator revoked it or its partner. */
export interface KeyState {
	partnerId: string;
	revoked: boolean;
	mode: KeyMode;
}

export type RevokeOutcome = { found: false } | { found: true; partnerId: string; revokedKeyIds: string[]; partnerRevoked: boolean };

export class PartnersRepo {
	constructor(private readonly db: Db) {}

	/** The new partner's id, or null when that API key is already taken (nothing is written then). */
	async insertPartner(
		p: {
			partnerId: string;
			name: string;
			keyId: string;
			keyHash: string;
			label: string;
			mode: KeyMode;
			/** The API version the partner is pinned to: the current one when its first key is made. */
			apiVersion: string;
			/** Each mode's own signing secret. */
			webhookSecrets: Record<KeyMode, string>;
		},
		audit: AuditHook<string> = noAudit,
	): Promise<string | null> {
		try {
			return await this.db.tx(async (t) => {
				await this.db.run(INSERT_PARTNER_SQL, [p.partnerId, p.name, p.apiVersion], t);
				const [key] = await this.db.rows<{ id: string }>(INSERT_KEY_SQL, [p.keyId, p.partnerId, p.keyHash, p.label, p.mode], t);
				if (!key) throw new KeyTaken();
				for (const mode of KEY_MODES) await this.db.run(INSERT_SECRET_SQL, [p.partnerId, p.webhookSecrets[mode], mode], t);
				await audit(t, p.partnerId);
				return p.partnerId;
			});
		} catch (err) {
			if (err instanceof KeyTaken) return null;
			throw err;
		}
	}

	/** The enabled partner holding this unrevoked key, or null. */
	async findByKeyHash(keyHash: string): Promise<AuthenticatedPartner | null> {
		const [row] = await this.db.rows<PartnerRow & { mode: KeyMode }>(BY_KEY_HASH_SQL, [keyHash]);
		return row ? { partnerId: row.id, name: row.name, mode: row.mode, apiVersion: row.api_version } : null;
	}

	/** Live keys after `afterId` in id order: the known-keys set's full read. */
	livePrefixes(afterId: string | null, limit: number): Promise<Array<{ id: string; prefix: string }>> {
		return this.db.rows<{ id: string; prefix: string }>(LIVE_KEY_PREFIXES_SQL, [afterId, limit]);
	}

	/** Unrevoked keys created at or after `since` (a small table: the known-keys set's re-read scans it). */
	async prefixesSince(since: Date): Promise<string[]> {
		return (await this.db.rows<{ prefix: string }>(KEY_PREFIXES_SINCE_SQL, [since])).map((r) => r.prefix);
	}

	now(): Promise<Date> {
		return this.db.now();
	}

	/** Any key with this hash, revoked or not: bootstrap must see what an operator revoked. */
	async keyState(keyHash: string): Promise<KeyState | null> {
		const [row] = await this.db.rows<{ partner_id: string; revoked_at: Date | null; disabled_at: Date | null; mode: KeyMode }>(KEY_STATE_SQL, [keyHash]);
		return row ? { partnerId: row.partner_id, revoked: row.revoked_at !== null || row.disabled_at !== null, mode: row.mode } : null;
	}

	async touchKey(keyHash: string): Promise<void> {
		await this.db.run(TOUCH_KEY_SQL, [keyHash]);
	}

	/** The secrets that sign the partner's webhooks of `mode` now, current first; empty for an unknown partner. */
	async signingSecrets(partnerId: string, mode: KeyMode, transitionDays: number): Promise<WebhookSecretEntry[]> {
		const rows = await this.db.rows<{ secret: string; valid_until: Iso | null }>(SECRETS_SQL, [partnerId, mode, transitionDays]);
		return rows.map((r) => ({ secret: r.secret, validUntil: isoOrNull(r.valid_until) }));
	}

	async list(): Promise<PartnerSummary[]> {
		const rows = await this.db.rows<PartnerRow>(LIST_SQL, []);
		return rows.map((r) => ({ partnerId: r.id, name: r.name, createdAt: r.created_at, disabled: r.disabled_at !== null, apiVersion: r.api_version }));
	}

	/** The partner's pinned API version; undefined for an unknown partner. */
	async apiVersion(partnerId: string): Promise<string | undefined> {
		const [row] = await this.db.rows<{ api_version: string }>(API_VERSION_SQL, [partnerId]);
		return row?.api_version;
	}

	/** Pins the partner to `apiVersion`: the previous pin, or null for an unknown partner. Audited in the same transaction. */
	async setApiVersion(partnerId: string, apiVersion: string, audit: AuditHook<string> = noAudit): Promise<string | null> {
		return this.db.tx(async (t) => {
			const [row] = await this.db.rows<{ api_version: string }>(LOCK_API_VERSION_SQL, [partnerId], t);
			if (!row) return null;
			await this.db.run(SET_API_VERSION_SQL, [partnerId, apiVersion], t);
			await audit(t, row.api_version);
			return row.api_version;
		});
	}

	/** "missing", "revoked" or "active". */
	async partnerState(partnerId: string): Promise<"missing" | "revoked" | "active"> {
		const [row] = await this.db.rows<{ disabled_at: Date | null }>(PARTNER_SQL, [partnerId]);
		return !row ? "missing" : row.disabled_at ? "revoked" : "active";
	}

	async listKeys(partnerId: string | undefined): Promise<ApiKeySummary[]> {
		const rows = await this.db.rows<KeyRow>(LIST_KEYS_SQL, [partnerId ?? null]);
		return rows.map((r) => ({
			keyId: r.id,
			partnerId: r.partner_id,
			label: r.label,
			mode: r.mode,
			createdAt: iso(r.created_at),
			lastUsedAt: isoOrNull(r.last_used_at),
			revokedAt: isoOrNull(r.revoked_at),
		}));
	}

	/** One more key for an active partner: "created", or why not. */
	async insertKey(
		partnerId: string,
		keyId: string,
		keyHash: string,
		label: string,
		mode: KeyMode,
		audit: AuditHook<string> = noAudit,
	): Promise<"created" | "missing" | "revoked" | "taken"> {
		return this.db.tx(async (t) => {
			// Locked, so a concurrent revocation of the partner cannot miss this key.
			const [partner] = await this.db.rows<{ disabled_at: Date | null }>(LOCK_PARTNER_SQL, [partnerId], t);
			if (!partner) return "missing";
			if (partner.disabled_at) return "revoked";
			const [key] = await this.db.rows<{ id: string }>(INSERT_KEY_SQL, [keyId, partnerId, keyHash, label, mode], t);
			if (!key) return "taken";
			await audit(t, keyId);
			return "created";
		});
	}

	async revokeKey(keyId: string, audit: AuditHook<RevokeOutcome> = noAudit): Promise<RevokeOutcome> {
		return this.db.tx(async (t) => {
			const [owner] = await this.db.rows<{ partner_id: string }>(KEY_PARTNER_SQL, [keyId], t);
			if (!owner) return { found: false } as const;
			const revoked = await this.db.rows<{ id: string }>(REVOKE_KEY_SQL, [keyId], t);
			const [partner] = await this.db.rows<{ disabled_at: Date | null }>(PARTNER_SQL, [owner.partner_id], t);
			const outcome: RevokeOutcome = {
				found: true,
				partnerId: owner.partner_id,
				revokedKeyIds: revoked.map((r) => r.id),
				partnerRevoked: Boolean(partner?.disabled_at),
			};
			await audit(t, outcome);
			return outcome;
		});
	}

	/** The partner and every key of it. */
	async revokePartner(partnerId: string, audit: AuditHook<RevokeOutcome> = noAudit): Promise<RevokeOutcome> {
		return this.db.tx(async (t) => {
			const [partner] = await this.db.rows<{ id: string }>(LOCK_PARTNER_SQL, [partnerId], t);
			if (!partner) return { found: false } as const;
			await this.db.run(REVOKE_PARTNER_SQL, [partnerId], t);
			const keys = await this.db.rows<{ id: string }>(REVOKE_PARTNER_KEYS_SQL, [partnerId], t);
			const outcome: RevokeOutcome = { found: true, partnerId, revokedKeyIds: keys.map((k) => k.id), partnerRevoked: true };
			await audit(t, outcome);
			return outcome;
		});
	}

	/** A new current secret of `mode`; the mode's previous ones end within `graceSeconds`. Null for an unknown partner. */
	async rotateWebhookSecret(
		partnerId: string,
		mode: KeyMode,
		webhookSecret: string,
		graceSeconds: number,
		transitionDays: number,
		audit: AuditHook<{ previousValidUntil: string }> = noAudit,
	): Promise<{ previousValidUntil: string } | null> {
		return this.db.tx(async (t) => {
			// Serialises rotations of one partner (one current secret per mode, the partial unique index).
			const [partner] = await this.db.rows<{ id: string }>(LOCK_PARTNER_SQL, [partnerId], t);
			if (!partner) return null;
			const ended = await this.db.rows<{ valid_until: Iso }>(END_SECRETS_SQL, [partnerId, graceSeconds, mode], t);
			if (mode === "test")
				ended.push(...(await this.db.rows<{ valid_until: Iso }>(END_SHARED_FOR_TEST_SQL, [partnerId, graceSeconds, transitionDays], t)));
			await this.db.run(INSERT_SECRET_SQL, [partnerId, webhookSecret, mode], t);
			const latest = ended.map((r) => new Date(r.valid_until).getTime()).reduce((a, b) => Math.max(a, b), Date.now());
			const rotated = { previousValidUntil: new Date(latest).toISOString() };
			await audit(t, rotated);
			return rotated;
		});
	}

	/** Bootstrap's BOOTSTRAP_WEBHOOK_SECRET: replaces the mode's current secret in place (dev and tests, no grace). True when it changed. */
	async setCurrentSecret(partnerId: string, mode: KeyMode, webhookSecret: string): Promise<boolean> {
		const rows = await this.db.rows<{ partner_id: string }>(SET_CURRENT_SECRET_SQL, [partnerId, webhookSecret, mode]);
		return rows.length > 0;
	}
}

class KeyTaken extends Error {}
