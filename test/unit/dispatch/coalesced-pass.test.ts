import { CoalescedPass } from "../../../lib/coalesced-pass";

/** A pass that waits for the test to let it finish, counting how often it ran. */
function controlledPass() {
	const state = { runs: 0, release: [] as Array<() => void> };
	const pass = () => {
		state.runs += 1;
		return new Promise<void>((resolve) => state.release.push(resolve));
	};
	return { state, pass };
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function until(what: string, check: () => boolean): Promise<void> {
	for (let i = 0; i < 1000; i++) {
		if (check()) return;
		await nextTurn();
	}
	throw new Error(`never happened: ${what}`);
}

describe("CoalescedPass (dispatch and fleet ticks)", () => {
	it("runs one pass at a time and folds every request made meanwhile into one more pass", async () => {
		const { state, pass } = controlledPass();
		const ticker = new CoalescedPass(pass, () => false);
		const first = ticker.run();
		expect(state.runs).toBe(1);
		expect(ticker.current).not.toBeNull();

		// Three requests while the pass runs: one more pass, not three.
		const joined = ticker.run();
		ticker.kick();
		ticker.kick();
		expect(state.runs).toBe(1);
		state.release.shift()!();
		await until("the repeat pass", () => state.runs === 2);
		state.release.shift()!();
		await Promise.all([first, joined]);
		expect(state.runs).toBe(2);
		expect(ticker.current).toBeNull();
	});

	it("kick starts a pass on the next turn when none runs", async () => {
		const { state, pass } = controlledPass();
		const ticker = new CoalescedPass(pass, () => false);
		ticker.kick();
		expect(state.runs).toBe(0);
		await until("the kicked pass", () => state.runs === 1);
		state.release.shift()!();
		await until("the end of the pass", () => ticker.current === null);
		expect(state.runs).toBe(1);
	});

	it("starts nothing and repeats nothing once stopped", async () => {
		let stopped = false;
		const { state, pass } = controlledPass();
		const ticker = new CoalescedPass(pass, () => stopped);
		const running = ticker.run();
		ticker.kick();
		stopped = true;
		state.release.shift()!();
		await running;
		ticker.kick();
		await nextTurn();
		await nextTurn();
		expect(state.runs).toBe(1);
	});

	it("passes a pass's error to whoever awaits the run, and can run again afterwards", async () => {
		let fail = true;
		const ticker = new CoalescedPass(
			async () => {
				if (fail) throw new Error("boom");
			},
			() => false,
		);
		await expect(ticker.run()).rejects.toThrow("boom");
		expect(ticker.current).toBeNull();
		fail = false;
		await expect(ticker.run()).resolves.toBeUndefined();
	});
});
