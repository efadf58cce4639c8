import { AuthCache, OncePer } from "../../../lib/auth-cache";
import { AUTH_CACHE_MS, readPartnersSettings } from "../../../services/partners/partners.settings";

const STRONG = "dev_key_change_me_0123456789abcdef";

describe("partners settings", () => {
	it("reads the bootstrap partner, blank meaning unset", () => {
		expect(readPartnersSettings({})).toEqual({
			authCacheMs: AUTH_CACHE_MS,
			bootstrapPartnerKey: undefined,
			bootstrapWebhookSecret: undefined,
			bootstrapPartnerMode: "test",
			sharedSecretTestTransitionDays: 30,
		});
		expect(readPartnersSettings({ SHARED_SECRET_TEST_TRANSITION_DAYS: "0" }).sharedSecretTestTransitionDays).toBe(0);
		expect(() => readPartnersSettings({ SHARED_SECRET_TEST_TRANSITION_DAYS: "1.5" })).toThrow(/SHARED_SECRET_TEST_TRANSITION_DAYS/);
		expect(() => readPartnersSettings({ SHARED_SECRET_TEST_TRANSITION_DAYS: "-1" })).toThrow(/SHARED_SECRET_TEST_TRANSITION_DAYS/);
		expect(readPartnersSettings({ BOOTSTRAP_PARTNER_MODE: "live" }).bootstrapPartnerMode).toBe("live");
		expect(() => readPartnersSettings({ BOOTSTRAP_PARTNER_MODE: "prod" })).toThrow(/BOOTSTRAP_PARTNER_MODE/);
		const secret = `whsec_${Buffer.alloc(24, 7).toString("base64")}`;
		expect(readPartnersSettings({ BOOTSTRAP_PARTNER_KEY: STRONG, BOOTSTRAP_WEBHOOK_SECRET: secret })).toMatchObject({
			bootstrapPartnerKey: STRONG,
			bootstrapWebhookSecret: secret,
		});
		expect(readPartnersSettings({ BOOTSTRAP_WEBHOOK_SECRET: "" }).bootstrapWebhookSecret).toBeUndefined();
		expect(readPartnersSettings({ BOOTSTRAP_PARTNER_KEY: " " }).bootstrapPartnerKey).toBeUndefined();
	});

	it("refuses a malformed bootstrap webhook secret, naming the setting without echoing it", () => {
		const read = () => readPartnersSettings({ BOOTSTRAP_WEBHOOK_SECRET: "whsec_tooshort" });
		expect(read).toThrow(/^BOOTSTRAP_WEBHOOK_SECRET must be whsec_ \+ base64 of at least 24 bytes/);
		expect(read).not.toThrow(/tooshort/);
	});

	it.each([
		["too short", "dev_key_change_me_0123456789"],
		["a guessable word", "changeme"],
		["outside the charset", "dev key change me 0123456789abcdef"],
		["outside the charset (punctuation)", "dev_key_change_me_0123456789abcd$f"],
	])("refuses a weak BOOTSTRAP_PARTNER_KEY (%s), naming the setting without echoing it", (_why, key) => {
		const read = () => readPartnersSettings({ BOOTSTRAP_PARTNER_KEY: key });
		expect(read).toThrow(/^BOOTSTRAP_PARTNER_KEY must be at least 32 characters, each of A-Z a-z 0-9 _ -/);
		expect(read).not.toThrow(key);
	});

	it("refuses BOOTSTRAP_PARTNER_KEY in production unless ALLOW_BOOTSTRAP_PARTNER=true", () => {
		const read = (extra: Record<string, string>) => () => readPartnersSettings({ NODE_ENV: "production", BOOTSTRAP_PARTNER_KEY: STRONG, ...extra });
		expect(read({})).toThrow(/^BOOTSTRAP_PARTNER_KEY must be unset when NODE_ENV=production, unless ALLOW_BOOTSTRAP_PARTNER=true/);
		expect(read({ ALLOW_BOOTSTRAP_PARTNER: "false" })).toThrow(/BOOTSTRAP_PARTNER_KEY/);
		expect(read({ ALLOW_BOOTSTRAP_PARTNER: "maybe" })).toThrow(/^ALLOW_BOOTSTRAP_PARTNER/);
		expect(read({ ALLOW_BOOTSTRAP_PARTNER: "true" })().bootstrapPartnerKey).toBe(STRONG);
		// Production without a bootstrap key is the normal case.
		expect(readPartnersSettings({ NODE_ENV: "production" }).bootstrapPartnerKey).toBeUndefined();
	});
});

describe("AuthCache", () => {
	let now = 0;
	const clock = () => now;
	beforeEach(() => {
		now = 1_000;
	});

	it("remembers hits and misses for its TTL only", () => {
		const cache = new AuthCache<{ id: string }>(1_000, 10, 10, clock);
		expect(cache.get("k")).toBeUndefined();
		cache.set("k", null);
		cache.set("h", { id: "p" });
		now += 999;
		expect(cache.get("k")).toEqual({ value: null });
		expect(cache.get("h")).toEqual({ value: { id: "p" } });
		now += 2;
		expect(cache.get("k")).toBeUndefined();
		expect(cache.get("h")).toBeUndefined();
	});

	it("stays bounded, evicting the least recently used", () => {
		const cache = new AuthCache<{ n: number }>(60_000, 2, 2, clock);
		cache.set("a", { n: 1 });
		cache.set("b", { n: 2 });
		cache.get("a");
		cache.set("c", { n: 3 });
		expect(cache.get("a")).toEqual({ value: { n: 1 } });
		expect(cache.get("b")).toBeUndefined();
		expect(cache.size.hits).toBe(2);
	});

	it("10,000 random keys (misses) cannot flush a good key", () => {
		const cache = new AuthCache<{ id: string }>(60_000, 100, 1_000, clock);
		cache.set("good", { id: "ptn_good" });
		for (let i = 0; i < 10_001; i++) cache.set(`random-${i}`, null);
		expect(cache.get("good")).toEqual({ value: { id: "ptn_good" } });
		expect(cache.size.misses).toBe(1_000);
	});

	it("clear() forgets everything, and a lookup that began before it does not put back what it read", () => {
		const cache = new AuthCache<{ id: string }>(60_000, 10, 10, clock);
		cache.set("k", { id: "p" });
		const before = cache.generation;
		cache.clear();
		expect(cache.get("k")).toBeUndefined();
		cache.set("k", { id: "p" }, before);
		expect(cache.get("k")).toBeUndefined();
		cache.set("k", { id: "p" }, cache.generation);
		expect(cache.get("k")).toEqual({ value: { id: "p" } });
	});

	it("a key that becomes known replaces its cached miss", () => {
		const cache = new AuthCache<{ id: string }>(60_000, 10, 10, clock);
		cache.set("k", null);
		cache.set("k", { id: "p" });
		expect(cache.get("k")).toEqual({ value: { id: "p" } });
	});
});

describe("OncePer (last-used writes)", () => {
	it("says yes once per key per interval", () => {
		let now = 1_000;
		const once = new OncePer(60_000, 100, () => now);
		expect(once.take("a")).toBe(true);
		expect(once.take("a")).toBe(false);
		expect(once.take("b")).toBe(true);
		now = 60_999;
		expect(once.take("a")).toBe(false);
		now = 61_001;
		expect(once.take("a")).toBe(true);
	});
});
