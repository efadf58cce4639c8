/**
 * Retention: how long finished rows are kept, and the background pass that
 * removes older ones in bounded batches. Each owning service (orders,
 * notifications, dispatch) runs its own pass over its own tables with a
 * `removeBatch` from its repo; this file holds what they share: the
 * settings, their validation, and the pass loop.
 *
 * Several instances may run the pass at once: every `removeBatch` locks the
 * rows it removes with `FOR UPDATE SKIP LOCKED`, so two passes take disjoint
 * batches and never wait for each other (nor for the hot paths, which never
 * touch finished rows). A batch reads its rows through a partial index over
 * finished rows ordered by age, so a pass costs what it removes, not the
 * size of the table.
 */
import { performance } from "node:perf_hooks";
import type { Logger } from "moleculer";
import { envInt, envNumber, type Env } from "./settings";

export interface RetentionSettings {
	/** Finished rows older than this many days are removed; 0 keeps them forever (`<SERVICE>_RETENTION_DAYS`). */
	retentionDays: number;
	/** Rows removed per statement at most (`RETENTION_BATCH_SIZE`, 1..10000). */
	retentionBatchSize: number;
	/** Batches per pass at most, so one pass stays bounded; the rest waits for the next pass (`RETENTION_MAX_BATCHES`, 1..1000). */
	retentionMaxBatches: number;
	/** Time between passes (`RETENTION_INTERVAL_MS`, at least 1000). */
	retentionIntervalMs: number;
	/**
	 * Share of its time a pass spends removing (`RETENTION_DUTY`, 0.01..1):
	 * after each batch it waits (1 / duty − 1) × that batch's duration, so a
	 * large backlog is worked off at a bounded share of one database
	 * connection instead of in one burst.
	 */
	retentionDuty: number;
}

export const DEFAULT_RETENTION_BATCH_SIZE = 500;
export const DEFAULT_RETENTION_MAX_BATCHES = 20;
export const DEFAULT_RETENTION_INTERVAL_MS = 10 * 60_000;
export const DEFAULT_RETENTION_DUTY = 0.25;
/** The windows of each owner (docs/OPERATIONS.md, "Retention"). */
export const RETENTION_DEFAULT_DAYS = { ORDERS_RETENTION_DAYS: 90, WEBHOOK_RETENTION_DAYS: 30, DISPATCH_RETENTION_DAYS: 30 } as const;
export type RetentionDaysSetting = keyof typeof RETENTION_DEFAULT_DAYS;

/** The retention settings of one owner; an invalid value refuses start-up naming the setting (lib/settings). */
export function readRetentionSettings(env: Env, daysSetting: RetentionDaysSetting): RetentionSettings {
	return {
		retentionDays: envNumber(
			env,
			daysSetting,
			RETENTION_DEFAULT_DAYS[daysSetting],
			(n) => Number.isInteger(n) && n >= 0 && n <= 36_500,
			"an integer 0..36500 (0 = keep forever)",
		),
		retentionBatchSize: envNumber(
			env,
			"RETENTION_BATCH_SIZE",
			DEFAULT_RETENTION_BATCH_SIZE,
			(n) => Number.isInteger(n) && n >= 1 && n <= 10_000,
			"an integer 1..10000",
		),
		retentionMaxBatches: envNumber(
			env,
			"RETENTION_MAX_BATCHES",
			DEFAULT_RETENTION_MAX_BATCHES,
			(n) => Number.isInteger(n) && n >= 1 && n <= 1000,
			"an integer 1..1000",
		),
		retentionIntervalMs: envInt(env, "RETENTION_INTERVAL_MS", DEFAULT_RETENTION_INTERVAL_MS, 1000),
		retentionDuty: envNumber(env, "RETENTION_DUTY", DEFAULT_RETENTION_DUTY, (n) => n >= 0.01 && n <= 1, "a number 0.01..1"),
	};
}

/**
 * One batch: remove at most `limit` finished rows older than `days` days and
 * say how many went. `state` is the pass's own keyset position (a batch that
 * had to keep rows, like orders with undelivered webhooks, moves past them so
 * the next batch of the same pass does not read them again); it starts
 * undefined at every pass.
 */
export type RemoveBatch<S> = (days: number, limit: number, state: S | undefined) => Promise<{ removed: number; scanned: number; next: S | undefined }>;

export interface RetentionPassOptions<S> {
	/** What is removed, for logs ("orders", "webhook deliveries", …). */
	name: string;
	settings: RetentionSettings;
	logger: Pick<Logger, "info" | "warn">;
	removeBatch: RemoveBatch<S>;
}

/**
 * The pass: batches until one comes back short (nothing older is left) or
 * `retentionMaxBatches` ran, every `retentionIntervalMs`. One pass at a time
 * per instance; an error ends that pass (logged without SQL or values) and
 * the next pass tries again.
 */
export class RetentionPass<S = unknown> {
	private timer: NodeJS.Timeout | undefined;
	private running: Promise<number> | null = null;
	private stopping = false;
	private wakeUp: (() => void) | undefined;

	constructor(private readonly options: RetentionPassOptions<S>) {}

	get enabled(): boolean {
		return this.options.settings.retentionDays > 0;
	}

	/** Passes every interval from now on (none when the window is 0). */
	start(): void {
		if (!this.enabled || this.timer) return;
		this.timer = setInterval(() => void this.run().catch(() => undefined), this.options.settings.retentionIntervalMs);
		this.timer.unref();
	}

	/** No more passes; waits for the running one to end. */
	async stop(): Promise<void> {
		this.stopping = true;
		this.wakeUp?.();
		if (this.timer) clearInterval(this.timer);
		this.timer = undefined;
		await this.running?.catch(() => undefined);
	}

	/** One pass now (or the running one): how many rows it removed. */
	run(): Promise<number> {
		if (!this.enabled) return Promise.resolve(0);
		this.running ??= this.pass().finally(() => {
			this.running = null;
		});
		return this.running;
	}

	/** Waits `ms` (the duty cycle's rest), or less when the pass is stopped. */
	private pause(ms: number): Promise<void> {
		if (ms <= 0 || this.stopping) return Promise.resolve();
		return new Promise<void>((resolve) => {
			const timer = setTimeout(done, ms);
			function done() {
				clearTimeout(timer);
				resolve();
			}
			this.wakeUp = done;
		}).finally(() => {
			this.wakeUp = undefined;
		});
	}

	private async pass(): Promise<number> {
		const { retentionDays, retentionBatchSize, retentionMaxBatches, retentionDuty } = this.options.settings;
		let removed = 0;
		let state: S | undefined;
		try {
			for (let i = 0; i < retentionMaxBatches && !this.stopping; i++) {
				const started = performance.now();
				const batch = await this.options.removeBatch(retentionDays, retentionBatchSize, state);
				removed += batch.removed;
				state = batch.next;
				if (batch.scanned < retentionBatchSize) break;
				await this.pause((performance.now() - started) * (1 / retentionDuty - 1));
			}
		} catch (err) {
			this.options.logger.warn(`Retention pass (${this.options.name}) stopped early: ${(err as Error)?.name ?? "Error"}`, { removed });
			return removed;
		}
		if (removed > 0) this.options.logger.info(`Retention pass removed ${removed} ${this.options.name}`);
		return removed;
	}
}
