import { periodicPass } from "../../../runtime/periodic-pass";
import { sleep, waitFor } from "../../helpers/wait";

describe("periodicPass", () => {
	it("runs one pass at a time: asking while one runs gets that one", async () => {
		let started = 0;
		let finish!: (n: number) => void;
		const pass = periodicPass(
			() => {
				started += 1;
				return new Promise<number>((resolve) => (finish = resolve));
			},
			0,
			() => undefined,
		);
		const first = pass.runOnce();
		const second = pass.runOnce();
		expect(second).toBe(first);
		expect(started).toBe(1);
		finish(7);
		await expect(first).resolves.toBe(7);
		const third = pass.runOnce();
		expect(started).toBe(2);
		finish(8);
		await expect(third).resolves.toBe(8);
		await pass.stop();
	});

	it("runs on its timer; a failed pass goes to onError and the next one still runs; stop ends the timer", async () => {
		let runs = 0;
		const errors: unknown[] = [];
		const pass = periodicPass(
			async () => {
				runs += 1;
				if (runs === 1) throw new Error("first fails");
				return runs;
			},
			20,
			(err) => errors.push(err),
		);
		await waitFor("two timed passes", () => runs >= 2, 5_000, 5);
		expect(errors).toEqual([new Error("first fails")]);
		await pass.stop();
		const after = runs;
		await sleep(100);
		expect(runs).toBe(after);
	});

	it("with 0, only when asked", async () => {
		let runs = 0;
		const pass = periodicPass(
			async () => ++runs,
			0,
			() => undefined,
		);
		await sleep(50);
		expect(runs).toBe(0);
		await expect(pass.runOnce()).resolves.toBe(1);
		await pass.stop();
	});
});
