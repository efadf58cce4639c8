import { shortError } from "./dispatch-rules";
import type { DispatchRepo } from "./dispatch.repo";
import type { DispatchSettings } from "./dispatch.settings";
import type { DispatchLog } from "./dispatch.types";
import type { DriverIndex } from "./driver-index";
import type { OrdersClient } from "./orders-client";
import type { RideMirror } from "./ride-mirror";

/**
 * The sweep: reconciliation, so dispatch survives lost broker events and
 * restarts. Every `DISPATCH_SWEEP_MS` (jittered per instance) it settles
 * in-flight transitions whose lease ran out, passes over every active ride
 * (`orders.listActiveStates`, `DISPATCH_SWEEP_PAGE` at a time) and asks the
 * mirror to reconcile the few that disagree, closes mirrors orders no longer
 * has active, and frees drivers holding a ride without reason.
 */

export interface RideSweepDeps {
	settings: Pick<DispatchSettings, "fleetMode" | "sweepPage">;
	repo: Pick<DispatchRepo, "drivers" | "mirror">;
	orders: Pick<OrdersClient, "listActiveStates">;
	mirror: Pick<RideMirror, "reconcile">;
	index: Pick<DriverIndex, "publish">;
	/** Whether a `fleet` service runs somewhere in the cluster. */
	fleetRuns: () => boolean;
	stopping: () => boolean;
	log: DispatchLog;
}

export class RideSweep {
	private sweepRunning: Promise<void> | null = null;
	private readonly startedAt = Date.now();
	private fleetWarnedAt = 0;

	constructor(private readonly deps: RideSweepDeps) {}

	/** The sweep in progress (to await at stop), or null. */
	get current(): Promise<void> | null {
		return this.sweepRunning;
	}

	/** One pass now; a pass already running is joined, not doubled. */
	async run(): Promise<void> {
		if (this.sweepRunning) return this.sweepRunning;
		this.sweepRunning = this.pass();
		try {
			await this.sweepRunning;
		} catch (err) {
			this.deps.log.trouble(`Dispatch sweep: ${shortError(err)}`);
		} finally {
			this.sweepRunning = null;
		}
	}

	private async pass(): Promise<void> {
		const { repo, orders, log, stopping } = this.deps;
		const settle = (orderId: string, what: string, opts?: { abandonInFlight: boolean }) =>
			this.deps.mirror.reconcile(orderId, opts).catch((err: unknown) => log.trouble(`${what} ${orderId}: ${shortError(err)}`));
		for (const { order_id } of await repo.mirror.staleTransitions()) await settle(order_id, "Settling", { abandonInFlight: true });

		// A full pass over every active ride, a page at a time (keyset cursor):
		// a ride whose hint was lost is found however many rides are active.
		// The pages carry each ride's state only; the few that disagree are
		// read whole (reconcile), so a pass costs bytes per ride, not orders.
		// Each page is compared with the mirror rows as they are now, not as
		// the pass began: rides created meanwhile were mirrored by their own
		// events, and reading them again would be work for nothing.
		const openAtStart = await repo.mirror.openRideIds();
		const activeIds = new Set<string>();
		let after: string | undefined;
		do {
			const page = await orders.listActiveStates(after ? { limit: this.deps.settings.sweepPage, after } : { limit: this.deps.settings.sweepPage });
			const mirrorOf = new Map((await repo.mirror.mirrorStates(page.rides.map((r) => r.orderId))).map((m) => [m.order_id, m]));
			for (const ride of page.rides) {
				if (stopping()) return;
				activeIds.add(ride.orderId);
				const m = mirrorOf.get(ride.orderId);
				const agrees = m && m.order_status === ride.status && (ride.status === "searching" || m.driver_id === ride.driverId);
				// The order as it is now: applyOrder ignores it if dispatch already knows better.
				if (!agrees) await settle(ride.orderId, "Sweep");
			}
			after = page.nextCursor ?? undefined;
		} while (after !== undefined);
		// The pass saw every ride active since it began: open mirrors it did not see ended meanwhile.
		for (const m of openAtStart) {
			if (stopping()) return;
			if (!activeIds.has(m.order_id)) await settle(m.order_id, "Sweep");
		}

		this.warnIfNoFleet();

		const orphans = await repo.drivers.freeOrphanDrivers();
		if (orphans.length > 0) log.trouble(`Freed ${orphans.length} driver(s) holding a ride without reason`);
		this.deps.index.publish(orphans);
	}

	/** Simulated mode needs the fleet somewhere in the cluster, or rides only ever time out. */
	private warnIfNoFleet(): void {
		const now = Date.now();
		if (this.deps.settings.fleetMode !== "simulated" || now - this.startedAt <= 30_000 || now - this.fleetWarnedAt <= 60_000) return;
		if (this.deps.fleetRuns()) return;
		this.fleetWarnedAt = now;
		this.deps.log.trouble(
			"FLEET_MODE=simulated but no fleet service runs in this namespace: add `fleet` to SERVICES (e.g. SERVICES=dispatch,fleet), or set FLEET_MODE=live",
		);
	}
}
