/**
 * When to try a call again: the answer's `Retry-After` when it sent one,
 * else exponential backoff with jitter (so many clients that failed together
 * do not come back together).
 */
export interface RetrySettings {
	/** Tries after the first (0: never retry). */
	maxRetries: number;
	/** The first backoff step; each retry doubles it. */
	baseDelayMs: number;
	/** Cap of a backoff step; a `Retry-After` longer than this is not waited for (the error is thrown). */
	maxDelayMs: number;
}

export const DEFAULT_RETRY: RetrySettings = { maxRetries: 2, baseDelayMs: 500, maxDelayMs: 30_000 };

/**
 * How long to wait before retry number `retry` (0 = the first retry), or
 * null when the answer asks for a longer wait than `maxDelayMs`. With
 * `Retry-After`: at least that long, plus up to 10 % jitter. Without:
 * "equal jitter", half the doubled step plus a random part of the other half.
 */
export function retryDelayMs(retry: number, retryAfterMs: number | null, settings: RetrySettings, random: () => number = Math.random): number | null {
	if (retryAfterMs !== null) {
		if (retryAfterMs > settings.maxDelayMs) return null;
		return retryAfterMs + Math.floor(random() * retryAfterMs * 0.1);
	}
	const step = Math.min(settings.maxDelayMs, settings.baseDelayMs * 2 ** retry);
	return Math.floor(step / 2 + random() * (step / 2));
}

/** Connection failures where the request never reached the server, so even a call that writes may be sent again. */
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN"]);

/** Whether a fetch failure certainly happened before the request was sent (undici puts the system error in `cause`). */
export function failedBeforeSending(err: unknown): boolean {
	for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
		const { code, errors, cause } = e as { code?: unknown; errors?: unknown[]; cause?: unknown };
		if (typeof code === "string" && NOT_SENT_CODES.has(code)) return true;
		if (Array.isArray(errors) && errors.length > 0 && errors.every((x) => failedBeforeSending(x))) return true;
		e = cause;
	}
	return false;
}
