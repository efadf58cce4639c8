/**
 * The partners service's contract: the params of its actions (all internal:
 * the gateway, notifications and operators call them), the types they
 * validate into, and its replies. Type-only plus plain data.
 */

/** `partners.create`: a new partner; the API key is shown only in the reply. */
export const createPartnerParams = {
	name: { type: "string", min: 1, max: 200, trim: true },
	apiKey: { type: "string", min: 24, max: 200, optional: true },
	webhookSecret: { type: "string", optional: true },
} as const;

export interface CreatePartnerParams {
	name: string;
	/** Generated when omitted. */
	apiKey?: string;
	/** `whsec_` + base64 of at least 24 bytes; generated when omitted. */
	webhookSecret?: string;
}

export interface CreatedPartner {
	partnerId: string;
	apiKey: string;
	webhookSecret: string;
}

/** `partners.authenticate`: the gateway resolves every request's API key with it. */
export const authenticateParams = {
	apiKey: { type: "string", min: 1, max: 500 },
} as const;

export interface AuthenticateParams {
	apiKey: string;
}

/** `partners.authenticate`'s reply: the partner, or null for an unknown or disabled key. */
export interface AuthenticatedPartner {
	partnerId: string;
	name: string;
}

/** `partners.signingSecret`: notifications signs every delivery with the answer. */
export const signingSecretParams = {
	partnerId: { type: "string", min: 1 },
} as const;

export interface SigningSecretParams {
	partnerId: string;
}

export interface PartnerSigning {
	partnerId: string;
	/** The current secret. */
	webhookSecret: string;
	/**
	 * Every secret to sign with: the current one (validUntil null) first, then
	 * older ones still in their rotation grace period. Absent from partners
	 * instances older than rotation (rolling upgrade): sign with webhookSecret.
	 */
	webhookSecrets?: WebhookSecretEntry[];
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
}

/** Broadcast by partners after any change of keys, secrets or partners (every instance drops its caches). */
export const PARTNER_EVENTS = {
	changed: "partners.changed",
} as const;

/** `partners.changed`: what changed, for whom. Never a key or a secret. */
export interface PartnersChangedEvent {
	partnerId: string;
	what: "keys" | "webhookSecret" | "partner";
}
