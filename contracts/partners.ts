import { auditPageParams, type AuditPageParams } from "./audit";

/**
 * The partners service's contract: the params of its actions (all internal:
 * the gateway, notifications and operators call them), the types they
 * validate into, and its replies. Type-only plus plain data.
 */

/**
 * Every API key belongs to a mode: `test` keys drive the sandbox (simulated
 * drivers, `metadata.sandbox`, the rider OTP helper), `live` keys only real
 * drivers. Rides, quotes, events and webhooks of one mode are invisible to
 * the other. A generated key shows its mode in its prefix.
 */
export const KEY_MODES = ["test", "live"] as const;
export type KeyMode = (typeof KEY_MODES)[number];
export const DEFAULT_KEY_MODE: KeyMode = "test";
/**
 * Prefix of generated keys: `ride_test_…`, `ride_live_…` (ours, so secret
 * scanners can tell our keys and their mode apart).
 */
export function keyPrefix(mode: KeyMode): string {
	return `ride_${mode}_`;
}
/**
 * The prefix keys were generated with before (`rk_test_…`, `rk_live_…`).
 * Those keys keep working; no new key may start with `rk_`, which is
 * Stripe's restricted-key prefix (scanners report such leaks to Stripe).
 */
export function legacyKeyPrefix(mode: KeyMode): string {
	return `rk_${mode}_`;
}
export const LEGACY_KEY_PREFIX = "rk_";
/**
 * An operator-supplied API key (`partners.create`, `partners.createKey`,
 * `npm run partner -- create|rotate-key --api-key`): one rule for both.
 */
export const API_KEY_RULE = "32 to 200 characters, each of A-Z a-z 0-9 _ -";
const givenApiKeyRule = { type: "string", min: 32, max: 200, pattern: /^[A-Za-z0-9_-]+$/, optional: true } as const;
const keyModeRule = { type: "enum", values: [...KEY_MODES], optional: true } as const;

/** `partners.create`: a new partner; the API key is shown only in the reply (its prefix tells its mode). */
export const createPartnerParams = {
	name: { type: "string", min: 1, max: 200, trim: true },
	apiKey: givenApiKeyRule,
	webhookSecret: { type: "string", optional: true },
	mode: keyModeRule,
} as const;

export interface CreatePartnerParams {
	name: string;
	/** Generated when omitted; else API_KEY_RULE, not the other mode's prefix nor `rk_`, and unused. */
	apiKey?: string;
	/**
	 * `whsec_` + base64 of at least 24 bytes: the signing secret of the first
	 * key's mode; generated when omitted. The other mode's is always generated.
	 */
	webhookSecret?: string;
	/** The mode of the partner's first key; `test` when omitted. */
	mode?: KeyMode;
}

export interface CreatedPartner {
	partnerId: string;
	apiKey: string;
	/** The signing secret of the first key's mode (the same as `webhookSecrets[mode]`). */
	webhookSecret: string;
	/** Each mode's own signing secret: test rides' webhooks are signed with `test`, live ones with `live`. Shown only here. */
	webhookSecrets: Record<KeyMode, string>;
}

/** `partners.authenticate`: the gateway resolves every request's API key with it. */
export const authenticateParams = {
	apiKey: { type: "string", min: 1, max: 500 },
	onlyKnown: { type: "boolean", optional: true },
} as const;

export interface AuthenticateParams {
	apiKey: string;
	/**
	 * The gateway's throttle holds the caller's address: answer null without a
	 * database lookup when no live key has this key's digest prefix
	 * (lib/known-credentials.ts); otherwise look it up as usual.
	 */
	onlyKnown?: boolean;
}

/** `partners.authenticate`'s reply: the partner, or null for an unknown or disabled key. */
export interface AuthenticatedPartner {
	partnerId: string;
	name: string;
	/** The key's mode: every call made with it sees only this mode's rides and quotes. */
	mode: KeyMode;
	/** The partner's pinned API version (contracts/versions.ts); absent from a partners instance older than versions. */
	apiVersion?: string;
}

/**
 * Signing-secret modes: every (partner, mode) has its own webhook secret.
 * `shared` marks a secret from before modes (partners migration 004): it
 * keeps signing live webhooks until rotated, and test webhooks too during
 * the transition (SHARED_SECRET_TEST_TRANSITION_DAYS), so no live partner's
 * verification breaks on upgrade.
 *
 * A call without `mode` (a caller from before modes) gets the live secrets, which include the shared one.
 */
export const DEFAULT_SIGNING_MODE: KeyMode = "live";

/** `partners.signingSecret`: notifications signs every delivery of a ride with the answer for the ride's mode. */
export const signingSecretParams = {
	partnerId: { type: "string", min: 1 },
	mode: keyModeRule,
} as const;

export interface SigningSecretParams {
	partnerId: string;
	/** The ride's mode; DEFAULT_SIGNING_MODE when omitted. */
	mode?: KeyMode;
}

export interface PartnerSigning {
	partnerId: string;
	/** The mode these secrets sign for. */
	mode: KeyMode;
	/**
	 * Every secret to sign with: the current one (validUntil null) first, then
	 * older ones still in their rotation grace period.
	 */
	webhookSecrets: WebhookSecretEntry[];
	/** The partner's pinned API version: webhooks are rendered in it. Absent from a partners instance older than versions. */
	apiVersion?: string;
}

export interface WebhookSecretEntry {
	secret: string;
	/** ISO 8601; null for the current secret. */
	validUntil: string | null;
}

/** One entry of `partners.list` (operators): never keys or secrets. */
export interface PartnerSummary {
	partnerId: string;
	name: string;
	/** A Date in the calling process; an ISO 8601 string once it crossed the transporter. */
	createdAt: Date | string;
	disabled: boolean;
	/** The pinned API version. */
	apiVersion: string;
}

/**
 * A revoked key stops working on every instance at once through
 * partners.changed, and within this bound even if that event is lost: the
 * gateway's cache (GATEWAY_AUTH_CACHE_MS) sits in front of partners' own, so
 * their TTLs add up to it. Fixed, not settings.
 */
export const AUTH_CACHE_BOUND_MS = 30_000;
/** How long a gateway answers a key from its own cache without calling partners.authenticate. */
export const GATEWAY_AUTH_CACHE_MS = 5_000;

/** Broadcast by partners after any change of keys, secrets or partners (every instance drops its caches). */
export const PARTNER_EVENTS = {
	changed: "partners.changed",
} as const;

/** `partners.announce`: broadcasts partners.changed from a cluster member (for `npm run partner`, which changes the database from a private broker). */
export const announceParams = {
	partnerId: { type: "string", min: 1, max: 100 },
	what: { type: "enum", values: ["keys", "webhookSecret", "partner", "apiVersion"] },
} as const;

/** `partners.changed`: what changed, for whom. Never a key or a secret. */
export interface PartnersChangedEvent {
	partnerId: string;
	what: "keys" | "webhookSecret" | "partner" | "apiVersion";
}

/** `partners.setApiVersion` (operators): pins the partner to another API version (`npm run partner -- set-version`). */
export const setApiVersionParams = {
	partnerId: { type: "string", min: 1, max: 100 },
	apiVersion: { type: "string", min: 1, max: 40 },
} as const;

export interface SetApiVersionParams {
	partnerId: string;
	/** One of the known versions (contracts/versions.ts); else `400 UNKNOWN_API_VERSION`. */
	apiVersion: string;
}

export interface ApiVersionPin {
	partnerId: string;
	apiVersion: string;
	/** The version pinned before this call (the same when nothing changed). */
	previousApiVersion: string;
}

/** Labels of API keys: what an operator tells keys apart by ("2026-05 rotation", "staging"). */
const keyLabel = { type: "string", min: 1, max: 100, trim: true } as const;

/** `partners.listKeys` (operators): every key, or one partner's; never the key itself. */
export const listKeysParams = {
	partnerId: { type: "string", min: 1, max: 100, optional: true },
} as const;

export interface ListKeysParams {
	partnerId?: string;
}

export interface ApiKeySummary {
	keyId: string;
	partnerId: string;
	label: string;
	mode: KeyMode;
	/** ISO 8601. */
	createdAt: string;
	/** ISO 8601, updated at most about once a minute; null if never used. */
	lastUsedAt: string | null;
	/** ISO 8601; null while the key works. */
	revokedAt: string | null;
}

/** `partners.createKey` (rotate-key): one more active key for the partner; the old ones keep working until revoked. */
export const createKeyParams = {
	partnerId: { type: "string", min: 1, max: 100 },
	label: keyLabel,
	apiKey: givenApiKeyRule,
	mode: keyModeRule,
} as const;

export interface CreateKeyParams {
	partnerId: string;
	label: string;
	/** Generated when omitted; else API_KEY_RULE, not the other mode's prefix nor `rk_`, and unused. */
	apiKey?: string;
	/** `test` when omitted. */
	mode?: KeyMode;
}

/** The new key, shown only here. */
export interface CreatedKey {
	keyId: string;
	partnerId: string;
	label: string;
	apiKey: string;
}

/** `partners.revokeKey`: one key (keyId), or a whole partner (partnerId: the partner and all its keys). */
export const revokeKeyParams = {
	keyId: { type: "string", min: 1, max: 100, optional: true },
	partnerId: { type: "string", min: 1, max: 100, optional: true },
} as const;

export interface RevokeKeyParams {
	keyId?: string;
	partnerId?: string;
}

export interface RevokedKeys {
	partnerId: string;
	/** Keys revoked by this call (empty when they already were). */
	revokedKeyIds: string[];
	/** True when the whole partner is revoked (now or before). */
	partnerRevoked: boolean;
}

/** Grace period of the old webhook secret when none is given: a day. */
export const DEFAULT_WEBHOOK_SECRET_GRACE_SECONDS = 86_400;

/** `partners.rotateWebhookSecret`: a new current secret; the old one still signs until the grace period ends. */
export const rotateWebhookSecretParams = {
	partnerId: { type: "string", min: 1, max: 100 },
	mode: { type: "enum", values: [...KEY_MODES] },
	graceSeconds: { type: "number", integer: true, min: 0, max: 30 * 86_400, optional: true },
	webhookSecret: { type: "string", optional: true },
} as const;

export interface RotateWebhookSecretParams {
	partnerId: string;
	/**
	 * Whose secret: each mode rotates on its own. Rotating `live` also ends the
	 * shared secret from before modes; rotating `test` ends its use for test
	 * webhooks (the end of the transition for this partner).
	 */
	mode: KeyMode;
	/** DEFAULT_WEBHOOK_SECRET_GRACE_SECONDS when omitted; 0 ends the old secret at once. */
	graceSeconds?: number;
	/** Generated when omitted. */
	webhookSecret?: string;
}

export interface RotatedWebhookSecret {
	partnerId: string;
	mode: KeyMode;
	/** The new current secret, shown only here. */
	webhookSecret: string;
	/** ISO 8601: the old secret stops signing then. */
	previousValidUntil: string;
}

/** `partners.audit`: the operator audit trail (contracts/audit.ts), newest first, overall or of one partner. */
export const partnerAuditParams = {
	partnerId: { type: "string", min: 1, max: 100, optional: true },
	...auditPageParams,
} as const;
export interface PartnerAuditParams extends AuditPageParams {
	partnerId?: string;
}
