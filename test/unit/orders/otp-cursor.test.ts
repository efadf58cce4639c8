import { otpMatches, otpTryAllowed, otpTriesLeft } from "../../../services/orders/otp";
import { decodeActiveCursor, decodeEventsCursor, encodeActiveCursor, encodeEventsCursor } from "../../../services/orders/cursor";
import { planTransition } from "../../../services/orders/transition-plan";
import { readOrdersSettings } from "../../../services/orders/orders.settings";

describe("OTP rules", () => {
	it("matches only the exact OTP, whatever the given value's length or type", () => {
		expect(otpMatches("0421", "0421")).toBe(true);
		for (const wrong of ["0420", "042", "04210", "", " 0421", 421, null, undefined, ["0421"]]) expect(otpMatches(wrong, "0421")).toBe(false);
	});

	it("allows tries until the limit, then none", () => {
		expect([0, 4, 5, 6].map((n) => otpTryAllowed(n, 5))).toEqual([true, true, false, false]);
		expect([0, 3, 5, 9].map((n) => otpTriesLeft(n, 5))).toEqual([5, 2, 0, 0]);
	});

	it("a start with a wrong OTP is INVALID_OTP (constant-time compare in the plan)", () => {
		expect(() => planTransition({ orderId: "ord_1", to: "started", otp: "1111" }, { status: "arrived", otp: "0421" })).toThrow(
			expect.objectContaining({ type: "INVALID_OTP", code: 422 }),
		);
		expect(planTransition({ orderId: "ord_1", to: "started", otp: "0421" }, { status: "arrived", otp: "0421" }).from).toBe("arrived");
	});

	it("OTP_MAX_TRIES defaults to 5 and refuses start-up when invalid, naming it", () => {
		expect(readOrdersSettings({}).otpMaxTries).toBe(5);
		expect(readOrdersSettings({ OTP_MAX_TRIES: "3" }).otpMaxTries).toBe(3);
		for (const bad of ["0", "21", "2.5", "five"]) expect(() => readOrdersSettings({ OTP_MAX_TRIES: bad })).toThrow(/OTP_MAX_TRIES/);
	});
});

describe("page cursors", () => {
	it("round-trips an events cursor and refuses anything else", () => {
		for (const n of [0, 1, 99, 10_001, 2_147_483_647]) expect(decodeEventsCursor(encodeEventsCursor(n))).toBe(n);
		const bad = [
			"",
			"abc",
			"12",
			"ev1:5",
			Buffer.from("ev1:-1").toString("base64url"),
			Buffer.from("ev1:01").toString("base64url"),
			Buffer.from("ev1:1e3").toString("base64url"),
			Buffer.from("ev1:99999999999").toString("base64url"),
			Buffer.from("ac1:5").toString("base64url"),
			"ZXYxOjU=",
			"!!!!",
		];
		for (const c of bad) expect(decodeEventsCursor(c)).toBeNull();
	});

	it("round-trips an active-rides keyset cursor and refuses anything else", () => {
		const key = { createdAt: "2026-01-31T10:00:00.123456Z", id: "ord_abc123" };
		expect(decodeActiveCursor(encodeActiveCursor(key))).toEqual(key);
		for (const text of [
			"ac1:2026-01-31T10:00:00.123Z|ord_1",
			"ac1:2026-01-31T10:00:00.123456Z",
			"ac1:2026-01-31T10:00:00.123456Z|",
			"ac1:not-a-date.123456Z|ord_1",
			"ev1:5",
			"ac1:2026-01-31T10:00:00.123456Z|ord 1",
		]) {
			expect(decodeActiveCursor(Buffer.from(text).toString("base64url"))).toBeNull();
		}
		expect(decodeActiveCursor("%%%")).toBeNull();
	});
});
