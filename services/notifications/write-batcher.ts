/**
 * Group commit for one kind of write: items submitted while a write is in
 * flight are written together by the next one, so under load N items cost
 * one statement (one transaction, one WAL flush, one pooled connection)
 * instead of N, and at low load an item waits for nothing but the end of the
 * current event-loop turn (items submitted in the same turn share a write).
 * At most one write in flight and at most `maxBatch` items per write. Each
 * submitter gets its own item's result, or the write's error (so each can
 * retry on its own). No I/O here: `write` does it.
 */
export class WriteBatcher<T, R> {
	private queue: Array<{ item: T; resolve: (result: R) => void; reject: (err: unknown) => void }> = [];
	private running = false;

	constructor(
		/** Writes the items in one go; answers one result per item, in order. */
		private readonly write: (items: T[]) => Promise<R[]>,
		private readonly maxBatch: number,
	) {}

	submit(item: T): Promise<R> {
		return new Promise<R>((resolve, reject) => {
			this.queue.push({ item, resolve, reject });
			if (!this.running) {
				this.running = true;
				setImmediate(() => void this.drain());
			}
		});
	}

	/** Items waiting for a write (not counting the one in flight). */
	get waiting(): number {
		return this.queue.length;
	}

	private async drain(): Promise<void> {
		try {
			while (this.queue.length > 0) {
				const group = this.queue.splice(0, this.maxBatch);
				try {
					const results = await this.write(group.map((g) => g.item));
					if (results.length !== group.length) throw new Error(`write answered ${results.length} results for ${group.length} items`);
					group.forEach((g, i) => g.resolve(results[i]));
				} catch (err) {
					for (const g of group) g.reject(err);
				}
			}
		} finally {
			this.running = false;
		}
	}
}
