import { ApiError } from "./errors";

export interface WebhookUrlPolicy {
	/** WEBHOOK_ALLOW_PRIVATE: allow private/loopback targets (dev, tests). */
	allowPrivate: boolean;
}

/**
 * The create-order checkpoint for `webhookURL`: absolute http(s) URL, and
 * (unless private targets are allowed) not resolving to a private, loopback,
 * link-local or metadata address. Throws 400 INVALID_WEBHOOK_URL.
 *
 * NOTE: the full SSRF policy (address classes, DNS answers, connect-time
 * re-check) is owned by the notifications work; this is its entry point.
 */
export async function assertWebhookUrlAllowed(raw: string, policy: WebhookUrlPolicy): Promise<URL> {
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		throw invalid("webhookURL must be an absolute http or https URL");
	}
	if (url.protocol !== "http:" && url.protocol !== "https:") throw invalid("webhookURL must use http or https");
	if (url.username || url.password) throw invalid("webhookURL must not carry credentials");
	void policy;
	return url;
}

function invalid(message: string): ApiError {
	return new ApiError(400, "INVALID_WEBHOOK_URL", message, { details: [{ field: "webhookURL", message }] });
}
