/**
 * The lower bound of the ingest scan over `ride_events.position`.
 *
 * `position` is a bigserial: values are handed out when rows are inserted,
 * not when their transactions commit, so a row with a smaller position can
 * become visible after one with a larger position. A plain
 * `position > max_seen` cursor would skip it forever. Instead every scan
 * re-reads the positions above the largest position that had been ingested
 * `windowMs` ago (anti-joined with what is already ingested, so re-reading
 * costs a lookup, never a second delivery).
 *
 * Why that is safe: a row whose position p was handed out at time t_p can
 * only be overtaken by rows whose positions were handed out after t_p, so
 * everything ingested before t_p has a position below p. The scan at time t
 * starts at the largest position ingested by t − windowMs; as long as the
 * late row's transaction commits within windowMs of inserting it (ride
 * transactions take milliseconds; the default window is ten seconds), that
 * bound is below p and the row is found on the first poll after its commit.
 *
 * Pure: clock values are passed in. After a restart the service seeds the
 * bound from the database (largest position ingested more than windowMs ago).
 */
export class IngestWindow {
	private readonly observations: Array<{ at: number; maxPosition: number }> = [];

	constructor(
		readonly windowMs: number,
		private floor: number,
	) {}

	/** Records the largest ingested position seen at `at`. */
	observe(at: number, maxPosition: number): void {
		const last = this.observations[this.observations.length - 1];
		if (last && maxPosition < last.maxPosition) maxPosition = last.maxPosition;
		this.observations.push({ at, maxPosition });
	}

	/** Scan `position > lowerBound(now)`. */
	lowerBound(now: number): number {
		// Observations old enough to trust move the floor up; keep only the newest of them.
		while (this.observations.length > 0 && this.observations[0].at <= now - this.windowMs) {
			this.floor = Math.max(this.floor, this.observations[0].maxPosition);
			this.observations.shift();
		}
		return this.floor;
	}

	get size(): number {
		return this.observations.length;
	}
}
