import { randomUUID } from "node:crypto";
import type { Transaction } from "sequelize";
import { ORDERS_RETRY_AFTER_SECONDS } from "../../contracts/orders";
import { ApiError } from "../../lib/errors";
import type { Db } from "../../mixins/db.mixin";
import type { KeyMode } from "../../contracts/partners";
import { judgeClaim, type StoredClaim } from "./idempotency";

/**
 * The `idempotency_keys` table: claim, finish and release of create-order's
 * Idempotency-Key rows. What a found claim means is decided by the pure
 * `judgeClaim` (idempotency.ts); this file only reads and writes.
 */

/** Keys are the partner's per mode: a test call's key never replays for a live call. */
export interface IdempotencyClaim {
	partnerId: string;
	mode: KeyMode;
	key: string;
	token: string;
}

export type ClaimOutcome = { kind: "claimed"; claim: IdempotencyClaim } | { kind: "replay"; status: number; body: unknown };

/** How often a claim is tried again when the row changes under it (released or taken over meanwhile). */
const CLAIM_ATTEMPTS = 5;

export function keyStillRunning(): ApiError {
	return new ApiError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is still being processed", { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
}

export function keyTakenOver(): ApiError {
	return new ApiError("IDEMPOTENCY_KEY_IN_USE", "This Idempotency-Key was taken over by another call", { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
}

export class IdempotencyRepo {
	constructor(
		private readonly db: Db,
		/** A running claim older than this is from a dead call and may be taken over. */
		private readonly runningTimeoutMs: number,
	) {}

	/**
	 * Claims `key` for this call: INSERT … ON CONFLICT DO NOTHING decides
	 * between simultaneous first calls, and the same statement reads the
	 * existing claim when there is one, judged by `judgeClaim` (replay,
	 * reused, in use, or free again): one round trip for a claim or a replay.
	 */
	async claim(partnerId: string, mode: KeyMode, key: string, hash: string): Promise<ClaimOutcome> {
		for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
			const token = randomUUID();
			// One statement: the claim, or (when the key is taken) the row that holds it.
			// A row committed after this statement's snapshot conflicts but is not read:
			// no row comes back, and the next attempt reads it.
			const rows = await this.db.rows<StoredClaim & { claimed: boolean; claim_token: string; db_now: Date }>(
				`WITH ins AS (
				   INSERT INTO idempotency_keys (partner_id, key, request_hash, state, claim_token, mode) VALUES ($1, $2, $3, 'running', $4, $5)
				   ON CONFLICT (partner_id, mode, key) DO NOTHING RETURNING claim_token
				 )
				 SELECT true AS claimed, NULL::text AS request_hash, NULL::text AS state, NULL::int AS response_status, NULL::jsonb AS response_body,
				        NULL::timestamptz AS created_at, claim_token, now() AS db_now FROM ins
				 UNION ALL
				 SELECT false, request_hash, state, response_status, response_body, created_at, claim_token, now()
				 FROM idempotency_keys WHERE partner_id = $1 AND key = $2 AND mode = $5 AND NOT EXISTS (SELECT 1 FROM ins)`,
				[partnerId, key, hash, token, mode],
			);
			const existing = rows[0];
			if (existing?.claimed) return { kind: "claimed", claim: { partnerId, mode, key, token } };
			if (!existing) continue; // released meanwhile (or committed after this statement began): claim again
			const verdict = judgeClaim(existing, hash, new Date(existing.db_now).getTime(), this.runningTimeoutMs);
			switch (verdict.kind) {
				case "replay":
					return { kind: "replay", status: verdict.status, body: verdict.body };
				case "reused":
					throw new ApiError("IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request body");
				case "in_use":
					throw keyStillRunning();
				case "takeover": {
					// Compare-and-swap on the old token: of several takers, one wins.
					const taken = await this.db.rows<{ claim_token: string }>(
						`UPDATE idempotency_keys SET request_hash = $3, state = 'running', claim_token = $5,
						        response_status = NULL, response_body = NULL, created_at = now()
						 WHERE partner_id = $1 AND key = $2 AND claim_token = $4 AND mode = $6 RETURNING claim_token`,
						[partnerId, key, hash, existing.claim_token, token, mode],
					);
					if (taken.length > 0) return { kind: "claimed", claim: { partnerId, mode, key, token } };
				}
			}
		}
		throw keyStillRunning();
	}

	/** Stores the response of a claim this call still holds; throws when another call took the key over meanwhile. */
	async finish(claim: IdempotencyClaim, status: number, body: unknown, transaction?: Transaction): Promise<void> {
		const rows = await this.db.rows<{ key: string }>(
			`UPDATE idempotency_keys SET state = 'done', response_status = $4, response_body = $5::jsonb
			 WHERE partner_id = $1 AND key = $2 AND claim_token = $3 AND state = 'running' AND mode = $6 RETURNING key`,
			[claim.partnerId, claim.key, claim.token, status, JSON.stringify(body), claim.mode],
			transaction,
		);
		if (rows.length === 0) throw keyTakenOver();
	}

	/** Frees the key of a call that failed: nothing to replay, so a retry may run. */
	async release(claim: IdempotencyClaim): Promise<void> {
		await this.db.run("DELETE FROM idempotency_keys WHERE partner_id = $1 AND key = $2 AND claim_token = $3 AND state = 'running' AND mode = $4", [
			claim.partnerId,
			claim.key,
			claim.token,
			claim.mode,
		]);
	}

	/** Keys are replayed for 24 h; older ones are only dead weight. */
	async deleteExpired(): Promise<void> {
		await this.db.run("DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours'");
	}
}
