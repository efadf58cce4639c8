import { hasPrefix, newId } from "../../../lib/ids";

/** lib/ids.ts: public ids are a prefix and 20 base36 characters, each equally likely. */

it("is the prefix and 20 base36 characters, different every time", () => {
	const ids = Array.from({ length: 1000 }, () => newId("ord"));
	for (const id of ids) expect(id).toMatch(/^ord_[0-9a-z]{20}$/);
	expect(new Set(ids).size).toBe(ids.length);
	expect(hasPrefix(ids[0], "ord")).toBe(true);
	expect(hasPrefix(ids[0], "rdr")).toBe(false);
});

it("draws every character equally often (no modulo bias towards 0–3)", () => {
	const counts = new Map<string, number>();
	const ids = 50_000;
	for (let i = 0; i < ids; i++) {
		for (const ch of newId("evt").slice(4)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
	}
	const expected = (ids * 20) / 36; // ≈ 27,778, standard deviation ≈ 164
	expect(counts.size).toBe(36);
	// A byte taken modulo 36 makes 0–3 come 8/7 as often (≈ 31,250): 20 standard deviations out.
	for (const [ch, n] of counts) expect({ ch, off: Math.abs(n - expected) / expected < 0.05 }).toEqual({ ch, off: true });
});
