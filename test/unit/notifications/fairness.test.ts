import { afterHostFailure, hostVerdict, openDurationMs, type BreakerSettings } from "../../../services/notifications/host-breaker";
import { FinalityCheckpoints } from "../../../services/notifications/safety-net";

const rules: BreakerSettings = { failureThreshold: 3, openMs: 1_000, maxOpenMs: 5_000 };

describe("host circuit breaker rules", () => {
	it("counts timeouts, refused connections and DNS failures against the host; any HTTP answer is a success; a refused address is neither", () => {
		for (const o of ["TIMEOUT", "CONNECTION", "DNS"] as const) expect(hostVerdict(o)).toBe("failure");
		for (const o of ["delivered", "HTTP_3XX", "HTTP_4XX", "HTTP_5XX"] as const) expect(hostVerdict(o)).toBe("success");
		expect(hostVerdict("BLOCKED_ADDRESS")).toBe("neutral");
	});

	it("opens at the threshold, not before", () => {
		expect(afterHostFailure({ failures: 0, opens: 0, phase: "closed" }, rules)).toEqual({ failures: 1, opens: 0, openForMs: null });
		expect(afterHostFailure({ failures: 1, opens: 0, phase: "closed" }, rules)).toEqual({ failures: 2, opens: 0, openForMs: null });
		expect(afterHostFailure({ failures: 2, opens: 0, phase: "closed" }, rules)).toEqual({ failures: 3, opens: 1, openForMs: 1_000 });
	});

	it("tries that end while it is open do not extend the pause", () => {
		expect(afterHostFailure({ failures: 3, opens: 1, phase: "open" }, rules)).toEqual({ failures: 4, opens: 1, openForMs: null });
	});

	it("a failed half-open probe opens it again for twice as long, up to the maximum", () => {
		expect(afterHostFailure({ failures: 3, opens: 1, phase: "half-open" }, rules)).toEqual({ failures: 4, opens: 2, openForMs: 2_000 });
		expect(afterHostFailure({ failures: 4, opens: 2, phase: "half-open" }, rules)).toEqual({ failures: 5, opens: 3, openForMs: 4_000 });
		expect(afterHostFailure({ failures: 5, opens: 3, phase: "half-open" }, rules).openForMs).toBe(5_000);
		expect(openDurationMs(1_000, rules)).toBe(5_000);
		expect(openDurationMs(0, { ...rules, maxOpenMs: 10 })).toBe(1_000);
	});
});

describe("safety-net finality checkpoints", () => {
	it("a position is final only once every transaction that was running when it was noted has ended", () => {
		const c = new FinalityCheckpoints();
		expect(c.observe({ maxPosition: 100, xmin: 50n, xmax: 60n })).toBeUndefined(); // note position 100
		expect(c.observe({ maxPosition: 110, xmin: 55n, xmax: 70n })).toBeUndefined(); // transaction ids up to 70 may hold positions ≤ 100
		expect(c.observe({ maxPosition: 120, xmin: 69n, xmax: 75n })).toBeUndefined(); // 69 is still running
		expect(c.observe({ maxPosition: 130, xmin: 70n, xmax: 80n })).toBe(100);
		// The next checkpoint starts at this look.
		expect(c.observe({ maxPosition: 140, xmin: 80n, xmax: 90n })).toBeUndefined();
		expect(c.observe({ maxPosition: 150, xmin: 90n, xmax: 95n })).toBe(130);
	});

	it("a transaction held open holds the sweep back for as long as it runs", () => {
		const c = new FinalityCheckpoints();
		c.observe({ maxPosition: 10, xmin: 5n, xmax: 6n });
		c.observe({ maxPosition: 10, xmin: 5n, xmax: 6n });
		for (let i = 0; i < 100; i++) expect(c.observe({ maxPosition: 10 + i, xmin: 5n, xmax: 7n + BigInt(i) })).toBeUndefined();
		expect(c.observe({ maxPosition: 200, xmin: 6n, xmax: 300n })).toBe(10);
	});
});
