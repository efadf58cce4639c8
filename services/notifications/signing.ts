import { createHmac, createSecretKey, type KeyObject } from "node:crypto";
import type { KeyMode } from "../../contracts/partners";

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the partner's
 * secret is `whsec_` + base64 of the key; the signature is
 * `v1,` + base64(HMAC-SHA256(key, `${id}.${timestamp}.${body}`)).
 * The body signed is the exact byte sequence sent.
 *
 * During a secret rotation (partners.rotateWebhookSecret) a partner has
 * several secrets: the new one and the old one until its `validUntil`. Every
 * secret valid at the time of the try signs, and `webhook-signature` carries
 * the signatures space-separated (the spec allows several; a verifier accepts
 * the message when any one matches its secret).
 *
 * Every (partner, mode) has its own secrets (partners migration 004): a test
 * ride's webhooks are signed with the partner's test secrets only, so they
 * never verify with its live secret. The body says the mode (`mode`, signed)
 * and so does the `Ride-Mode` header (for routing before verifying).
 *
 * The body is rendered in the partner's pinned API version
 * (contracts/versions.ts): the body says which (`apiVersion`, signed), and
 * so does the `Ride-Version` header.
 */

/** One of a partner's signing secrets; `validUntil` (ISO 8601) is absent or null for the current one. */
export interface SigningSecret {
	secret: string;
	validUntil?: string | null;
}

export interface WebhookHeaders {
	"webhook-id": string;
	"webhook-timestamp": string;
	"webhook-signature": string;
	/** The ride's mode, `test` or `live` (API.md, "Webhooks"); the signed body's `mode` is the same. */
	"ride-mode": KeyMode;
	/** The API version the body is rendered in; the signed body's `apiVersion` is the same. */
	"ride-version"?: string;
}

export function secretKey(secret: string): Buffer {
	const encoded = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
	const key = Buffer.from(encoded, "base64");
	if (key.length === 0) throw new Error("Webhook secret is empty");
	return key;
}

/** Cached KeyObjects at most; the cache starts over past it. */
const MAX_CACHED_KEYS = 10_000;
const keys = new Map<string, KeyObject>();

/**
 * The HMAC key of a secret, made once: createHmac with a Buffer builds a new
 * KeyObject at every call (the largest single cost of signing in the profile).
 * Keyed by the whole secret, so one partner's key never signs for another.
 */
export function signingKey(secret: string): KeyObject {
	let key = keys.get(secret);
	if (!key) {
		key = createSecretKey(secretKey(secret));
		if (keys.size >= MAX_CACHED_KEYS) keys.clear();
		keys.set(secret, key);
	}
	return key;
}

export function signature(secret: string, id: string, timestampSeconds: number, body: Buffer): string {
	const mac = createHmac("sha256", signingKey(secret));
	mac.update(`${id}.${timestampSeconds}.`, "utf8");
	mac.update(body);
	return `v1,${mac.digest("base64")}`;
}

/** The secrets that sign at `nowMs`: the current ones, and older ones until their validUntil (newest first as given). */
export function secretsValidAt(secrets: readonly SigningSecret[], nowMs: number): string[] {
	const valid = secrets.filter((s) => s.validUntil === undefined || s.validUntil === null || Date.parse(s.validUntil) > nowMs).map((s) => s.secret);
	if (valid.length === 0) throw new Error("No webhook secret valid now");
	return [...new Set(valid)];
}

/**
 * Headers of one try: `webhook-id` stays the event id across tries, the
 * timestamp is this try's; one signature per secret valid now (the secrets
 * of the ride's mode), and the mode.
 */
export function signedHeaders(
	secrets: readonly SigningSecret[],
	eventId: string,
	body: Buffer,
	nowMs: number,
	mode: KeyMode,
	apiVersion?: string,
): WebhookHeaders {
	const timestamp = Math.floor(nowMs / 1000);
	return {
		"ride-mode": mode,
		...(apiVersion === undefined ? {} : { "ride-version": apiVersion }),
		"webhook-id": eventId,
		"webhook-timestamp": String(timestamp),
		"webhook-signature": secretsValidAt(secrets, nowMs)
			.map((secret) => signature(secret, eventId, timestamp, body))
			.join(" "),
	};
}

/** Contract field order first (API.md, "Webhooks"); jsonb does not keep key order, so we restore it. */
const BODY_ORDER = ["eventId", "orderId", "status", "sequence", "occurredAt", "mode", "apiVersion", "driver", "location", "eta", "metadata"];

/**
 * The exact bytes of a webhook body, from the stored payload and the ride's
 * mode (payloads stored before they carried it get it here; a stored one is
 * the same value, the ride's), and the API version it is rendered in.
 */
export function webhookBody(payload: Record<string, unknown>, mode: KeyMode, apiVersion?: string): Buffer {
	payload = apiVersion === undefined ? { ...payload, mode } : { ...payload, mode, apiVersion };
	const ordered: Record<string, unknown> = {};
	for (const key of BODY_ORDER) if (key in payload) ordered[key] = payload[key];
	for (const key of Object.keys(payload)) if (!(key in ordered)) ordered[key] = payload[key];
	return Buffer.from(JSON.stringify(ordered), "utf8");
}
