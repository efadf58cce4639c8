/**
 * Groups concurrent calls into one SQL statement (issue 9: fewer statements
 * and round trips per order). A call runs at once while fewer than
 * `maxInFlight` statements are out, so a quiet service adds no latency;
 * under load the calls that arrive meanwhile go together in the next
 * statement, at most `maxBatch` of them. Two calls with the same key (the
 * same row: a rider's phone, a ride) never share a statement, because a
 * multi-row upsert may not touch one row twice: the later one waits for the
 * next batch. A failed batch of several is retried one call at a time, so one
 * bad row fails only its own caller.
 *
 * `run` gets the items in order and answers one result per item, same order.
 * Nothing is buffered beyond the promise of each caller: a crash loses only
 * calls nobody was answered for, exactly like single statements.
 */
export class StatementBatcher<I, O> {
	private queue: Array<{ item: I; key: string; resolve: (o: O) => void; reject: (e: unknown) => void }> = [];
	private inFlight = 0;

	constructor(
		private readonly run: (items: I[]) => Promise<O[]>,
		private readonly keyOf: (item: I) => string,
		private readonly opts: { maxBatch: number; maxInFlight: number },
	) {}

	submit(item: I): Promise<O> {
		return new Promise<O>((resolve, reject) => {
			this.queue.push({ item, key: this.keyOf(item), resolve, reject });
			this.flush();
		});
	}

	/** Calls waiting for a statement (for tests and gauges). */
	get waiting(): number {
		return this.queue.length;
	}

	private flush(): void {
		while (this.queue.length > 0 && this.inFlight < this.opts.maxInFlight) {
			const batch: typeof this.queue = [];
			const keys = new Set<string>();
			const rest: typeof this.queue = [];
			for (const entry of this.queue) {
				if (batch.length < this.opts.maxBatch && !keys.has(entry.key)) {
					keys.add(entry.key);
					batch.push(entry);
				} else rest.push(entry);
			}
			this.queue = rest;
			this.inFlight += 1;
			void this.execute(batch).finally(() => {
				this.inFlight -= 1;
				this.flush();
			});
		}
	}

	private async execute(batch: typeof this.queue): Promise<void> {
		try {
			const out = await this.run(batch.map((e) => e.item));
			if (out.length !== batch.length) throw new Error(`statement batch answered ${out.length} results for ${batch.length} items`);
			batch.forEach((e, i) => e.resolve(out[i]));
		} catch (err) {
			if (batch.length === 1) {
				batch[0].reject(err);
				return;
			}
			// One bad row must not fail the others: each alone.
			await Promise.all(
				batch.map(async (e) => {
					try {
						const [o] = await this.run([e.item]);
						e.resolve(o);
					} catch (one) {
						e.reject(one);
					}
				}),
			);
		}
	}
}
