import { createHmac } from "node:crypto";

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the partner's
 * secret is `whsec_` + base64 of the key; the signature is
 * `v1,` + base64(HMAC-SHA256(key, `${id}.${timestamp}.${body}`)).
 * The body signed is the exact byte sequence sent.
 */

export interface WebhookHeaders {
	"webhook-id": string;
	"webhook-timestamp": string;
	"webhook-signature": string;
}

export function secretKey(secret: string): Buffer {
	const encoded = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
	const key = Buffer.from(encoded, "base64");
	if (key.length === 0) throw new Error("Webhook secret is empty");
	return key;
}

export function signature(secret: string, id: string, timestampSeconds: number, body: Buffer): string {
	const mac = createHmac("sha256", secretKey(secret));
	mac.update(`${id}.${timestampSeconds}.`, "utf8");
	mac.update(body);
	return `v1,${mac.digest("base64")}`;
}

/** Headers of one try: `webhook-id` stays the event id across tries, the timestamp is this try's. */
export function signedHeaders(secret: string, eventId: string, body: Buffer, nowMs: number): WebhookHeaders {
	const timestamp = Math.floor(nowMs / 1000);
	return {
		"webhook-id": eventId,
		"webhook-timestamp": String(timestamp),
		"webhook-signature": signature(secret, eventId, timestamp, body),
	};
}

/** Contract field order first (API.md, "Webhooks"); jsonb does not keep key order, so we restore it. */
const BODY_ORDER = ["eventId", "orderId", "status", "sequence", "occurredAt", "driver", "location", "eta", "metadata"];

/** The exact bytes of a webhook body, from the stored payload. */
export function webhookBody(payload: Record<string, unknown>): Buffer {
	const ordered: Record<string, unknown> = {};
	for (const key of BODY_ORDER) if (key in payload) ordered[key] = payload[key];
	for (const key of Object.keys(payload)) if (!(key in ordered)) ordered[key] = payload[key];
	return Buffer.from(JSON.stringify(ordered), "utf8");
}
