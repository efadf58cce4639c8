import { StatementBatcher } from "../../../lib/statement-batcher";

/**
 * lib/statement-batcher.ts as the riders service uses it: concurrent calls
 * share one statement, each caller gets its own row back (never another
 * partner's), one row is never twice in a statement, and one bad row fails
 * only its caller.
 */

type Item = { partnerId: string; phone: string; name: string };
const key = (i: Item) => `${i.partnerId}\u0000${i.phone}`;

function deferred() {
	let release!: () => void;
	const gate = new Promise<void>((r) => (release = r));
	return { gate, release };
}

function fakeDb(opts: { failOn?: string } = {}) {
	const batches: Item[][] = [];
	let hold = deferred();
	const run = async (items: Item[]) => {
		batches.push(items);
		await hold.gate;
		if (items.some((i) => i.name === opts.failOn)) throw new Error("22001 value too long");
		// Rows come back in any order in SQL; the runner maps them to the items.
		return items.map((i) => ({ riderOf: `${i.partnerId}/${i.phone}`, name: i.name }));
	};
	return { batches, run, release: () => hold.release(), rearm: () => (hold = deferred()) };
}

it("runs a lone call at once and groups the calls that arrive while statements are out", async () => {
	const db = fakeDb();
	const b = new StatementBatcher(db.run, key, { maxBatch: 100, maxInFlight: 1 });
	const first = b.submit({ partnerId: "A", phone: "1", name: "a1" });
	expect(db.batches).toHaveLength(1);
	const later = Array.from({ length: 5 }, (_, n) => b.submit({ partnerId: n % 2 ? "A" : "B", phone: String(10 + n), name: `n${n}` }));
	expect(b.waiting).toBe(5);
	db.release();
	await first;
	const answers = await Promise.all(later);
	expect(db.batches.map((x) => x.length)).toEqual([1, 5]);
	answers.forEach((a, n) => expect(a).toEqual({ riderOf: `${n % 2 ? "A" : "B"}/${10 + n}`, name: `n${n}` }));
});

it("never puts one (partner, phone) twice in a statement; the same phone of two partners may share one, each getting its own", async () => {
	const db = fakeDb();
	const b = new StatementBatcher(db.run, key, { maxBatch: 100, maxInFlight: 1 });
	const blocker = b.submit({ partnerId: "Z", phone: "0", name: "z" });
	const calls = [
		b.submit({ partnerId: "A", phone: "5", name: "first" }),
		b.submit({ partnerId: "A", phone: "5", name: "second" }),
		b.submit({ partnerId: "B", phone: "5", name: "other partner" }),
	];
	db.release();
	await blocker;
	const [first, second, other] = await Promise.all(calls);
	for (const batch of db.batches) expect(new Set(batch.map(key)).size).toBe(batch.length);
	expect(db.batches.map((x) => x.map((i) => i.name))).toEqual([["z"], ["first", "other partner"], ["second"]]);
	expect(first).toEqual({ riderOf: "A/5", name: "first" });
	expect(second).toEqual({ riderOf: "A/5", name: "second" });
	expect(other).toEqual({ riderOf: "B/5", name: "other partner" });
});

it("keeps batches within maxBatch and statements within maxInFlight", async () => {
	const db = fakeDb();
	let out = 0;
	let most = 0;
	const run = async (items: Item[]) => {
		out += 1;
		most = Math.max(most, out);
		await new Promise((r) => setTimeout(r, 5));
		out -= 1;
		return db.run(items);
	};
	db.release();
	const b = new StatementBatcher(run, key, { maxBatch: 7, maxInFlight: 2 });
	const all = await Promise.all(Array.from({ length: 40 }, (_, n) => b.submit({ partnerId: "A", phone: String(n), name: `r${n}` })));
	expect(all.map((a) => a.name)).toEqual(Array.from({ length: 40 }, (_, n) => `r${n}`));
	expect(Math.max(...db.batches.map((x) => x.length))).toBeLessThanOrEqual(7);
	expect(most).toBeLessThanOrEqual(2);
});

it("a failed batch is retried one call at a time: only the bad row's caller fails", async () => {
	const db = fakeDb({ failOn: "bad" });
	const b = new StatementBatcher(db.run, key, { maxBatch: 100, maxInFlight: 1 });
	const blocker = b.submit({ partnerId: "Z", phone: "0", name: "z" });
	const good = b.submit({ partnerId: "A", phone: "1", name: "good" });
	const bad = b.submit({ partnerId: "A", phone: "2", name: "bad" });
	db.release();
	await blocker;
	await expect(good).resolves.toEqual({ riderOf: "A/1", name: "good" });
	await expect(bad).rejects.toThrow("22001");
});

it("answers every caller of a batch whose runner miscounts with an error, never another's row", async () => {
	const b = new StatementBatcher(async (items: Item[]) => (items.length > 1 ? [{ name: "x" }] : [{ name: items[0].name }]), key, {
		maxBatch: 100,
		maxInFlight: 1,
	});
	const p = [
		b.submit({ partnerId: "A", phone: "1", name: "one" }),
		b.submit({ partnerId: "A", phone: "2", name: "two" }),
		b.submit({ partnerId: "A", phone: "3", name: "three" }),
	];
	expect((await Promise.all(p)).map((a) => a.name)).toEqual(["one", "two", "three"]);
});
