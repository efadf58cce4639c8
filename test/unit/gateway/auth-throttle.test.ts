import { createServer } from "node:net";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { AuthFailureThrottle } from "../../../services/gateway/auth-throttle";
import { clientAddress, throttleKey } from "../../../services/gateway/client-address";
import { readGatewaySettings } from "../../../services/gateway/gateway.settings";
import { openLimitRedis, partnerLimiter, windowOf } from "../../../services/gateway/rate-limiter";
import { ReadinessProbe, type Readiness } from "../../../services/gateway/readiness";

describe("client address", () => {
	it("is the socket's peer unless proxies are trusted; X-Forwarded-For is ignored then", () => {
		expect(clientAddress("127.0.0.2", "203.0.113.9", 0)).toBe("127.0.0.2");
		expect(clientAddress("::ffff:10.0.0.5", undefined, 0)).toBe("10.0.0.5");
		expect(clientAddress(undefined, undefined, 0)).toBe("unknown");
	});

	it("with n trusted proxies is the address n hops from the right: what the client wrote further left is never believed", () => {
		// The client forged "1.1.1.1"; our proxy appended the address it saw.
		expect(clientAddress("10.0.0.1", "1.1.1.1, 198.51.100.4", 1)).toBe("198.51.100.4");
		expect(clientAddress("10.0.0.1", ["1.1.1.1", "198.51.100.4, 10.0.0.9"], 2)).toBe("198.51.100.4");
		expect(clientAddress("10.0.0.1", "198.51.100.4:5123", 1)).toBe("198.51.100.4");
		// Fewer entries than proxies: the leftmost there is. Garbage: stop at the last real address.
		expect(clientAddress("10.0.0.1", "198.51.100.4", 3)).toBe("198.51.100.4");
		expect(clientAddress("10.0.0.1", "<script>, 198.51.100.4", 2)).toBe("198.51.100.4");
		expect(clientAddress("10.0.0.1", "", 1)).toBe("10.0.0.1");
		expect(clientAddress("10.0.0.1", undefined, 1)).toBe("10.0.0.1");
	});

	it("groups IPv6 by /64, so one subscriber cannot mint a key per request", () => {
		expect(throttleKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
		expect(throttleKey("2001:DB8:1:2:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
		expect(throttleKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
		expect(throttleKey("::1")).toBe("0:0:0:0::/64");
		expect(throttleKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
		expect(clientAddress("10.0.0.1", "[2001:db8:1:2::7]:443", 1)).toBe("2001:db8:1:2::/64");
	});
});

describe("gateway limit settings", () => {
	it("reads REDIS_URL, TRUST_PROXY, AUTH_FAILURE_LIMIT_PER_MINUTE and READY_CACHE_MS, and refuses bad values by name", () => {
		expect(readGatewaySettings({})).toMatchObject({
			redisUrl: undefined,
			trustProxyHops: 0,
			authFailureLimitPerMinute: 30,
			readyCacheMs: 1000,
			redisKeyPrefix: "ride:default",
		});
		expect(
			readGatewaySettings({ REDIS_URL: "redis://:pw@redis:6379/0", TRUST_PROXY: "true", AUTH_FAILURE_LIMIT_PER_MINUTE: "0", NAMESPACE: "prod" }),
		).toMatchObject({
			redisUrl: "redis://:pw@redis:6379/0",
			trustProxyHops: 1,
			authFailureLimitPerMinute: 0,
			redisKeyPrefix: "ride:prod",
		});
		expect(readGatewaySettings({ TRUST_PROXY: "2" }).trustProxyHops).toBe(2);
		expect(() => readGatewaySettings({ TRUST_PROXY: "maybe" })).toThrow(/TRUST_PROXY/);
		expect(() => readGatewaySettings({ AUTH_FAILURE_LIMIT_PER_MINUTE: "-1" })).toThrow(/AUTH_FAILURE_LIMIT_PER_MINUTE/);
		expect(() => readGatewaySettings({ READY_CACHE_MS: "soon" })).toThrow(/READY_CACHE_MS/);
		expect(() => readGatewaySettings({ REDIS_TIMEOUT_MS: "0" })).toThrow(/REDIS_TIMEOUT_MS/);
		// A bad REDIS_URL is refused without echoing what may be a password.
		let message = "";
		try {
			readGatewaySettings({ REDIS_URL: "http://user:s3cret@redis:6379" });
		} catch (err) {
			message = (err as Error).message;
		}
		expect(message).toMatch(/REDIS_URL/);
		expect(message).not.toMatch(/s3cret/);
		expect(() => readGatewaySettings({ REDIS_URL: "s3cret" })).toThrow(/^(?!.*s3cret).*REDIS_URL/);
	});
});

describe("failed-authentication throttle", () => {
	const throttle = (limit: number) => new AuthFailureThrottle(new RateLimiterMemory({ points: limit, duration: 60 }), limit);

	it("lets an address fail `limit` times, then refuses it with a Retry-After, other addresses untouched", async () => {
		const t = throttle(3);
		for (let i = 0; i < 3; i++) {
			expect((await t.check("198.51.100.1", `bad${i}`)).allowed).toBe(true);
			await t.failed("198.51.100.1", `bad${i}`);
		}
		const refused = await t.check("198.51.100.1", "bad3");
		expect(refused.allowed).toBe(false);
		expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
		expect(refused.retryAfterSeconds).toBeLessThanOrEqual(60);
		expect((await t.check("198.51.100.2", "bad0")).allowed).toBe(true);
	});

	it("never holds back a key that authenticated, until it fails", async () => {
		const t = throttle(1);
		await t.failed("198.51.100.1", "bad");
		expect((await t.check("198.51.100.1", "good")).allowed).toBe(false);
		t.succeeded("good");
		expect((await t.check("198.51.100.1", "good")).allowed).toBe(true);
		// Revoked since: it counts as a failure again and loses its pass.
		await t.failed("198.51.100.1", "good");
		expect((await t.check("198.51.100.1", "good")).allowed).toBe(false);
	});

	it("is off without a counter", async () => {
		const t = new AuthFailureThrottle(undefined, 0);
		for (let i = 0; i < 100; i++) await t.failed("198.51.100.1", "bad");
		expect((await t.check("198.51.100.1", "bad")).allowed).toBe(true);
	});
});

describe("shared partner limit", () => {
	it("is a window of `burst` requests per burst/perMinute minutes", () => {
		expect(windowOf({ perMinute: 600, burst: 600 })).toEqual({ points: 600, durationSeconds: 60 });
		expect(windowOf({ perMinute: 60, burst: 5 })).toEqual({ points: 5, durationSeconds: 5 });
		expect(windowOf({ perMinute: 6000, burst: 1 })).toEqual({ points: 1, durationSeconds: 1 });
	});

	it("keeps limiting in this gateway's memory while Redis is unreachable (fails open to per-gateway limits)", async () => {
		// A port nothing listens on.
		const port = await new Promise<number>((done) => {
			const srv = createServer().listen(0, "127.0.0.1", () => {
				const p = (srv.address() as { port: number }).port;
				srv.close(() => done(p));
			});
		});
		const states: string[] = [];
		const redis = openLimitRedis(`redis://127.0.0.1:${port}`, 200, (s) => states.push(s));
		try {
			const limiter = partnerLimiter({ perMinute: 3, burst: 3 }, { redis, keyPrefix: "ride:unit-dead" });
			const decisions = [];
			for (let i = 0; i < 5; i++) decisions.push(await limiter.take("ptn_1"));
			expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
			expect(decisions[4].retryAfterSeconds).toBeGreaterThanOrEqual(1);
			expect((await limiter.take("ptn_2")).allowed).toBe(true);
		} finally {
			redis.disconnect();
		}
	});

	it("is this gateway's token bucket without Redis", async () => {
		const limiter = partnerLimiter({ perMinute: 60, burst: 2 }, { keyPrefix: "x" });
		expect([(await limiter.take("p")).allowed, (await limiter.take("p")).allowed, (await limiter.take("p")).allowed]).toEqual([true, true, false]);
	});
});

describe("readiness probe", () => {
	const ready: Readiness = { ready: true, status: "ready", checks: { partners: "ok" } };

	it("runs one check for any number of concurrent probes and reuses the answer for the TTL", async () => {
		let checks = 0;
		let release!: () => void;
		let now = 0;
		const probe = new ReadinessProbe(
			() => {
				checks += 1;
				return new Promise<Readiness>((done) => (release = () => done(ready)));
			},
			1000,
			() => false,
			() => now,
		);
		const answers = Array.from({ length: 50 }, () => probe.read());
		release();
		expect(await Promise.all(answers)).toEqual(Array(50).fill(ready));
		expect(await probe.read()).toEqual(ready);
		expect(checks).toBe(1);
		now = 1000;
		const again = probe.read();
		release();
		await again;
		expect(checks).toBe(2);
	});

	it("answers draining at once, whatever is cached", async () => {
		let draining = false;
		const probe = new ReadinessProbe(
			async () => ready,
			60_000,
			() => draining,
		);
		expect((await probe.read()).status).toBe("ready");
		draining = true;
		expect(await probe.read()).toMatchObject({ ready: false, status: "draining" });
		draining = false;
		expect((await probe.read()).status).toBe("ready");
	});
});
