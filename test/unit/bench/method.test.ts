import { createDnsResolveAll } from "../../../lib/dns-resolver";
import { ratios, slope, spread, startDnsServer } from "../../../bench/lib/method";

/**
 * The bench's arithmetic (medians and ranges of alternating rounds, the
 * soak's least-squares slope) and its DNS server, resolved by the
 * platform's own resolver as the production-topology path relies on.
 */

test("spread: the median (odd and even counts) and the range, unreadable figures left out", () => {
	expect(spread([3, 1, 2])).toMatchObject({ median: 2, min: 1, max: 3 });
	expect(spread([4, 1, 3, 2])).toMatchObject({ median: 2.5, min: 1, max: 4 });
	expect(spread([NaN, 5])).toMatchObject({ median: 5, min: 5, max: 5 });
	expect(spread([]).median).toBeNaN();
});

test("ratios are taken round by round, not from the medians of each side", () => {
	// Each round's platform figure is half its floor's though the floors vary widely.
	expect(ratios([10, 50, 100], [20, 100, 200])).toMatchObject({ median: 0.5, min: 0.5, max: 0.5 });
});

test("slope: least squares per unit of x; a sawtooth around a flat line has none", () => {
	expect(
		slope([
			[0, 1],
			[1, 3],
			[2, 5],
			[3, 7],
		]),
	).toBeCloseTo(2, 10);
	const sawtooth = Array.from({ length: 60 }, (_, i) => [i, 100 + ((i % 6) - 2.5)] as [number, number]);
	expect(Math.abs(slope(sawtooth))).toBeLessThan(0.01);
	expect(slope([[1, 1]])).toBeNaN();
});

test("the bench's DNS server answers its zone with loopback and refuses other names", async () => {
	const dns = await startDnsServer("partners.bench.test");
	try {
		const resolveAll = createDnsResolveAll({ servers: [dns.server], timeoutMs: 1000, tries: 2, hostsFile: "" });
		await expect(resolveAll("p7.partners.bench.test", 4)).resolves.toEqual([{ address: "127.0.0.1", family: 4 }]);
		await expect(resolveAll("elsewhere.test", 4)).rejects.toMatchObject({ code: "ENOTFOUND" });
		expect(dns.queries()).toBeGreaterThanOrEqual(2);
	} finally {
		dns.close();
	}
});
