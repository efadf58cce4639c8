import type { Logger } from "moleculer";
import type { DeliveryMetrics } from "./delivery-metrics";
import type { SnapshotPoint } from "./delivery-rows";
import type { NotificationsRepo } from "./notifications.repo";

/**
 * The safety-net ingest. The regular ingest (ingest-window.ts) re-reads only
 * the positions handed out within the ingest window, so a ride transaction
 * that commits later than WEBHOOK_INGEST_WINDOW_MS after its insert would
 * never be ingested, and every later status event of its ride would wait
 * behind it forever. The safety net sweeps every range of positions once,
 * after it is final, with an anti-join against `webhook_deliveries`
 * (index-backed on both sides), and ingests what is missing.
 *
 * "Final" comes from PostgreSQL's transaction ids, not from clocks: at one
 * look we note the largest visible position P; at the next look (so any
 * transaction that had taken a position ≤ P by then has its transaction id)
 * we note the snapshot's xmax X; once the oldest running transaction
 * (snapshot xmin) is ≥ X, every transaction that could write a position ≤ P
 * has ended, and the range up to P can be swept once and for all. A
 * transaction held open for an hour holds the sweep back (and nothing is
 * lost); it never makes the sweep skip anything.
 *
 * The shared cursor (`webhook_ingest_cursor`) is moved with a compare-and-set
 * in the same statement that ingests a page, so instances share the work and
 * never sweep a range twice. Cost: each event is looked up once more, paged;
 * nothing is re-read per poll.
 */

/** Pure: fed one SnapshotPoint per look, says up to which position every ride event is final. */
export class FinalityCheckpoints {
	private pending: { position: number; xmax?: bigint } | undefined;

	observe(point: SnapshotPoint): number | undefined {
		const pending = this.pending;
		if (!pending) {
			this.pending = { position: point.maxPosition };
			return undefined;
		}
		if (pending.xmax === undefined) {
			pending.xmax = point.xmax;
			return undefined;
		}
		if (point.xmin < pending.xmax) return undefined; // a transaction as old as the checkpoint is still running
		this.pending = { position: point.maxPosition };
		return pending.position;
	}
}

/** Positions per sweep statement, and statements per run at most (the rest waits for the next run). */
const SPAN = 5_000;
const PAGES_PER_RUN = 20;
/** Event ids named in the log line at most. */
const LOGGED_IDS = 10;

export interface SafetyNetDeps {
	repo: NotificationsRepo;
	logger: Logger;
	ingestWindowMs: number;
	locationTtlMs: number;
	metrics?: DeliveryMetrics;
}

export class SafetyNet {
	private readonly checkpoints = new FinalityCheckpoints();

	constructor(private readonly deps: SafetyNetDeps) {}

	/** One look; sweeps up to the final position, never above `windowLowerBound` (the regular ingest still re-reads what is above). Returns the events ingested. */
	async run(windowLowerBound: number): Promise<number> {
		const { repo, logger } = this.deps;
		const final = this.checkpoints.observe(await repo.snapshotPoint());
		if (final === undefined) return 0;
		const upTo = Math.min(final, windowLowerBound);
		let cursor = await repo.safetyNetCursor();
		let found = 0;
		for (let page = 0; page < PAGES_PER_RUN && cursor < upTo; page++) {
			const to = Math.min(upTo, cursor + SPAN);
			const swept = await repo.sweepLate(cursor, to, this.deps.locationTtlMs);
			if (!swept.moved) break; // another instance swept this range meanwhile
			cursor = to;
			if (swept.events.length === 0) continue;
			found += swept.events.length;
			this.deps.metrics?.lateIngested(swept.events.length);
			const named = swept.events.slice(0, LOGGED_IDS).map((e) => `${e.event_id} (${e.order_id} #${e.sequence})`);
			logger.warn(
				`Safety-net ingest: ${swept.events.length} ride event(s) committed later than the ingest window (${this.deps.ingestWindowMs} ms) ` +
					`and were picked up now: ${named.join(", ")}${swept.events.length > LOGGED_IDS ? ", …" : ""}`,
			);
		}
		return found;
	}
}
