import { LRUCache } from "lru-cache";
import type { DriverChangedEvent, DriverPositionsEvent } from "../../contracts/dispatch";
import type { Point } from "../../contracts/common";
import { ApiError } from "../../lib/errors";
import { bearingDegrees, haversineMeters } from "../../lib/geo";
import { shortError } from "./dispatch-rules";
import type { DispatchSettings } from "./dispatch.settings";
import type { DispatchLog } from "./dispatch.types";
import type { DriverIndex } from "./driver-index";
import type { DriverRow, DriversRepo, PositionFix } from "./drivers.repo";

/**
 * What this instance knows of each driver it has met: its row as last read
 * or followed (state changes arrive as `dispatch.driverChanged`), and its
 * newest position. A position report costs no database work: it updates
 * this cache and the index, and waits for the next flush, which writes every
 * position recorded since the last one in one statement and tells the other
 * instances in one message. A state change (online, offline, offer, ride)
 * is never a position: it goes to PostgreSQL at once, in its own transaction.
 *
 * Presence: an available driver not heard of for `silentAfterMs` goes
 * offline (`silent`) and comes back with its next position; the sweep reads
 * only the silent ones (a partial index on `location_at`). Simulated drivers
 * (the sandbox's own fleet) are exempt from the speed check and the sweep.
 */

export interface DriverPresenceDeps {
	settings: Pick<DispatchSettings, "maxSpeedKmh" | "jumpToleranceM" | "silentAfterMs" | "driverCacheMax">;
	repo: Pick<DriversRepo, "driver" | "recordPositions" | "offlineSilent" | "backFromSilence">;
	index: Pick<DriverIndex, "publish" | "moved" | "wake">;
	/** Tells the other instances (`dispatch.driverPositions`), once per flush. */
	announcePositions: (event: DriverPositionsEvent) => Promise<void>;
	log: DispatchLog;
}

/** Fixes per `dispatch.driverPositions` message: well under NATS's default 1 MB payload. */
const POSITIONS_PER_MESSAGE = 5_000;
/** Drivers a silence sweep takes offline per statement. */
const SILENT_PAGE = 1_000;

const driverNotFound = (): ApiError => new ApiError("DRIVER_NOT_FOUND", "Driver not found");

export class DriverPresence {
	private readonly known: LRUCache<string, DriverRow>;
	/** Positions recorded here since the last flush, the newest per driver. */
	private pending = new Map<string, PositionFix>();
	private flushing: Promise<void> | null = null;

	constructor(private readonly deps: DriverPresenceDeps) {
		this.known = new LRUCache({ max: deps.settings.driverCacheMax });
	}

	/** The driver as this instance knows it; read once from PostgreSQL when it does not. */
	async driver(driverId: string): Promise<DriverRow> {
		const cached = this.known.get(driverId);
		if (cached) return cached;
		const row = await this.deps.repo.driver(driverId);
		if (!row) throw driverNotFound();
		this.remember(row);
		return this.known.get(driverId) ?? row;
	}

	/** A row just read or written: kept unless this instance already follows a newer revision. */
	remember(row: DriverRow): void {
		const known = this.known.get(row.id);
		if (known && Number(known.rev) > Number(row.rev)) return;
		// A newer position recorded here wins over the row's (the row's is at most one flush old).
		this.known.set(row.id, this.withNewestPosition(row));
	}

	/** A row read from PostgreSQL with the newest position this instance knows (the row's is up to one flush old). */
	withNewestPosition(row: DriverRow): DriverRow {
		const known = this.known.get(row.id);
		if (!known?.location_at || (row.location_at && row.location_at >= known.location_at)) return row;
		return { ...row, lat: known.lat, lng: known.lng, heading: known.heading, location_at: known.location_at };
	}

	/** A state change from any instance (`dispatch.driverChanged`). Drivers this instance never met are not cached from it. */
	applyChange(change: DriverChangedEvent): void {
		const known = this.known.get(change.id);
		if (!known || Number(known.rev) >= change.rev) return;
		this.known.set(change.id, { ...known, status: change.status, order_id: change.orderId, offline_reason: change.offlineReason, rev: change.rev });
	}

	/** Positions another instance recorded (`dispatch.driverPositions`). */
	applyPositions(event: DriverPositionsEvent): void {
		const moved: DriverRow[] = [];
		for (const [driverId, lat, lng, heading, at] of event.positions) {
			const known = this.known.get(driverId);
			if (!known || (known.location_at && known.location_at.getTime() >= at)) continue;
			const row = { ...known, lat, lng, heading, location_at: new Date(at) };
			this.known.set(driverId, row);
			moved.push(row);
		}
		// Flushed before they were announced: PostgreSQL has them, the rides may be matched now.
		this.deps.index.wake(this.deps.index.moved(moved));
	}

	/**
	 * The driver's newest position: refused when it implies an impossible
	 * speed, else recorded here (PostgreSQL at the next flush). A driver gone
	 * offline for silence is back at once (a state change). Without a heading
	 * the driver faces the way it moved (kept when it barely moved).
	 */
	async report(driverId: string, fix: { lat: number; lng: number; heading?: number }): Promise<DriverRow> {
		const row = await this.driver(driverId);
		const now = Date.now();
		const last = row.lat !== null && row.lng !== null ? { lat: row.lat, lng: row.lng } : null;
		if (last && !row.simulated && row.location_at) this.checkSpeed(last, fix, now - row.location_at.getTime());
		let heading = fix.heading;
		if (heading === undefined)
			heading = last && haversineMeters(last, fix) > 5 ? Math.round(bearingDegrees(last, fix)) % 360 : Math.round(row.heading ?? 0) % 360;
		if (row.status === "offline" && row.offline_reason === "silent") {
			const back = await this.deps.repo.backFromSilence(driverId, { lat: fix.lat, lng: fix.lng, heading });
			if (back) {
				this.remember(back);
				this.deps.index.publish([back]);
				return back;
			}
		}
		const moved: DriverRow = { ...row, lat: fix.lat, lng: fix.lng, heading, location_at: new Date(now) };
		this.known.set(driverId, moved);
		const position: PositionFix = { driverId, lat: fix.lat, lng: fix.lng, heading, at: now };
		const woken = this.deps.index.moved([moved]);
		if (woken.length === 0) {
			this.pending.set(driverId, position);
			return moved;
		}
		// The driver came near searching rides: matching reads positions in PostgreSQL, so this one goes there now (rare: a wake, not a ping).
		await this.deps.repo.recordPositions([position]);
		this.pending.delete(driverId);
		this.deps.index.wake(woken);
		return moved;
	}

	private checkSpeed(from: Point, to: Point, elapsedMs: number): void {
		const { maxSpeedKmh, jumpToleranceM } = this.deps.settings;
		const distanceM = haversineMeters(from, to);
		const allowedM = (maxSpeedKmh / 3.6) * (Math.max(0, elapsedMs) / 1000) + jumpToleranceM;
		if (distanceM <= allowedM) return;
		throw new ApiError(
			"LOCATION_IMPLAUSIBLE",
			`That position is ${Math.round(distanceM)} m from the last one ${Math.round(elapsedMs / 1000)} s ago: faster than ${maxSpeedKmh} km/h`,
			{
				details: [{ field: "location", message: `at most ${Math.round(allowedM)} m from the last position after ${Math.round(elapsedMs / 1000)} s` }],
			},
		);
	}

	/** Writes the positions recorded since the last flush (one statement) and tells the other instances (one message per 5,000). */
	async flush(): Promise<void> {
		if (this.flushing) return this.flushing;
		if (this.pending.size === 0) return;
		const fixes = [...this.pending.values()];
		this.pending = new Map();
		this.flushing = (async () => {
			try {
				await this.deps.repo.recordPositions(fixes);
			} catch (err) {
				// Kept for the next flush unless a newer position came meanwhile: a position may be superseded, never lost for a failed statement.
				for (const f of fixes) if (!this.pending.has(f.driverId)) this.pending.set(f.driverId, f);
				this.deps.log.trouble(`Recording ${fixes.length} driver position(s): ${shortError(err)} (retried at the next flush)`);
				return;
			}
			for (let i = 0; i < fixes.length; i += POSITIONS_PER_MESSAGE) {
				const positions = fixes
					.slice(i, i + POSITIONS_PER_MESSAGE)
					.map((f): [string, number, number, number, number] => [f.driverId, f.lat, f.lng, f.heading, f.at]);
				await this.deps.announcePositions({ positions }).catch((err: unknown) => this.deps.log.debug(`driverPositions broadcast: ${shortError(err)}`));
			}
		})();
		try {
			await this.flushing;
		} finally {
			this.flushing = null;
		}
	}

	/** Available drivers gone silent go offline, a page at a time, until none is left. */
	async sweepSilent(): Promise<number> {
		let total = 0;
		for (;;) {
			const rows = await this.deps.repo.offlineSilent(this.deps.settings.silentAfterMs, SILENT_PAGE);
			for (const row of rows) this.remember(row);
			this.deps.index.publish(rows);
			total += rows.length;
			if (rows.length < SILENT_PAGE) return total;
		}
	}

	/** Positions waiting for the next flush (tests, metrics). */
	get pendingCount(): number {
		return this.pending.size;
	}
}
