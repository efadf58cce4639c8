import { AuthCache } from "../../services/partners/auth-cache";
import { AUTH_CACHE_MS, readPartnersSettings } from "../../services/partners/partners.settings";

describe("partners settings", () => {
	it("reads the bootstrap partner, blank meaning unset", () => {
		expect(readPartnersSettings({})).toEqual({ authCacheMs: AUTH_CACHE_MS, bootstrapPartnerKey: undefined, bootstrapWebhookSecret: undefined });
		const secret = `whsec_${Buffer.alloc(24, 7).toString("base64")}`;
		expect(readPartnersSettings({ BOOTSTRAP_PARTNER_KEY: "dev_key_change_me_0123456789", BOOTSTRAP_WEBHOOK_SECRET: secret })).toMatchObject({
			bootstrapPartnerKey: "dev_key_change_me_0123456789",
			bootstrapWebhookSecret: secret,
		});
		expect(readPartnersSettings({ BOOTSTRAP_WEBHOOK_SECRET: "" }).bootstrapWebhookSecret).toBeUndefined();
	});

	it("refuses a malformed bootstrap webhook secret, naming the setting without echoing it", () => {
		const read = () => readPartnersSettings({ BOOTSTRAP_WEBHOOK_SECRET: "whsec_tooshort" });
		expect(read).toThrow(/^BOOTSTRAP_WEBHOOK_SECRET must be whsec_ \+ base64 of at least 24 bytes/);
		expect(read).not.toThrow(/tooshort/);
	});
});

describe("AuthCache", () => {
	it("remembers hits and misses for its TTL only", () => {
		const cache = new AuthCache<string | null>(1_000);
		expect(cache.get("k", 0)).toBeUndefined();
		cache.set("k", null, 0);
		expect(cache.get("k", 999)).toEqual({ value: null });
		expect(cache.get("k", 1_000)).toBeUndefined();
	});

	it("starts over instead of growing past its bound", () => {
		const cache = new AuthCache<number>(1_000, 2);
		for (const [i, key] of ["a", "b", "c"].entries()) cache.set(key, i, 0);
		cache.set("d", 3, 0);
		expect(cache.get("a", 0)).toBeUndefined();
		expect(cache.get("d", 0)).toEqual({ value: 3 });
	});
});
