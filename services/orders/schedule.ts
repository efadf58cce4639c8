import { isUniqueViolation } from "../../mixins/db.mixin";
import type { ScheduleSettings } from "../../lib/schedule";
import type { OrderRow } from "./order-view";
import type { MoveResult, OrdersRepo } from "./orders.repo";

/**
 * Scheduled rides' start (API.md, "Scheduled rides"). The schedule is the
 * `scheduled` rows of `orders` (their `dispatch_at`), not timers: each orders
 * instance arms one timer at the earliest `dispatch_at` (one indexed read),
 * at most `pollMs` ahead, and re-arms it when a booking of its own or an
 * `orders.scheduleChanged` event from another instance names an earlier
 * time. When it fires, the instance takes the due rides one by one
 * (`takeDueScheduled`: SKIP LOCKED and a conditional update, so two
 * instances never start one ride twice) until none is due: the work follows
 * the rides that are due, never the backlog of rides waiting. A restart
 * loses nothing: the next instance reads the same rows.
 *
 * A due ride whose rider is on another (active) ride waits for it, looked
 * at again every `pollMs`; if that lasts until its search could no longer
 * end before the pickup time, it ends `no_driver_found`.
 */

/** What a due scheduled ride does now: pure. */
export function scheduledStep(ride: { riderBusy: boolean; tooLate: boolean }): "start" | "give_up" | "wait" {
	if (ride.tooLate) return "give_up";
	return ride.riderBusy ? "wait" : "start";
}

/** Due rides one pass takes before yielding (the timer fires again at once when more are due). */
const PASS_LIMIT = 50;

export interface ScheduleDeps {
	orders: Pick<OrdersRepo, "nextDispatchAt" | "takeDueScheduled">;
	settings: Pick<ScheduleSettings, "searchMarginMs" | "pollMs">;
	/** After a ride's start commits: its hints (the `searching` or `no_driver_found` event, dispatch's `orders.created`). */
	onMoved(from: OrderRow, result: MoveResult): void;
	log: { warn(...args: unknown[]): void };
	now?: () => number;
}

export class ScheduleLoop {
	private timer: NodeJS.Timeout | undefined;
	/** When the armed timer fires (Unix ms). */
	private armedFor = Infinity;
	private running: Promise<void> | undefined;
	private stopped = true;
	private readonly now: () => number;

	constructor(private readonly deps: ScheduleDeps) {
		this.now = deps.now ?? Date.now;
	}

	start(): void {
		this.stopped = false;
		this.wake();
	}

	async stop(): Promise<void> {
		this.stopped = true;
		if (this.timer) clearTimeout(this.timer);
		this.timer = undefined;
		await this.running?.catch(() => undefined);
	}

	/** A ride is due at `dispatchAtMs` (a booking here, or an event from another instance): fire then if that is earlier than armed. */
	noteDue(dispatchAtMs: number): void {
		if (this.stopped || dispatchAtMs >= this.armedFor) return;
		this.arm(dispatchAtMs);
	}

	/** Runs a pass now (start-up, or after a pass that stopped at its limit). */
	private wake(): void {
		this.arm(this.now());
	}

	private arm(atMs: number): void {
		if (this.stopped) return;
		if (this.timer) clearTimeout(this.timer);
		const delay = Math.max(0, Math.min(atMs - this.now(), this.deps.settings.pollMs));
		this.armedFor = this.now() + delay;
		this.timer = setTimeout(() => this.fire(), delay);
		// Waiting costs nothing and keeps no process alive.
		this.timer.unref();
	}

	private fire(): void {
		this.timer = undefined;
		this.armedFor = Infinity;
		if (this.running) {
			// A pass is still running: look again right after it.
			void this.running.then(() => this.wake());
			return;
		}
		this.running = this.pass()
			.catch((err: unknown) => this.deps.log.warn("Scheduled rides pass failed (retried at the next poll)", (err as Error)?.message))
			.finally(() => {
				this.running = undefined;
			});
		void this.running.then(() => this.rearm());
	}

	/** Starts (or gives up, or defers) the rides due now, up to the pass limit (the re-arm finds any left due at once). */
	private async pass(): Promise<void> {
		const { orders, settings } = this.deps;
		const o = { searchMarginMs: settings.searchMarginMs, retryMs: settings.pollMs };
		for (let n = 0; n < PASS_LIMIT; n++) {
			if (this.stopped) return;
			let taken;
			try {
				taken = await orders.takeDueScheduled(o, scheduledStep);
			} catch (err) {
				// A ride booked for now took the rider's active slot between the check and the start (the
				// index judged, nothing was written): the next take sees that ride and waits like a busy rider.
				if (isUniqueViolation(err, "orders_one_active_per_rider")) continue;
				throw err;
			}
			if (!taken) return;
			if (taken.moved) this.deps.onMoved(taken.row, taken.moved);
		}
	}

	/** After a pass: the next due time from the table (a pass that hit its limit runs again at once). */
	private async rearm(): Promise<void> {
		if (this.stopped) return;
		try {
			const next = await this.deps.orders.nextDispatchAt();
			this.arm(next ? next.getTime() : Infinity);
		} catch (err) {
			this.deps.log.warn("Could not read the schedule (retried at the next poll)", (err as Error)?.message);
			this.arm(Infinity);
		}
	}
}
