import { WEBHOOK_RETRY_JITTER } from "../../contracts/constants";

/**
 * When to try a webhook again (API.md, "Webhooks"): retries at the offsets
 * of the schedule (contracts/notifications.ts, DEFAULT_RETRY_SCHEDULE_MS, or
 * `WEBHOOK_RETRY_SCHEDULE_MS`) AFTER THE FIRST TRY, each with up to 10%
 * jitter (WEBHOOK_RETRY_JITTER; later, never earlier).
 *
 * Pure functions: no clock, no randomness of their own (both are passed in).
 */

const SECOND = 1_000;

/** A `Retry-After` beyond this is capped: one day is the whole schedule. */
export const MAX_RETRY_AFTER_MS = 24 * 60 * 60 * SECOND;

/** Total tries of one event: the first plus one per schedule entry. */
export function maxAttempts(schedule: readonly number[]): number {
	return schedule.length + 1;
}

export interface NextAttemptInput {
	/** Tries made so far in this round, including the one that just failed (≥ 1). */
	attemptsMade: number;
	/** When the first try of this round started (ms since epoch). */
	firstAttemptAt: number;
	/** Now (ms since epoch). */
	now: number;
	schedule: readonly number[];
	/** A number in [0, 1) (Math.random in production). */
	random: number;
	/** Parsed `Retry-After` of a 429/503 answer, in ms from now. */
	retryAfterMs?: number;
}

/**
 * When to try again after a failed try, or `null` when that was the last try
 * (the event becomes `failed`). Never before the scheduled offset, never
 * before what the partner asked for with `Retry-After`, never in the past.
 */
export function nextAttemptAt(input: NextAttemptInput): number | null {
	const { attemptsMade, firstAttemptAt, now, schedule, random, retryAfterMs } = input;
	if (!Number.isInteger(attemptsMade) || attemptsMade < 1) throw new RangeError("attemptsMade must be a positive integer");
	if (attemptsMade >= maxAttempts(schedule)) return null;
	const offset = schedule[attemptsMade - 1];
	const jitter = Math.min(Math.max(random, 0), 1) * WEBHOOK_RETRY_JITTER * offset;
	let at = Math.max(now, firstAttemptAt + offset + jitter);
	if (retryAfterMs !== undefined && retryAfterMs > 0) at = Math.max(at, now + Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
	return Math.round(at);
}

/**
 * `Retry-After` as delta-seconds or an HTTP date, in ms from `now`;
 * undefined when absent or unreadable. Only 429 and 503 carry one we honour.
 */
export function parseRetryAfter(status: number, header: string | string[] | undefined, now: number): number | undefined {
	if (status !== 429 && status !== 503) return undefined;
	const value = Array.isArray(header) ? header[0] : header;
	if (value === undefined) return undefined;
	const text = value.trim();
	if (/^\d+$/.test(text)) return Number(text) * SECOND;
	const date = Date.parse(text);
	if (Number.isNaN(date)) return undefined;
	return Math.max(0, date - now);
}
