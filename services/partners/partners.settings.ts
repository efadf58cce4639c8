import { envBool, envEnum, envNumber, envString, SettingError, type Env } from "../../lib/settings";
import { isWebhookSecret } from "../../lib/secrets";
import { AUTH_CACHE_BOUND_MS, GATEWAY_AUTH_CACHE_MS, KEY_MODES, type KeyMode } from "../../contracts/partners";

/**
 * Partners configuration from the environment. Pure: pass any env object.
 * An invalid value stops the start-up with a message naming the setting
 * (never echoing a key or a secret).
 */

export interface PartnersSettings {
	/** How long a resolved API key is trusted without asking the database again (the safety net behind partners.changed). */
	authCacheMs: number;
	/** BOOTSTRAP_PARTNER_KEY (dev, compose, tests): this partner is made to exist at start, unless an operator revoked it. */
	bootstrapPartnerKey: string | undefined;
	/** BOOTSTRAP_WEBHOOK_SECRET: the bootstrap partner's signing secret, kept in step; generated when unset. */
	bootstrapWebhookSecret: string | undefined;
	/** BOOTSTRAP_PARTNER_MODE: the bootstrap key's mode, `test` unless set to `live`. */
	bootstrapPartnerMode: KeyMode;
	/**
	 * SHARED_SECRET_TEST_TRANSITION_DAYS: how long after the upgrade to
	 * per-mode secrets (partners migration 004) a partner's secret from before
	 * still signs its test webhooks too; afterwards only its test secret does.
	 */
	sharedSecretTestTransitionDays: number;
}

export const DEFAULT_SHARED_SECRET_TEST_TRANSITION_DAYS = 30;
const MAX_TRANSITION_DAYS = 365;

/** Fixed, not a setting: with the gateway's cache in front, a revoked key stops working within AUTH_CACHE_BOUND_MS everywhere even if partners.changed is lost. */
export const AUTH_CACHE_MS = AUTH_CACHE_BOUND_MS - GATEWAY_AUTH_CACHE_MS;

export const WEBHOOK_SECRET_RULE = "whsec_ + base64 of at least 24 bytes";

export const BOOTSTRAP_KEY_RULE = "at least 32 characters, each of A-Z a-z 0-9 _ -";
const BOOTSTRAP_KEY = /^[A-Za-z0-9_-]{32,200}$/;

export const BOOTSTRAP_IN_PRODUCTION_RULE = "unset when NODE_ENV=production, unless ALLOW_BOOTSTRAP_PARTNER=true";

export function isStrongBootstrapKey(key: string): boolean {
	return BOOTSTRAP_KEY.test(key);
}

export function readPartnersSettings(env: Env): PartnersSettings {
	const bootstrapWebhookSecret = envString(env, "BOOTSTRAP_WEBHOOK_SECRET");
	if (bootstrapWebhookSecret !== undefined && !isWebhookSecret(bootstrapWebhookSecret)) {
		throw new SettingError("BOOTSTRAP_WEBHOOK_SECRET", WEBHOOK_SECRET_RULE, "<redacted>");
	}
	const bootstrapPartnerKey = envString(env, "BOOTSTRAP_PARTNER_KEY");
	const allowed = envBool(env, "ALLOW_BOOTSTRAP_PARTNER", false);
	if (bootstrapPartnerKey !== undefined) {
		if (!isStrongBootstrapKey(bootstrapPartnerKey)) throw new SettingError("BOOTSTRAP_PARTNER_KEY", BOOTSTRAP_KEY_RULE, "<redacted>");
		if (env.NODE_ENV === "production" && !allowed) throw new SettingError("BOOTSTRAP_PARTNER_KEY", BOOTSTRAP_IN_PRODUCTION_RULE, "<redacted>");
	}
	return {
		authCacheMs: AUTH_CACHE_MS,
		bootstrapPartnerMode: envEnum<KeyMode>(env, "BOOTSTRAP_PARTNER_MODE", KEY_MODES, "test"),
		bootstrapPartnerKey,
		bootstrapWebhookSecret,
		sharedSecretTestTransitionDays: envNumber(
			env,
			"SHARED_SECRET_TEST_TRANSITION_DAYS",
			DEFAULT_SHARED_SECRET_TEST_TRANSITION_DAYS,
			(n) => Number.isInteger(n) && n >= 0 && n <= MAX_TRANSITION_DAYS,
			`a whole number of days from 0 to ${MAX_TRANSITION_DAYS}`,
		),
	};
}
