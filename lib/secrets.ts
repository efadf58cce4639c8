import { createHash, randomBytes } from "node:crypto";

/** `whsec_` + base64 of 24 random bytes: the Standard Webhooks secret format (API.md). */
export function newWebhookSecret(): string {
	return `whsec_${randomBytes(24).toString("base64")}`;
}

/**
 * API keys carry 256 bits of entropy, so a single fast SHA-256 is the right
 * hash: nothing to brute-force, and authentication stays cheap on the hot path.
 */
export function hashApiKey(apiKey: string): string {
	return createHash("sha256").update(apiKey, "utf8").digest("hex");
}

export function isWebhookSecret(value: string): boolean {
	if (!value.startsWith("whsec_")) return false;
	const raw = Buffer.from(value.slice(6), "base64");
	return raw.length >= 24;
}
