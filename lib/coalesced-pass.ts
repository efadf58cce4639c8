/**
 * One background pass at a time, and no request lost: asking for a pass while
 * one runs makes that one run once more when it ends (however many asked).
 * Dispatch's tick and the fleet's tick both work this way; they differ only
 * in what a pass does.
 *
 * No broker, no timers of its own beyond `setImmediate` in `kick`.
 */
export class CoalescedPass {
	private running: Promise<void> | null = null;
	private again = false;

	/**
	 * @param pass the work of one pass (it handles its own errors; one it
	 *   throws ends the run and reaches whoever awaits `run`)
	 * @param stopped true once the owner is stopping: no new passes, no repeats
	 */
	constructor(
		private readonly pass: () => Promise<void>,
		private readonly stopped: () => boolean,
	) {}

	/** The run in progress (to await at stop), or null. */
	get current(): Promise<void> | null {
		return this.running;
	}

	/** A pass soon (next turn of the event loop), or one more after the running one. */
	kick(): void {
		if (this.stopped()) return;
		if (this.running) {
			this.again = true;
			return;
		}
		setImmediate(() => {
			if (!this.stopped() && !this.running) void this.run();
		});
	}

	/** Runs a pass now, or, when one runs, asks for one more and waits for that run to end. */
	async run(): Promise<void> {
		if (this.running) {
			this.again = true;
			return this.running;
		}
		this.running = (async () => {
			do {
				this.again = false;
				await this.pass();
			} while (this.again && !this.stopped());
		})();
		try {
			await this.running;
		} finally {
			this.running = null;
		}
	}
}
