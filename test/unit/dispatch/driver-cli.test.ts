import { actionOf, parseArgs, UsageError } from "../../../bin/driver";
import { newestLocation } from "../../../services/dispatch/driver-api";
import { newDriverToken } from "../../../services/dispatch/driver-tokens";
import { driverAliases } from "../../../services/gateway/driver-route";
import { DRIVER_ROUTES } from "../../../contracts/gateway";
import { DRIVER_TOKEN_PREFIX } from "../../../contracts/driver";

describe("driver CLI arguments", () => {
	it("create needs name, phone, vehicle and service type, and calls dispatch.createDriverToken", () => {
		const c = parseArgs(["create", "--name", "Ravi K", "--phone", "+919800000001", "--vehicle", "KA01AB1234", "--service-type", "cab"]);
		expect(actionOf(c)).toEqual({
			action: "dispatch.createDriverToken",
			params: { name: "Ravi K", phone: "+919800000001", vehicleNumber: "KA01AB1234", serviceType: "cab" },
		});
		expect(() => parseArgs(["create", "--name", "Ravi K"])).toThrow(UsageError);
		const test = parseArgs(["create", "--name", "R", "--phone", "+919800000001", "--vehicle", "KA01", "--service-type", "scooty", "--mode", "test"]);
		expect(actionOf(test).params).toMatchObject({ mode: "test" });
		expect(() =>
			parseArgs(["create", "--name", "R", "--phone", "+919800000001", "--vehicle", "KA01", "--service-type", "scooty", "--mode", "prod"]),
		).toThrow(UsageError);
	});
	it("create --expires-in passes a lifetime of <n><s|m|h|d> up to 365d; anything else is a usage error", () => {
		const base = ["create", "--name", "R", "--phone", "+919800000001", "--vehicle", "KA01", "--service-type", "cab"];
		expect(actionOf(parseArgs([...base, "--expires-in", "30d"])).params).toMatchObject({ expiresIn: "30d" });
		expect(actionOf(parseArgs(base)).params).not.toHaveProperty("expiresIn");
		for (const bad of ["30", "0d", "366d", "1w", "-1d", ""]) expect(() => parseArgs([...base, "--expires-in", bad])).toThrow(UsageError);
	});
	it("revoke takes exactly one of --driver (all its tokens), --token or --prefix (one token)", () => {
		expect(actionOf(parseArgs(["revoke", "--driver", "drv_abc"]))).toEqual({ action: "dispatch.revokeDriverTokens", params: { driverId: "drv_abc" } });
		expect(actionOf(parseArgs(["revoke", "--token", "dtk_abc"]))).toEqual({ action: "dispatch.revokeDriverToken", params: { tokenId: "dtk_abc" } });
		expect(actionOf(parseArgs(["revoke", "--prefix", "rdt_abcdefgh"]))).toEqual({
			action: "dispatch.revokeDriverToken",
			params: { prefix: "rdt_abcdefgh" },
		});
		expect(() => parseArgs(["revoke", "--driver", "drv_abc", "--token", "dtk_abc"])).toThrow(UsageError);
		expect(() => parseArgs(["revoke", "--token", " "])).toThrow(UsageError);
	});
	it("revoke needs a token or a driver; list takes nothing; anything else is a usage error", () => {
		expect(() => parseArgs(["revoke"])).toThrow(UsageError);
		expect(actionOf(parseArgs(["list"])).action).toBe("dispatch.listDriverTokens");
		expect(() => parseArgs(["list", "--driver", "drv_abc"])).toThrow(UsageError);
		expect(() => parseArgs(["delete"])).toThrow(UsageError);
		expect(() => parseArgs([])).toThrow(UsageError);
	});
});

describe("driver API rules", () => {
	it("a batch of locations: the newest `at` wins; without stamps on every fix, the last one", () => {
		const a = { lat: 1, lng: 1, at: "2026-11-23T10:00:05Z" };
		const b = { lat: 2, lng: 2, at: "2026-11-23T10:00:01Z" };
		expect(newestLocation([a, b])).toBe(a);
		expect(newestLocation([b, a])).toBe(a);
		expect(newestLocation([a, { lat: 3, lng: 3 }])).toEqual({ lat: 3, lng: 3 });
		expect(newestLocation([a, { ...b, at: "yesterday" }]).lat).toBe(2);
	});
	it("tokens are random, prefixed and long", () => {
		const t = newDriverToken();
		expect(t.startsWith(DRIVER_TOKEN_PREFIX)).toBe(true);
		expect(t.length).toBeGreaterThanOrEqual(40);
		expect(newDriverToken()).not.toBe(t);
	});
	it("the /driver aliases are exactly the route table", () => {
		expect(Object.keys(driverAliases()).sort()).toEqual(DRIVER_ROUTES.map((r) => `${r.method} ${r.path}`).sort());
		expect(driverAliases()["GET /offers"]).toBe("dispatch.driverOffers");
		for (const r of DRIVER_ROUTES) expect((r.params as { $$strict?: boolean }).$$strict).toBe(true);
	});
});
