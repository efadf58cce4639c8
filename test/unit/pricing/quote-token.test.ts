import { createHmac } from "node:crypto";
import { destinationPoint } from "../../../lib/geo";
import { computeFare, type Tariff } from "../../../services/pricing/fare";
import { encodeQuote, keyIdOf, QuoteKeyring, verifyQuote, type QuoteClaims } from "../../../services/pricing/quote-token";

const SECRET = "unit-test-secret-0123456789abcdefghijklmnop";
const OTHER_SECRET = "another-secret-0123456789abcdefghijklmnopqrs";
const CAB: Tariff = { currency: "INR", baseFarePaise: 5000, perKmPaise: 1400, perMinutePaise: 150, minimumFarePaise: 8000, taxBasisPoints: 500 };
const PICKUP = { lat: 12.9716049, lng: 77.5946012 };
const DROP = { lat: 12.9352, lng: 77.6245 };
const NOW = Date.UTC(2026, 10, 22, 10, 0, 0);

function claims(over: Partial<QuoteClaims> = {}): QuoteClaims {
	return {
		partnerId: "ptn_a",
		mode: "test",
		serviceType: "cab",
		pickup: PICKUP,
		drop: DROP,
		distance: 6_804,
		duration: 1_225,
		fare: computeFare(CAB, 6_804, 1_225, 12),
		expiresAt: NOW + 300_000,
		...over,
	};
}
const expectFor = (
	over: Partial<{
		partnerId: string;
		mode: "test" | "live";
		serviceType: string;
		pickup: { lat: number; lng: number };
		drop: { lat: number; lng: number };
	}> = {},
) => ({
	partnerId: "ptn_a",
	serviceType: "cab",
	pickup: PICKUP,
	drop: DROP,
	...over,
});

describe("quote tokens", () => {
	const keyring = new QuoteKeyring(SECRET);

	it("belong to the key mode that asked: a test quote is invalid for a live key and the reverse", () => {
		const test = encodeQuote(claims(), keyring);
		const live = encodeQuote(claims({ mode: "live" }), keyring);
		expect(verifyQuote(test, expectFor(), keyring, NOW)).toMatchObject({ ok: true, claims: { mode: "test" } });
		expect(verifyQuote(live, expectFor({ mode: "live" }), keyring, NOW)).toMatchObject({ ok: true, claims: { mode: "live" } });
		expect(verifyQuote(test, expectFor({ mode: "live" }), keyring, NOW)).toMatchObject({ ok: false, code: "QUOTE_INVALID", field: "quoteId" });
		expect(verifyQuote(live, expectFor(), keyring, NOW)).toMatchObject({ ok: false, code: "QUOTE_INVALID", field: "quoteId" });
		// Even expired, a quote of the other mode says only "invalid".
		expect(verifyQuote(live, expectFor({ mode: "test" }), keyring, NOW + 600_000)).toMatchObject({ ok: false, code: "QUOTE_INVALID" });
	});

	it("round-trips the price, trip and expiry", () => {
		const token = encodeQuote(claims(), keyring);
		// One base64url blob, under 100 characters.
		expect(token).toMatch(/^qt_[A-Za-z0-9_-]+$/);
		expect(token.length).toBeLessThan(100);
		const check = verifyQuote(token, expectFor(), keyring, NOW);
		expect(check.ok).toBe(true);
		if (!check.ok) return;
		const { minimumApplied: _ignored, ...fare } = computeFare(CAB, 6_804, 1_225, 12);
		expect(check.claims).toEqual({
			partnerId: "ptn_a",
			mode: "test",
			serviceType: "cab",
			pickup: { lat: 12.9716, lng: 77.5946 }, // rounded to 5 decimals
			drop: DROP,
			distance: 6_804,
			duration: 1_225,
			fare,
			expiresAt: NOW + 300_000,
		});
	});

	it("refuses a tampered payload, MAC, key id or spelling, and garbage, as QUOTE_INVALID", () => {
		const token = encodeQuote(claims(), keyring);
		const bytes = Buffer.from(token.slice(3), "base64url");
		const b64 = (b: Buffer) => `qt_${b.toString("base64url")}`;
		const flip = (i: number) => {
			const copy = Buffer.from(bytes);
			copy[i] ^= 0x01;
			return b64(copy);
		};
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
		const last = token[token.length - 1];
		const respelled = token.slice(0, -1) + alphabet[alphabet.indexOf(last) ^ 1];
		// Only a length that leaves spare bits in the last character can be respelled into the same bytes.
		const sameBytes = Buffer.from(respelled.slice(3), "base64url").equals(bytes);
		const forgeries = [
			...Array.from({ length: bytes.length }, (_, i) => flip(i)), // every byte: version, kid, type, trip, fare, currency, MAC
			b64(bytes.subarray(0, bytes.length - 1)), // truncated MAC
			b64(Buffer.concat([bytes, Buffer.from([0])])), // trailing byte
			...(sameBytes ? [respelled] : []),
			`${token}x`,
			token.slice(3),
			`qt_${token.slice(3, -1)}=`,
			"qt_garbage",
			"",
		];
		for (const forged of forgeries) {
			expect(verifyQuote(forged, expectFor(), keyring, NOW)).toMatchObject({ ok: false, code: "QUOTE_INVALID", message: "Quote is invalid" });
		}
		expect(verifyQuote(42, expectFor(), keyring, NOW)).toMatchObject({ ok: false, code: "QUOTE_INVALID" });
	});

	it("keeps the expiry in whole seconds, rounded down (a quote never lives longer than it said)", () => {
		const token = encodeQuote(claims({ expiresAt: NOW + 300_750 }), keyring);
		const check = verifyQuote(token, expectFor(), keyring, NOW);
		expect(check).toMatchObject({ ok: true, claims: { expiresAt: NOW + 300_000 } });
	});

	it('signs with HMAC-SHA256(secret, "qt2" ‖ payload ‖ partner length ‖ partner ‖ mode), keeping its first 16 bytes', () => {
		for (const [partnerId, mode, modeByte] of [
			["ptn_a", "test", 0x74],
			["ptn_é".repeat(40), "live", 0x6c],
		] as const) {
			const bytes = Buffer.from(encodeQuote(claims({ partnerId, mode }), keyring).slice(3), "base64url");
			const payload = bytes.subarray(0, bytes.length - 16);
			const partner = Buffer.from(partnerId, "utf8");
			// The partner's byte length as a varint: one byte under 128, two from there.
			const length = partner.length < 0x80 ? Buffer.from([partner.length]) : Buffer.from([(partner.length & 0x7f) | 0x80, partner.length >> 7]);
			const mac = createHmac("sha256", SECRET)
				.update(Buffer.concat([Buffer.from("qt2"), payload, length, partner, Buffer.from([modeByte])]))
				.digest();
			expect(bytes.subarray(bytes.length - 16)).toEqual(mac.subarray(0, 16));
			expect(verifyQuote(`qt_${bytes.toString("base64url")}`, expectFor({ partnerId, mode }), keyring, NOW).ok).toBe(true);
		}
	});

	it("refuses a token signed with another secret", () => {
		const token = encodeQuote(claims(), new QuoteKeyring(OTHER_SECRET));
		expect(verifyQuote(token, expectFor(), keyring, NOW)).toMatchObject({ ok: false, code: "QUOTE_INVALID" });
	});

	it("treats another partner's quote exactly like garbage, even when expired", () => {
		const token = encodeQuote(claims(), keyring);
		const foreign = verifyQuote(token, expectFor({ partnerId: "ptn_b" }), keyring, NOW);
		expect(foreign).toEqual(verifyQuote("qt_garbage", expectFor({ partnerId: "ptn_b" }), keyring, NOW));
		expect(verifyQuote(token, expectFor({ partnerId: "ptn_b" }), keyring, NOW + 3_600_000)).toMatchObject({ code: "QUOTE_INVALID" });
	});

	it("refuses another service type", () => {
		const token = encodeQuote(claims(), keyring);
		expect(verifyQuote(token, expectFor({ serviceType: "scooty" }), keyring, NOW)).toMatchObject({
			ok: false,
			code: "QUOTE_INVALID",
			field: "serviceType",
		});
	});

	it("accepts pickup and drop within 200 m and refuses them beyond", () => {
		const token = encodeQuote(claims(), keyring);
		const near = destinationPoint(PICKUP, 45, 190);
		const far = destinationPoint(PICKUP, 45, 210);
		expect(verifyQuote(token, expectFor({ pickup: near }), keyring, NOW).ok).toBe(true);
		expect(verifyQuote(token, expectFor({ pickup: far }), keyring, NOW)).toMatchObject({ ok: false, code: "QUOTE_INVALID", field: "pickup" });
		expect(verifyQuote(token, expectFor({ drop: destinationPoint(DROP, 200, 190) }), keyring, NOW).ok).toBe(true);
		expect(verifyQuote(token, expectFor({ drop: destinationPoint(DROP, 200, 250) }), keyring, NOW)).toMatchObject({
			ok: false,
			code: "QUOTE_INVALID",
			field: "drop",
		});
	});

	it("expires at expiresAt (injected clock), and only a genuine token says so", () => {
		const token = encodeQuote(claims(), keyring);
		expect(verifyQuote(token, expectFor(), keyring, NOW + 299_999).ok).toBe(true);
		expect(verifyQuote(token, expectFor(), keyring, NOW + 300_000)).toMatchObject({ ok: false, code: "QUOTE_EXPIRED" });
		// A forged copy of an expired token is invalid, not expired.
		const forged = token.slice(0, -2) + (token.endsWith("AA") ? "BB" : "AA");
		expect(verifyQuote(forged, expectFor(), keyring, NOW + 300_000)).toMatchObject({ code: "QUOTE_INVALID" });
		// A mismatching trip on an expired token reports the mismatch, not the expiry.
		expect(verifyQuote(token, expectFor({ serviceType: "scooty" }), keyring, NOW + 300_000)).toMatchObject({ code: "QUOTE_INVALID" });
	});

	it("supports key rotation: old secrets still verify, the new one signs", () => {
		const oldToken = encodeQuote(claims(), new QuoteKeyring(OTHER_SECRET));
		const rotated = new QuoteKeyring(SECRET, [OTHER_SECRET]);
		expect(rotated.currentKid).toBe(keyIdOf(SECRET));
		expect(verifyQuote(oldToken, expectFor(), rotated, NOW).ok).toBe(true);
		const newToken = encodeQuote(claims(), rotated);
		// The kid is the 4 bytes after the version byte.
		expect(Buffer.from(newToken.slice(3), "base64url").toString("hex", 1, 5)).toBe(keyIdOf(SECRET));
		expect(verifyQuote(newToken, expectFor(), rotated, NOW).ok).toBe(true);
		// Once the old secret is dropped, its tokens are invalid.
		expect(verifyQuote(oldToken, expectFor(), new QuoteKeyring(SECRET), NOW)).toMatchObject({ code: "QUOTE_INVALID" });
	});

	it("refuses to build a keyring without a secret", () => {
		expect(() => new QuoteKeyring("")).toThrow();
	});
});
