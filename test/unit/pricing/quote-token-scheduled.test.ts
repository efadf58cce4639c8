import { computeFare, type Tariff } from "../../../services/pricing/fare";
import { encodeQuote, QuoteKeyring, verifyQuote, type QuoteClaims } from "../../../services/pricing/quote-token";

/** Quotes for a pickup time (format 3) beside quotes for now (format 2, unchanged). */

const keyring = new QuoteKeyring("unit-test-secret-0123456789abcdefghijklmnop");
const CAB: Tariff = { currency: "INR", baseFarePaise: 5000, perKmPaise: 1400, perMinutePaise: 150, minimumFarePaise: 8000, taxBasisPoints: 500 };
const PICKUP = { lat: 12.9716, lng: 77.5946 };
const DROP = { lat: 12.9352, lng: 77.6245 };
const NOW = Date.UTC(2026, 10, 22, 10, 0, 0);
const PICKUP_AT_S = NOW / 1000 + 3600;

function claims(over: Partial<QuoteClaims> = {}): QuoteClaims {
	return {
		partnerId: "ptn_a",
		mode: "test",
		serviceType: "cab",
		pickup: PICKUP,
		drop: DROP,
		distance: 6_804,
		duration: 1_225,
		fare: computeFare(CAB, 6_804, 1_225, 10),
		expiresAt: NOW + 300_000,
		...over,
	};
}
const expecting = (pickupAtSeconds?: number) => ({ partnerId: "ptn_a", serviceType: "cab", pickup: PICKUP, drop: DROP, pickupAtSeconds });
const formatOf = (token: string) => Buffer.from(token.slice(3), "base64url")[0];

describe("quote tokens for a pickup time", () => {
	it("writes format 3 with the pickup time, and format 2 exactly as before without one", () => {
		const later = encodeQuote(claims({ pickupAtSeconds: PICKUP_AT_S }), keyring);
		const now = encodeQuote(claims(), keyring);
		expect(formatOf(later)).toBe(3);
		expect(formatOf(now)).toBe(2);
		expect(verifyQuote(later, expecting(PICKUP_AT_S), keyring, NOW)).toMatchObject({ ok: true, claims: { pickupAtSeconds: PICKUP_AT_S } });
		const plain = verifyQuote(now, expecting(), keyring, NOW);
		expect(plain.ok).toBe(true);
		expect(plain.ok && "pickupAtSeconds" in plain.claims).toBe(false);
	});

	it("books only its own pickup time: another time, a ride now, or a ride-now quote for later are QUOTE_INVALID on pickupAt", () => {
		const later = encodeQuote(claims({ pickupAtSeconds: PICKUP_AT_S }), keyring);
		const now = encodeQuote(claims(), keyring);
		const invalid = { ok: false, code: "QUOTE_INVALID", field: "pickupAt" };
		expect(verifyQuote(later, expecting(PICKUP_AT_S + 1), keyring, NOW)).toMatchObject(invalid);
		expect(verifyQuote(later, expecting(), keyring, NOW)).toMatchObject(invalid);
		expect(verifyQuote(now, expecting(PICKUP_AT_S), keyring, NOW)).toMatchObject(invalid);
	});

	it("cannot be turned into another format or time: the MAC covers the format byte and the pickup time", () => {
		const later = encodeQuote(claims({ pickupAtSeconds: PICKUP_AT_S }), keyring);
		const bytes = Buffer.from(later.slice(3), "base64url");
		const asNow = Buffer.from(bytes);
		asNow[0] = 2;
		expect(verifyQuote(`qt_${asNow.toString("base64url")}`, expecting(), keyring, NOW)).toMatchObject({ ok: false, field: "quoteId" });
		const shifted = Buffer.from(bytes);
		shifted[shifted.length - 16 - 4] ^= 1; // inside the pickup time's varint
		expect(verifyQuote(`qt_${shifted.toString("base64url")}`, expecting(PICKUP_AT_S), keyring, NOW)).toMatchObject({ ok: false, field: "quoteId" });
	});
});
