import { operatorOf, UsageError } from "../../../bin/operator-cli";
import { actorOf } from "../../../lib/audit";
import { ApiError } from "../../../lib/errors";

/** Who an operator change is recorded for: the CLIs' --operator / OPERATOR / USER, and meta.operator over the bus. */

describe("operatorOf (npm run partner / driver)", () => {
	it("takes --operator anywhere (spaced or with =) out of argv, before OPERATOR and USER", () => {
		expect(operatorOf(["revoke-key", "--operator", "alice", "--key", "key_1"], { OPERATOR: "ops", USER: "u" })).toEqual({
			operator: "alice",
			argv: ["revoke-key", "--key", "key_1"],
		});
		expect(operatorOf(["--operator=bob", "list"], {}).operator).toBe("bob");
		expect(operatorOf(["list"], { OPERATOR: "ops", USER: "u" }).operator).toBe("ops");
		expect(operatorOf(["list"], { USER: "u" }).operator).toBe("u");
	});

	it("an empty, missing-value or malformed operator is a usage error", () => {
		expect(() => operatorOf(["list", "--operator"], { USER: "u" })).toThrow(UsageError);
		expect(() => operatorOf(["list", "--operator", ""], { USER: "u" })).toThrow(UsageError);
		expect(() => operatorOf(["list", "--operator", "a\u0007b"], {})).toThrow(UsageError);
		expect(() => operatorOf(["list", "--operator", "x".repeat(101)], {})).toThrow(UsageError);
	});
});

describe("actorOf (meta.operator over the bus)", () => {
	it("records the operator and the calling node; no operator is unattributed", () => {
		expect(actorOf({ meta: { operator: " alice " }, nodeID: "partner-cli-1" })).toEqual({ operator: "alice", via: "partner-cli-1" });
		expect(actorOf({ meta: {}, nodeID: "repl-1" })).toEqual({ operator: "unattributed", via: "repl-1" });
	});

	it.each([[""], ["  "], [42], [{}], ["a\nb"], ["x".repeat(101)]])("refuses %j with a 400", (operator) => {
		let err: unknown;
		try {
			actorOf({ meta: { operator } });
		} catch (e) {
			err = e;
		}
		expect(err).toBeInstanceOf(ApiError);
		expect((err as ApiError).code).toBe(400);
	});
});
