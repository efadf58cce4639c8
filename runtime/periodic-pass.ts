/** A background pass that can also be run on demand (tests, and the timer). */
export interface PeriodicPass<T> {
	/** One pass now; while one runs, that one (its result). */
	runOnce(): Promise<T>;
	/** No more timed passes; waits for a running one to end. */
	stop(): Promise<void>;
}

/**
 * Runs `pass` every `everyMs` (0 = only when asked), one at a time; a timed
 * pass that fails goes to `onError` and the next one runs as planned. The
 * timer does not hold the process open. The embedded database's vacuum
 * (embedded-vacuum.ts) runs this way.
 */
export function periodicPass<T>(pass: () => Promise<T>, everyMs: number, onError: (err: unknown) => void): PeriodicPass<T> {
	let running: Promise<T> | null = null;
	const runOnce = (): Promise<T> => {
		running ??= pass().finally(() => {
			running = null;
		});
		return running;
	};
	let timer: NodeJS.Timeout | undefined = everyMs > 0 ? setInterval(() => runOnce().catch(onError), everyMs) : undefined;
	timer?.unref();
	return {
		runOnce,
		async stop() {
			if (timer) clearInterval(timer);
			timer = undefined;
			await running?.catch(() => undefined);
		},
	};
}
