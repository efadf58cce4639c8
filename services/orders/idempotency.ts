import { createHash } from "node:crypto";
import { IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_TTL_MS } from "../../contracts/orders";

/**
 * Idempotency-Key rules for create-order (API.md): the same key and body
 * within 24 h answer the first response again; the same key with another body
 * is `422 IDEMPOTENCY_KEY_REUSED`; a repeat while the first call still runs is
 * `409 IDEMPOTENCY_KEY_IN_USE`. The table `idempotency_keys` holds the claims;
 * these pure helpers decide what a found claim means.
 */

/**
 * A claim still "running" after this long belongs to a process that died
 * mid-call (the broker's request timeout is 15 s): the key is free again.
 */
export const DEFAULT_RUNNING_TIMEOUT_MS = 60_000;

/** JSON with object keys sorted at every level, so the same body always hashes the same. */
export function canonicalJson(value: unknown): string {
	if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
	if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
	const entries = Object.keys(value as Record<string, unknown>)
		.filter((k) => (value as Record<string, unknown>)[k] !== undefined)
		.sort()
		.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
	return `{${entries.join(",")}}`;
}

/** SHA-256 (hex) of the canonical request body. */
export function requestHash(body: unknown): string {
	return createHash("sha256").update(canonicalJson(body), "utf8").digest("hex");
}

export type KeyCheck = { ok: true } | { ok: false; field: string; message: string };

export function checkIdempotencyKey(key: unknown): KeyCheck {
	if (key === undefined || key === null) return { ok: true };
	if (typeof key !== "string" || key.length === 0 || key.length > IDEMPOTENCY_KEY_MAX_LENGTH) {
		return { ok: false, field: "Idempotency-Key", message: `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} characters` };
	}
	return { ok: true };
}

export interface StoredClaim {
	request_hash: string;
	state: "running" | "done";
	response_status: number | null;
	response_body: unknown;
	created_at: Date | string;
}

export type ClaimVerdict =
	/** The key is free again (expired, or its holder died): take it over. */
	| { kind: "takeover" }
	/** Same body, finished: answer the stored response. */
	| { kind: "replay"; status: number; body: unknown }
	| { kind: "reused" }
	| { kind: "in_use" };

/** What an existing claim means for a new call with `hash`, at `now`. */
export function judgeClaim(claim: StoredClaim, hash: string, now: number, runningTimeoutMs = DEFAULT_RUNNING_TIMEOUT_MS): ClaimVerdict {
	const age = now - new Date(claim.created_at).getTime();
	if (age >= IDEMPOTENCY_TTL_MS) return { kind: "takeover" };
	if (claim.state === "running" && age >= runningTimeoutMs) return { kind: "takeover" };
	if (claim.request_hash !== hash) return { kind: "reused" };
	if (claim.state === "running") return { kind: "in_use" };
	return { kind: "replay", status: claim.response_status ?? 200, body: claim.response_body };
}
