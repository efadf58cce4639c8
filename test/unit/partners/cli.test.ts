import { parseArgs, parseGrace } from "../../../bin/partner";

describe("npm run partner: arguments", () => {
	it.each([
		[[]],
		[["frobnicate"]],
		[["create"]],
		[["list", "--all"]],
		[["list-keys", "--key", "key_a"]],
		[["revoke-key"]],
		[["revoke-key", "--key", "key_a", "--partner", "ptn_b"]],
		[["revoke-key", "key_a"]],
		[["rotate-key", "--partner", "ptn_a"]],
		[["rotate-key", "--label", "x"]],
		[["rotate-webhook-secret"]],
		[["rotate-webhook-secret", "--partner", "ptn_a", "--mode", "live", "--grace", "soon"]],
		[["rotate-webhook-secret", "--partner", "ptn_a", "--mode", "live", "--grace", "-5"]],
		[["rotate-webhook-secret", "--partner", "ptn_a"]],
		[["rotate-webhook-secret", "--partner", "ptn_a", "--mode", "both"]],
		[["create", "--name", "Acme", "--mode", "prod"]],
		[["rotate-key", "--partner", "ptn_a", "--label", "x", "--mode", "LIVE"]],
		[["list", "--mode", "live"]],
		[["set-version", "--partner", "ptn_a"]],
		[["set-version", "--version", "2026-12-01"]],
		[["set-version", "--partner", "ptn_a", "--version", ""]],
	])("refuses %j", (argv) => {
		expect(() => parseArgs(argv)).toThrow();
	});

	it("reads the key-management verbs", () => {
		expect(parseArgs(["list-keys"])).toEqual({ verb: "list-keys", options: {} });
		expect(parseArgs(["rotate-key", "--partner", "ptn_a", "--label", "2026"])).toEqual({
			verb: "rotate-key",
			options: { partner: "ptn_a", label: "2026" },
		});
		expect(parseArgs(["revoke-key", "--key", "key_a"]).options).toEqual({ key: "key_a" });
		expect(parseArgs(["create", "--name", "Acme", "--mode", "live"]).options).toEqual({ name: "Acme", mode: "live" });
		expect(parseArgs(["rotate-key", "--partner", "ptn_a", "--label", "l", "--mode", "test"]).options).toEqual({
			partner: "ptn_a",
			label: "l",
			mode: "test",
		});
		expect(parseArgs(["revoke-key", "--partner", "ptn_a"]).options).toEqual({ partner: "ptn_a" });
		expect(parseArgs(["rotate-webhook-secret", "--partner", "ptn_a", "--mode", "test", "--grace", "24h"]).options).toEqual({
			partner: "ptn_a",
			mode: "test",
			grace: "24h",
		});
	});

	it("reads set-version (the version itself is checked by partners.setApiVersion against the known ones)", () => {
		expect(parseArgs(["set-version", "--partner", "ptn_a", "--version", "2026-12-01"])).toEqual({
			verb: "set-version",
			options: { partner: "ptn_a", version: "2026-12-01" },
		});
	});

	it("reads grace periods in seconds, minutes, hours or days", () => {
		expect(parseGrace("90")).toBe(90);
		expect(parseGrace("90s")).toBe(90);
		expect(parseGrace("30m")).toBe(1_800);
		expect(parseGrace("24h")).toBe(86_400);
		expect(parseGrace("7d")).toBe(604_800);
		expect(parseGrace("0")).toBe(0);
	});
});
