import { modeOf, otpReadable, sandboxRefusal } from "../../../services/orders/modes";

describe("orders: key modes", () => {
	it("a call without a mode is a test call; only `live` is live", () => {
		expect(modeOf({})).toBe("test");
		expect(modeOf({ mode: "test" })).toBe("test");
		expect(modeOf({ mode: "live" })).toBe("live");
		expect(modeOf({ mode: "LIVE" })).toBe("test");
	});

	it("refuses metadata.sandbox on a live key only, naming the field", () => {
		expect(sandboxRefusal("test", { sandbox: { outcome: "no_driver_found" } })).toBeNull();
		expect(sandboxRefusal("live", undefined)).toBeNull();
		expect(sandboxRefusal("live", { partnerRef: "x" })).toBeNull();
		expect(sandboxRefusal("live", { sandbox: { fast: true } })).toMatchObject({ field: "metadata.sandbox", message: expect.stringMatching(/test key/) });
		// Present at all is enough: a live key never gets a silently ignored control.
		expect(sandboxRefusal("live", { sandbox: null })).not.toBeNull();
	});

	it("the rider OTP helper is for test rides only", () => {
		expect(otpReadable("test")).toBe(true);
		expect(otpReadable("live")).toBe(false);
	});
});
