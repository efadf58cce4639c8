import { WriteBatcher } from "../../../services/notifications/write-batcher";

/** A write that records each call's items and answers when released. */
function gatedWrite() {
	const calls: string[][] = [];
	const gates: Array<() => void> = [];
	const write = async (items: Array<{ partner: string; id: string }>) => {
		calls.push(items.map((i) => `${i.partner}/${i.id}`));
		await new Promise<void>((resolve) => gates.push(resolve));
		// Each result is derived from its own item only.
		return items.map((i) => `${i.partner}/${i.id}:ok`);
	};
	return { calls, gates, write };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("WriteBatcher (group commit of try records)", () => {
	it("writes the items submitted in one turn together, and each submitter gets its own item's result (partners interleaved)", async () => {
		const { calls, gates, write } = gatedWrite();
		const b = new WriteBatcher(write, 100);
		const items = Array.from({ length: 6 }, (_, i) => ({ partner: i % 2 === 0 ? "ptn_a" : "ptn_b", id: `evt_${i}` }));
		const results = items.map((item) => b.submit(item));
		await tick();
		expect(calls).toEqual([items.map((i) => `${i.partner}/${i.id}`)]);
		gates.shift()!();
		expect(await Promise.all(results)).toEqual(items.map((i) => `${i.partner}/${i.id}:ok`));
	});

	it("keeps one write in flight: what comes meanwhile is written by the next one, all of it together", async () => {
		const { calls, gates, write } = gatedWrite();
		const b = new WriteBatcher(write, 100);
		const first = b.submit({ partner: "ptn_a", id: "1" });
		await tick();
		const later = [b.submit({ partner: "ptn_b", id: "2" }), b.submit({ partner: "ptn_a", id: "3" })];
		await tick();
		expect(calls).toHaveLength(1);
		expect(b.waiting).toBe(2);
		gates.shift()!();
		expect(await first).toBe("ptn_a/1:ok");
		await tick();
		expect(calls).toEqual([["ptn_a/1"], ["ptn_b/2", "ptn_a/3"]]);
		gates.shift()!();
		expect(await Promise.all(later)).toEqual(["ptn_b/2:ok", "ptn_a/3:ok"]);
	});

	it("writes at most maxBatch items at a time", async () => {
		const { calls, gates, write } = gatedWrite();
		const b = new WriteBatcher(write, 2);
		const all = Array.from({ length: 5 }, (_, i) => b.submit({ partner: "ptn_a", id: String(i) }));
		for (let i = 0; i < 3; i++) {
			await tick();
			gates.shift()!();
			await new Promise((r) => setTimeout(r, 1));
		}
		await Promise.all(all);
		expect(calls.map((c) => c.length)).toEqual([2, 2, 1]);
	});

	it("a failed write rejects only its own group; the next group is written and answered", async () => {
		let n = 0;
		const b = new WriteBatcher(async (items: string[]) => {
			n += 1;
			await new Promise((r) => setTimeout(r, 5));
			if (n === 1) throw new Error("connection lost");
			return items.map((i) => `${i}:ok`);
		}, 10);
		const failed = [b.submit("a"), b.submit("b")];
		await tick();
		const next = b.submit("c");
		await expect(failed[0]).rejects.toThrow("connection lost");
		await expect(failed[1]).rejects.toThrow("connection lost");
		expect(await next).toBe("c:ok");
		// And it keeps working afterwards (nothing stuck "running").
		expect(await b.submit("d")).toBe("d:ok");
	});

	it("a write that answers the wrong number of results fails its group instead of mixing results up", async () => {
		const b = new WriteBatcher(async (items: string[]) => items.slice(1), 10);
		const all = [b.submit("a"), b.submit("b")];
		await expect(all[0]).rejects.toThrow(/1 results for 2 items/);
		await expect(all[1]).rejects.toThrow(/1 results for 2 items/);
	});
});
