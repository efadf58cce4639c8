import { TokenBucketLimiter } from "../../../services/gateway/rate-limiter";

describe("per-partner token bucket", () => {
	it("allows the burst, then refuses with the wait until the next token", () => {
		const limiter = new TokenBucketLimiter({ perMinute: 60, burst: 3 });
		const t0 = 1_000_000;
		expect(limiter.take("p1", t0)).toMatchObject({ allowed: true, remaining: 2, limit: 60 });
		expect(limiter.take("p1", t0)).toMatchObject({ allowed: true, remaining: 1 });
		expect(limiter.take("p1", t0)).toMatchObject({ allowed: true, remaining: 0 });
		const refused = limiter.take("p1", t0);
		expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 1 });
	});

	it("refills at the per-minute rate and never above the burst", () => {
		const limiter = new TokenBucketLimiter({ perMinute: 60, burst: 2 });
		const t0 = 0;
		limiter.take("p", t0);
		limiter.take("p", t0);
		expect(limiter.take("p", t0 + 500).allowed).toBe(false);
		expect(limiter.take("p", t0 + 1000).allowed).toBe(true);
		// An hour idle refills only up to the burst.
		const later = t0 + 3_600_000;
		expect(limiter.take("p", later)).toMatchObject({ allowed: true, remaining: 1 });
		expect(limiter.take("p", later).allowed).toBe(true);
		expect(limiter.take("p", later).allowed).toBe(false);
	});

	it("computes Retry-After from the refill rate", () => {
		const limiter = new TokenBucketLimiter({ perMinute: 1, burst: 1 });
		expect(limiter.take("p", 0).allowed).toBe(true);
		expect(limiter.take("p", 0)).toMatchObject({ allowed: false, retryAfterSeconds: 60 });
		expect(limiter.take("p", 30_000)).toMatchObject({ allowed: false, retryAfterSeconds: 30 });
		expect(limiter.take("p", 60_000).allowed).toBe(true);
	});

	it("keeps partners apart", () => {
		const limiter = new TokenBucketLimiter({ perMinute: 60, burst: 1 });
		expect(limiter.take("a", 0).allowed).toBe(true);
		expect(limiter.take("a", 0).allowed).toBe(false);
		expect(limiter.take("b", 0).allowed).toBe(true);
	});

	it("is off with a rate of 0", () => {
		const limiter = new TokenBucketLimiter({ perMinute: 0, burst: 1 });
		expect(limiter.enabled).toBe(false);
		for (let i = 0; i < 1000; i++) expect(limiter.take("p", 0).allowed).toBe(true);
		expect(limiter.size).toBe(0);
	});

	it("stays bounded in memory with many partners", () => {
		const limiter = new TokenBucketLimiter({ perMinute: 60, burst: 5, maxKeys: 100 });
		for (let i = 0; i < 1000; i++) limiter.take(`p${i}`, i);
		expect(limiter.size).toBeLessThanOrEqual(100);
		// A forgotten bucket was full anyway, or is the oldest: a partner is never limited harder for it.
		expect(limiter.take("p0", 2000).allowed).toBe(true);
	});
});
