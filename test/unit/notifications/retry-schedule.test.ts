import { DEFAULT_RETRY_SCHEDULE_MS, LOCATION_TTL_MS } from "../../../contracts/notifications";
import { WEBHOOK_RETRY_JITTER as MAX_JITTER } from "../../../contracts/constants";
import { maxAttempts, nextAttemptAt, parseRetryAfter } from "../../../services/notifications/retry-schedule";
import { afterAttempt } from "../../../services/notifications/delivery-policy";
import { parseSchedule } from "../../../lib/settings";

const S = 1_000;
const M = 60 * S;
const H = 60 * M;

describe("retry schedule (Standard Webhooks, offsets after the first try)", () => {
	const first = 1_000_000;

	it("is the contract's schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h, ten tries in all", () => {
		expect(DEFAULT_RETRY_SCHEDULE_MS).toEqual([5 * S, 5 * M, 30 * M, 2 * H, 5 * H, 10 * H, 14 * H, 20 * H, 24 * H]);
		expect(maxAttempts(DEFAULT_RETRY_SCHEDULE_MS)).toBe(10);
	});

	it("schedules each retry at its offset from the first try when there is no jitter", () => {
		DEFAULT_RETRY_SCHEDULE_MS.forEach((offset, i) => {
			const at = nextAttemptAt({ attemptsMade: i + 1, firstAttemptAt: first, now: first, schedule: DEFAULT_RETRY_SCHEDULE_MS, random: 0 });
			expect(at).toBe(first + offset);
		});
	});

	it("adds at most 10% jitter, never earlier than the offset", () => {
		for (const random of [0, 0.25, 0.5, 0.999999]) {
			const at = nextAttemptAt({ attemptsMade: 2, firstAttemptAt: first, now: first, schedule: DEFAULT_RETRY_SCHEDULE_MS, random })!;
			expect(at).toBeGreaterThanOrEqual(first + 5 * M);
			expect(at).toBeLessThanOrEqual(first + 5 * M * (1 + MAX_JITTER));
		}
		const top = nextAttemptAt({ attemptsMade: 9, firstAttemptAt: first, now: first, schedule: DEFAULT_RETRY_SCHEDULE_MS, random: 0.999999 })!;
		expect(top - first).toBeGreaterThan(24 * H * 1.09);
	});

	it("returns null after the last try", () => {
		expect(nextAttemptAt({ attemptsMade: 10, firstAttemptAt: first, now: first, schedule: DEFAULT_RETRY_SCHEDULE_MS, random: 0 })).toBeNull();
		expect(nextAttemptAt({ attemptsMade: 4, firstAttemptAt: first, now: first, schedule: [10, 20, 30], random: 0 })).toBeNull();
		expect(nextAttemptAt({ attemptsMade: 1, firstAttemptAt: first, now: first, schedule: [], random: 0 })).toBeNull();
	});

	it("never schedules in the past (a slow try or a late poll)", () => {
		const now = first + 10 * M;
		expect(nextAttemptAt({ attemptsMade: 2, firstAttemptAt: first, now, schedule: DEFAULT_RETRY_SCHEDULE_MS, random: 0 })).toBe(now);
	});

	it("honours Retry-After when it asks for later than the schedule, and caps it at a day", () => {
		expect(
			nextAttemptAt({ attemptsMade: 1, firstAttemptAt: first, now: first, schedule: DEFAULT_RETRY_SCHEDULE_MS, random: 0, retryAfterMs: 60 * S }),
		).toBe(first + 60 * S);
		expect(nextAttemptAt({ attemptsMade: 2, firstAttemptAt: first, now: first, schedule: DEFAULT_RETRY_SCHEDULE_MS, random: 0, retryAfterMs: 1 * S })).toBe(
			first + 5 * M,
		);
		expect(
			nextAttemptAt({ attemptsMade: 1, firstAttemptAt: first, now: first, schedule: DEFAULT_RETRY_SCHEDULE_MS, random: 0, retryAfterMs: 30 * 24 * H }),
		).toBe(first + 24 * H);
	});

	it("rejects a nonsensical try count", () => {
		expect(() => nextAttemptAt({ attemptsMade: 0, firstAttemptAt: first, now: first, schedule: DEFAULT_RETRY_SCHEDULE_MS, random: 0 })).toThrow(RangeError);
	});

	it("WEBHOOK_RETRY_SCHEDULE_MS replaces the schedule", () => {
		const schedule = parseSchedule("100, 200,400")!;
		expect(schedule).toEqual([100, 200, 400]);
		expect(maxAttempts(schedule)).toBe(4);
		expect(nextAttemptAt({ attemptsMade: 3, firstAttemptAt: first, now: first, schedule, random: 0 })).toBe(first + 400);
		expect(() => parseSchedule("100,abc")).toThrow();
		expect(() => parseSchedule("-5")).toThrow();
		expect(parseSchedule(undefined)).toBeUndefined();
	});
});

describe("Retry-After", () => {
	const now = Date.parse("2026-11-22T10:00:00Z");
	it("reads delta-seconds and HTTP dates on 429 and 503 only", () => {
		expect(parseRetryAfter(429, "120", now)).toBe(120_000);
		expect(parseRetryAfter(503, " 7 ", now)).toBe(7_000);
		expect(parseRetryAfter(503, "Sun, 22 Nov 2026 10:01:00 GMT", now)).toBe(60_000);
		expect(parseRetryAfter(503, "Sun, 22 Nov 2026 09:00:00 GMT", now)).toBe(0);
		expect(parseRetryAfter(500, "120", now)).toBeUndefined();
		expect(parseRetryAfter(429, undefined, now)).toBeUndefined();
		expect(parseRetryAfter(429, "soon", now)).toBeUndefined();
		expect(parseRetryAfter(429, ["30", "40"], now)).toBe(30_000);
	});
});

describe("what a finished try means for its event", () => {
	const t0 = 5_000_000;
	const base = {
		roundAttemptsBefore: 0,
		firstAttemptAt: undefined,
		attemptStartedAt: t0,
		eventCreatedAt: t0,
		now: t0 + 100,
		schedule: [1_000, 5_000],
		random: 0,
	};

	it("any 2xx is delivered", () => {
		expect(afterAttempt({ ...base, kind: "status", outcome: "delivered" })).toEqual({ state: "delivered" });
	});

	it("a failed status event waits for its next offset, then fails after the last try", () => {
		expect(afterAttempt({ ...base, kind: "status", outcome: "HTTP_5XX" })).toEqual({ state: "pending", nextAttemptAt: t0 + 1_000 });
		expect(
			afterAttempt({
				...base,
				kind: "status",
				outcome: "TIMEOUT",
				roundAttemptsBefore: 1,
				firstAttemptAt: t0,
				attemptStartedAt: t0 + 1_000,
				now: t0 + 1_200,
			}),
		).toEqual({
			state: "pending",
			nextAttemptAt: t0 + 5_000,
		});
		expect(afterAttempt({ ...base, kind: "status", outcome: "HTTP_4XX", roundAttemptsBefore: 2, firstAttemptAt: t0 })).toEqual({ state: "failed" });
	});

	it("a location event is never retried past its 120 s lifetime", () => {
		expect(afterAttempt({ ...base, kind: "location", outcome: "CONNECTION" })).toEqual({ state: "pending", nextAttemptAt: t0 + 1_000 });
		const late = { ...base, kind: "location" as const, outcome: "HTTP_5XX" as const, eventCreatedAt: t0 - LOCATION_TTL_MS + 500 };
		expect(afterAttempt(late)).toEqual({ state: "expired" });
		expect(afterAttempt({ ...base, kind: "location", outcome: "HTTP_5XX", roundAttemptsBefore: 2, firstAttemptAt: t0 })).toEqual({ state: "expired" });
	});

	it("takes the location lifetime from the setting when one is given (WEBHOOK_LOCATION_TTL_MS)", () => {
		// Made 1.5 s ago, next try in 1 s: inside a 120 s lifetime, past a 2 s one.
		const event = { ...base, kind: "location" as const, outcome: "HTTP_5XX" as const, eventCreatedAt: t0 - 1_500 };
		expect(afterAttempt(event)).toEqual({ state: "pending", nextAttemptAt: t0 + 1_000 });
		expect(afterAttempt({ ...event, locationTtlMs: 2_000 })).toEqual({ state: "expired" });
		expect(afterAttempt({ ...event, locationTtlMs: 3_000 })).toEqual({ state: "pending", nextAttemptAt: t0 + 1_000 });
	});
});
