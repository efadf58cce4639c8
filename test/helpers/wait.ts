import { inspect } from "node:util";

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

type Truthy<T> = Exclude<T, false | 0 | "" | null | undefined>;

/**
 * Polls `probe` every `everyMs` until it returns a truthy value, and returns
 * that value. A probe that throws is tried again (a service may still be
 * starting, a node may just have left); when `timeoutMs` has passed, the
 * error names `what` and the last error or value seen, so a failing test says
 * what it was waiting for and how far it got.
 */
export async function waitFor<T>(what: string, probe: () => T | Promise<T>, timeoutMs = 20_000, everyMs = 50): Promise<Truthy<T>> {
	const deadline = Date.now() + timeoutMs;
	let last: { error: unknown } | { value: unknown } = { value: undefined };
	for (;;) {
		try {
			const value = await probe();
			if (value) return value as Truthy<T>;
			last = { value };
		} catch (error) {
			last = { error };
		}
		if (Date.now() > deadline) {
			const seen = "error" in last ? (last.error as Error).message : `last: ${inspect(last.value, { depth: 3, breakLength: Infinity }).slice(0, 500)}`;
			throw new Error(`Timed out waiting for ${what} (${timeoutMs} ms); ${seen}`);
		}
		await sleep(everyMs);
	}
}
