import type { AttemptOutcome } from "./webhook-client";

/**
 * The circuit breaker per (partner, host), as pure rules. Its state lives in
 * PostgreSQL (`webhook_partner_hosts`, one row per partner and host:port that
 * ever failed), so every instance sees the same state; the claim
 * (notifications.repo.ts) reads it. It is per partner so that, on a receiver
 * shared by several partners, one partner's failing path never pauses the
 * others' deliveries to it:
 *
 *  - closed: the pair gets its normal share (WEBHOOK_HOST_CONCURRENCY);
 *  - open (`open_until` in the future): nothing of that partner is claimed
 *    for the host, its events wait (status events keep their retry round: no try was made);
 *  - half-open (`open_until` passed): one probe at a time, across instances.
 *    An answer (any HTTP status) closes the breaker; a failed probe opens it
 *    again for twice as long (up to WEBHOOK_BREAKER_MAX_OPEN_MS).
 */

export type BreakerPhase = "closed" | "open" | "half-open";

export interface HostBreakerState {
	/** Consecutive failures (timeouts, refused connections, DNS) since the last answer. */
	failures: number;
	/** How many times in a row the breaker opened (0 when closed by an answer). */
	opens: number;
	phase: BreakerPhase;
}

export interface BreakerSettings {
	failureThreshold: number;
	openMs: number;
	maxOpenMs: number;
}

/** What a try says about its host: it did not answer in time or at all (failure), it answered (success), or nothing (neutral). */
export function hostVerdict(outcome: AttemptOutcome): "failure" | "success" | "neutral" {
	if (outcome === "TIMEOUT" || outcome === "CONNECTION" || outcome === "DNS") return "failure";
	// An address the SSRF policy refused never reached a host.
	if (outcome === "BLOCKED_ADDRESS") return "neutral";
	return "success";
}

/** How long the breaker stays open when it opens for the `opens`+1-th time in a row. */
export function openDurationMs(opens: number, s: BreakerSettings): number {
	const max = Math.max(s.maxOpenMs, s.openMs);
	return Math.min(s.openMs * 2 ** Math.min(Math.max(opens, 0), 30), max);
}

/**
 * The state after one more failure. `openForMs` is set when the breaker
 * opens (again) now: the row's `open_until` becomes now + openForMs (the
 * database's clock); null keeps `open_until` as it is.
 */
export function afterHostFailure(state: HostBreakerState, s: BreakerSettings): { failures: number; opens: number; openForMs: number | null } {
	const failures = state.failures + 1;
	// Open already: tries started before it opened still end in failures; they do not extend the pause.
	if (state.phase === "open") return { failures, opens: state.opens, openForMs: null };
	// The half-open probe failed, or the threshold is reached.
	if (state.phase === "half-open" || failures >= s.failureThreshold) {
		return { failures, opens: state.opens + 1, openForMs: openDurationMs(state.opens, s) };
	}
	return { failures, opens: state.opens, openForMs: null };
}
