import { LOCATION_TTL_MS, type RideEventKind } from "../../contracts/notifications";
import { nextAttemptAt } from "./retry-schedule";
import type { AttemptOutcome } from "./webhook-client";

/**
 * What a finished try means for its event. Pure: the delivery loop records
 * the decision with one statement (notifications.repo.ts, RECORD_SQL).
 */

export type AfterAttempt = { state: "delivered" } | { state: "pending"; nextAttemptAt: number } | { state: "failed" | "expired" };

export interface AfterAttemptInput {
	kind: RideEventKind;
	outcome: AttemptOutcome;
	/** Tries in this round before the one that just finished. */
	roundAttemptsBefore: number;
	/** First try of this round (ms), or undefined when this was it. */
	firstAttemptAt: number | undefined;
	/** When the try that just finished started (ms). */
	attemptStartedAt: number;
	/** When the event row was made (ms); location events expire `locationTtlMs` after. */
	eventCreatedAt: number;
	/** Lifetime of a location event (default: the contract's LOCATION_TTL_MS). */
	locationTtlMs?: number;
	now: number;
	schedule: readonly number[];
	random: number;
	retryAfterMs?: number;
}

export function afterAttempt(input: AfterAttemptInput): AfterAttempt {
	if (input.outcome === "delivered") return { state: "delivered" };
	const next = nextAttemptAt({
		attemptsMade: input.roundAttemptsBefore + 1,
		firstAttemptAt: input.firstAttemptAt ?? input.attemptStartedAt,
		now: input.now,
		schedule: input.schedule,
		random: input.random,
		retryAfterMs: input.retryAfterMs,
	});
	if (input.kind === "location") {
		// Nobody wants a stale position: no retry past the event's lifetime.
		if (next === null || next > input.eventCreatedAt + (input.locationTtlMs ?? LOCATION_TTL_MS)) return { state: "expired" };
		return { state: "pending", nextAttemptAt: next };
	}
	if (next === null) return { state: "failed" };
	return { state: "pending", nextAttemptAt: next };
}
