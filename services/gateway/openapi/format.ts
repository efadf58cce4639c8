import { DEFAULT_RETRY_SCHEDULE_MS } from "../../../contracts/notifications";

/**
 * How the documents print contract numbers, so the OpenAPI document and
 * docs/API.md (checked by test/unit/gateway/openapi-drift.test.ts) say them alike.
 */

/** 10000 → "10 s". */
export const seconds = (ms: number): string => `${ms / 1000} s`;
/** 86400000 → "24 h". */
export const hours = (ms: number): string => `${ms / 3_600_000} h`;

/** 300000 → "5 min", 7200000 → "2 h", 5000 → "5 s". */
export function humanDelay(ms: number): string {
	if (ms >= 3_600_000 && ms % 3_600_000 === 0) return hours(ms);
	if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
	return seconds(ms);
}

/** "5 s, 5 min, …, 20 h and 24 h". */
export function retrySchedule(): string {
	const delays = DEFAULT_RETRY_SCHEDULE_MS.map(humanDelay);
	return `${delays.slice(0, -1).join(", ")} and ${delays[delays.length - 1]}`;
}

/** ["a", "b"] → "`a`, `b`". */
export const codeList = (values: readonly string[]): string => values.map((v) => `\`${v}\``).join(", ");
