/**
 * Webhook verification by the Standard Webhooks scheme the API signs with:
 * `webhook-signature` holds one or more `v1,<base64 HMAC-SHA256>` entries
 * (several while a secret is being rotated) over
 * `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed with the secret's
 * bytes (the base64 after `whsec_`). The HMAC and the constant-time
 * comparison are node:crypto's.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { RideError } from "./errors";
import type { WebhookEvent } from "./types";

/** Node's `req.headers`, a fetch `Headers`, or any record of header names (any case) to values. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
	/** Largest accepted distance between `webhook-timestamp` and now, either way; default 300 s. */
	toleranceSeconds?: number;
	/** Refuse an event whose `mode` is not this one: a production endpoint passes `"live"`, so no test webhook ever passes there. */
	mode?: "test" | "live";
	/** "Now" for the timestamp check (tests); default the clock. */
	now?: Date;
}

export type WebhookVerificationReason =
	| "MISSING_HEADERS"
	| "INVALID_TIMESTAMP"
	| "TIMESTAMP_TOO_OLD"
	| "TIMESTAMP_TOO_NEW"
	| "INVALID_SECRET"
	| "NO_MATCHING_SIGNATURE"
	| "INVALID_PAYLOAD"
	| "MODE_MISMATCH";

/** The webhook is not one to act on; answer it with a 4xx (`reason` says why, for your logs). */
export class WebhookVerificationError extends RideError {
	override name = "WebhookVerificationError";
	constructor(
		readonly reason: WebhookVerificationReason,
		message: string,
	) {
		super(message);
	}
}

const DEFAULT_TOLERANCE_SECONDS = 300;

function header(headers: WebhookHeaders, name: string): string | undefined {
	if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
	const record = headers as Record<string, string | string[] | undefined>;
	const key = Object.keys(record).find((k) => k.toLowerCase() === name);
	const value = key === undefined ? undefined : record[key];
	return Array.isArray(value) ? value.join(" ") : value;
}

function secretKey(secret: string): Buffer {
	const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64");
	if (key.length === 0) throw new WebhookVerificationError("INVALID_SECRET", "the webhook secret is empty or not base64");
	return key;
}

/**
 * Verifies a webhook and returns its event. `rawBody` must be the exact
 * bytes received (before any JSON parsing); `secret` is your `whsec_…` secret
 * of the mode the endpoint serves, or several (accepted when any one
 * matches). Throws `WebhookVerificationError` when the headers are missing,
 * the timestamp is outside the tolerance, no signature matches, the body is
 * not an event of this `webhook-id`, or `options.mode` is not the event's.
 */
export function verify(rawBody: string | Uint8Array, headers: WebhookHeaders, secret: string | readonly string[], options: VerifyOptions = {}): WebhookEvent {
	const id = header(headers, "webhook-id");
	const timestamp = header(headers, "webhook-timestamp");
	const signatures = header(headers, "webhook-signature");
	if (!id || !timestamp || !signatures) {
		throw new WebhookVerificationError("MISSING_HEADERS", "webhook-id, webhook-timestamp and webhook-signature are required");
	}
	if (!/^\d{1,15}$/.test(timestamp)) throw new WebhookVerificationError("INVALID_TIMESTAMP", "webhook-timestamp is not unix seconds");
	const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
	const now = Math.floor((options.now?.getTime() ?? Date.now()) / 1000);
	if (Number(timestamp) < now - tolerance) throw new WebhookVerificationError("TIMESTAMP_TOO_OLD", "webhook-timestamp is older than the tolerance");
	if (Number(timestamp) > now + tolerance) throw new WebhookVerificationError("TIMESTAMP_TOO_NEW", "webhook-timestamp is ahead of the tolerance");

	// Compared as the canonical `v1,<base64>` text, as the scheme's reference libraries do: another
	// encoding of the same bytes (base64 padding bits) is not a signature we sent.
	const given = signatures.split(" ").map((entry) => Buffer.from(entry));
	const secrets = typeof secret === "string" ? [secret] : secret;
	if (secrets.length === 0) throw new WebhookVerificationError("INVALID_SECRET", "no webhook secret given");
	const matched = secrets.some((s) => {
		const digest = createHmac("sha256", secretKey(s)).update(`${id}.${timestamp}.`).update(rawBody).digest("base64");
		const expected = Buffer.from(`v1,${digest}`);
		return given.some((g) => g.length === expected.length && timingSafeEqual(g, expected));
	});
	if (!matched) throw new WebhookVerificationError("NO_MATCHING_SIGNATURE", "no signature matches the secret");

	let event: WebhookEvent;
	try {
		event = JSON.parse(typeof rawBody === "string" ? rawBody : Buffer.from(rawBody).toString("utf8")) as WebhookEvent;
	} catch {
		throw new WebhookVerificationError("INVALID_PAYLOAD", "the body is not JSON");
	}
	if (typeof event !== "object" || event === null || event.eventId !== id) {
		throw new WebhookVerificationError("INVALID_PAYLOAD", "the body is not the event webhook-id names");
	}
	if (options.mode !== undefined && event.mode !== options.mode) {
		throw new WebhookVerificationError("MODE_MISMATCH", `a ${event.mode} event at an endpoint for ${options.mode} events`);
	}
	return event;
}

/** `webhooks.verify(rawBody, headers, secret, options?)`. */
export const webhooks = { verify };
