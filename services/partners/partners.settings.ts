import { envString, SettingError, type Env } from "../../lib/settings";
import { isWebhookSecret } from "../../lib/secrets";

/**
 * Partners configuration from the environment. Pure: pass any env object.
 * An invalid value stops the start-up with a message naming the setting.
 */

export interface PartnersSettings {
	/** How long a resolved API key is trusted without asking the database again. */
	authCacheMs: number;
	/** BOOTSTRAP_PARTNER_KEY (dev, compose, tests): this partner is made to exist at start. */
	bootstrapPartnerKey: string | undefined;
	/** BOOTSTRAP_WEBHOOK_SECRET: the bootstrap partner's signing secret, kept in step; generated when unset. */
	bootstrapWebhookSecret: string | undefined;
}

/** Fixed, not a setting: a disabled key stops working within this time on every instance. */
export const AUTH_CACHE_MS = 30_000;

export const WEBHOOK_SECRET_RULE = "whsec_ + base64 of at least 24 bytes";

export function readPartnersSettings(env: Env): PartnersSettings {
	const bootstrapWebhookSecret = envString(env, "BOOTSTRAP_WEBHOOK_SECRET");
	if (bootstrapWebhookSecret !== undefined && !isWebhookSecret(bootstrapWebhookSecret)) {
		throw new SettingError("BOOTSTRAP_WEBHOOK_SECRET", WEBHOOK_SECRET_RULE, "<redacted>");
	}
	return {
		authCacheMs: AUTH_CACHE_MS,
		bootstrapPartnerKey: envString(env, "BOOTSTRAP_PARTNER_KEY"),
		bootstrapWebhookSecret,
	};
}
