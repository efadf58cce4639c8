import type { Transaction } from "sequelize";
import { SERVICE_TYPES } from "../../contracts/common";
import { DRIVER_MODES, type SupplyDemandReply } from "../../contracts/dispatch";
import { haversineMeters } from "../../lib/geo";
import type { ServiceType } from "../../contracts/common";
import type { DriverChangedEvent, DriverMode, NearbyDriver, NearestDriversParams } from "../../contracts/dispatch";
import type { InternalOrder } from "../../contracts/orders";
import type { Point } from "../../contracts/common";
import { cappedDemand, etaSeconds, shortError } from "./dispatch-rules";
import { pickupOf, toDriverChange } from "./dispatch-views";
import type { DispatchSettings } from "./dispatch.settings";
import type { DemandItem, DispatchLog, ModeIndexes, WorkSignal } from "./dispatch.types";
import type { DriverRow, DriversRepo } from "./drivers.repo";
import type { MatchingRepo } from "./matching.repo";
import type { DemandRow, RideMirrorRepo, RideRow } from "./ride-mirror.repo";
import { CellIndex } from "./spatial-index";

/**
 * The driver index: each instance's in-memory H3 cache of the available
 * drivers (for nearest-driver lookups) and of the searching rides (demand).
 * A cache of the driver table, rebuilt at start and kept fresh by
 * `dispatch.driverChanged` broadcasts plus a periodic re-read of recently
 * changed drivers; a driver's revision orders its changes. Drivers and
 * rides are kept per mode: a test ride's candidates and a test quote's supply
 * and demand are test drivers and rides only, and the same for live.
 */
export function modeIndexes<T>(resolution: number, groupOf?: (item: T) => string): ModeIndexes<T> {
	const types = () => ({ scooty: new CellIndex<T>(resolution, undefined, groupOf), cab: new CellIndex<T>(resolution, undefined, groupOf) });
	return { test: types(), live: types() };
}

/** The demand indexes: searching rides grouped by partner, so each partner's demand near a point is counted per cell, not per ride. */
export function demandIndexes(resolution: number): ModeIndexes<DemandItem> {
	return modeIndexes<DemandItem>(resolution, (d) => d.partnerId);
}

/** Rows per slice of a demand refresh: the event loop turns between slices. */
const DEMAND_SLICE = 1_000;

/** The ride ids each demand index holds, per mode and type. */
export function demandIds(indexes: ModeIndexes<DemandItem>): Map<CellIndex<DemandItem>, Set<string>> {
	const ids = new Map<CellIndex<DemandItem>, Set<string>>();
	for (const mode of DRIVER_MODES) for (const type of SERVICE_TYPES) ids.set(indexes[mode][type], new Set(indexes[mode][type].ids()));
	return ids;
}

/**
 * Brings the demand indexes in line with the searching rides read from the
 * database: a ride that is new, moved or changed partner is (re)placed, one
 * that was in an index before the read (`before`) and is not searching any
 * more leaves it; a ride already in place costs a lookup. Rebuilding the
 * indexes from scratch placed every ride in its H3 cell again in one
 * synchronous block: 22-59 ms for 15,000 searching rides, a stall of the
 * event loop every refresh that grew with the backlog (now ~8 ms in slices
 * of at most ~2-6 ms with 1,000 rides new since the last refresh). `pause`
 * runs between slices of DEMAND_SLICE rides. A ride added meanwhile by an
 * event was not in `before`, so it stays.
 */
export async function syncDemand(
	indexes: ModeIndexes<DemandItem>,
	rows: readonly DemandRow[],
	before: Map<CellIndex<DemandItem>, Set<string>>,
	pause: () => Promise<void>,
): Promise<void> {
	for (let i = 0; i < rows.length; i++) {
		if (i > 0 && i % DEMAND_SLICE === 0) await pause();
		const r = rows[i];
		const index = indexes[r.mode]?.[r.service_type];
		if (!index) continue;
		before.get(index)?.delete(r.order_id);
		const partnerId = r.partner_id ?? "";
		const at = index.pointOf(r.order_id);
		if (at && at.lat === r.pickup_lat && at.lng === r.pickup_lng && index.get(r.order_id)?.partnerId === partnerId) continue;
		index.upsert(r.order_id, { lat: r.pickup_lat, lng: r.pickup_lng }, { partnerId });
	}
	// What was there before the read and was not read: no longer searching.
	for (const [index, gone] of before) for (const id of gone) index.remove(id);
}

export interface DriverIndexDeps {
	settings: Pick<
		DispatchSettings,
		"h3Resolution" | "searchRadiusM" | "supplyRadiusM" | "speedsKmh" | "roadFactor" | "demandPerPartner" | "candidatesPerAttempt"
	>;
	repo: {
		drivers: Pick<DriversRepo, "indexDrivers" | "driversChangedSince" | "availableInBox">;
		mirror: Pick<RideMirrorRepo, "demandRides">;
		matching: Pick<MatchingRepo, "wakeSearches">;
		now(): Promise<Date>;
	};
	/** Tells the other instances (`dispatch.driverChanged`); this instance applies its own changes first. */
	announce: (change: DriverChangedEvent) => void;
	/** Searching rides became due because a driver came near. */
	onWork: WorkSignal;
	log: DispatchLog;
}

/** The order fields the demand index follows. */
export type DemandOrder = Pick<InternalOrder, "orderId" | "partnerId" | "serviceType" | "pickup" | "mode">;

export class DriverIndex {
	/** Available drivers by mode and type. */
	private readonly available: ModeIndexes<null>;
	/** Searching rides by mode and type, grouped by partner. */
	private readonly demand: ModeIndexes<DemandItem>;
	/** Each driver's newest revision applied: an older change is ignored. */
	private readonly driverRevs = new Map<string, number>();
	/** Database time of the last read; the next refresh re-reads drivers changed since (with overlap). */
	private refreshedUpTo: Date | null = null;

	constructor(private readonly deps: DriverIndexDeps) {
		this.available = modeIndexes<null>(deps.settings.h3Resolution);
		this.demand = demandIndexes(deps.settings.h3Resolution);
	}

	/**
	 * Applies driver changes to this instance's index and tells the other
	 * instances. A driver that became available, or moved, wakes the
	 * searching rides that just came within its reach (from the demand
	 * index; a driver far from every ride causes no database work).
	 */
	publish(rows: DriverRow[]): void {
		const wake = new Set<string>();
		for (const row of rows) {
			const change = toDriverChange(row);
			const before = this.available[row.mode]?.[row.service_type]?.pointOf(row.id);
			this.apply(change);
			this.ridesNewlyInReach(row, before, wake);
			this.deps.announce(change);
		}
		if (wake.size > 0) this.wakeRides([...wake]);
	}

	/**
	 * Drivers that moved (a position, not a state change: no revision, not
	 * announced; positions travel in batches). An available driver's point
	 * follows. The answer is the searching rides it just came near: the caller
	 * wakes them (`wake`) once PostgreSQL has the position too, since matching
	 * reads positions there.
	 */
	moved(rows: ReadonlyArray<Pick<DriverRow, "id" | "mode" | "service_type" | "status" | "lat" | "lng">>): string[] {
		const wake = new Set<string>();
		for (const row of rows) {
			if (row.status !== "available" || row.lat === null || row.lng === null) continue;
			const index = this.available[row.mode]?.[row.service_type];
			const before = index?.pointOf(row.id);
			// Not in the index: not available here yet (its state change is on its way).
			if (!index || !before) continue;
			index.upsert(row.id, { lat: row.lat, lng: row.lng }, null);
			this.ridesNewlyInReach(row, before, wake);
		}
		return [...wake];
	}

	/** Searching rides within reach of an available driver's new point that were not within reach of its point before. */
	private ridesNewlyInReach(row: Pick<DriverRow, "mode" | "service_type" | "status" | "lat" | "lng">, before: Point | undefined, wake: Set<string>): void {
		if (row.status !== "available" || row.lat === null || row.lng === null) return;
		const radiusM = this.deps.settings.searchRadiusM;
		const demand = this.demand[row.mode]?.[row.service_type];
		demand?.forEachWithin({ lat: row.lat, lng: row.lng }, radiusM, (orderId) => {
			const pickup = demand.pointOf(orderId);
			// Already within reach before this change: that ride has had its chance at this driver.
			if (before && pickup && haversineMeters(before, pickup) <= radiusM) return;
			wake.add(orderId);
		});
	}

	/** Rides a driver event may serve: due now (in the database, so any instance may match them), and matching work here. */
	wake(orderIds: string[]): void {
		if (orderIds.length > 0) this.wakeRides(orderIds);
	}

	private wakeRides(orderIds: string[]): void {
		this.deps.repo.matching.wakeSearches(orderIds).then(
			(n) => {
				if (n > 0) this.deps.onWork();
			},
			(err: unknown) => this.deps.log.trouble(`Waking ${orderIds.length} ride(s): ${shortError(err)} (their backoff still runs)`),
		);
	}

	/** A driver change from this or another instance; older revisions are ignored. */
	apply(change: DriverChangedEvent): void {
		const known = this.driverRevs.get(change.id);
		if (known !== undefined && known >= change.rev) return;
		this.driverRevs.set(change.id, change.rev);
		for (const m of DRIVER_MODES) if (m !== change.mode) this.available[m][change.serviceType]?.remove(change.id);
		const index = this.available[change.mode]?.[change.serviceType];
		if (!index) return;
		if (change.status === "available" && change.lat !== null && change.lng !== null) index.upsert(change.id, { lat: change.lat, lng: change.lng }, null);
		else index.remove(change.id);
	}

	/** A driver the database says is not available after all (this index was behind). */
	forget(mode: DriverMode, serviceType: ServiceType, driverId: string): void {
		this.available[mode][serviceType].remove(driverId);
	}

	async rebuild(): Promise<void> {
		const now = await this.deps.repo.now();
		const rows = await this.deps.repo.drivers.indexDrivers();
		for (const mode of DRIVER_MODES) for (const type of SERVICE_TYPES) this.available[mode][type].clear();
		this.driverRevs.clear();
		for (const row of rows) this.apply(toDriverChange(row));
		this.refreshedUpTo = now;
		const { test, live } = this.available;
		this.deps.log.info(
			`Driver index built: live ${live.scooty.size} scooty, ${live.cab.size} cab; test ${test.scooty.size} scooty, ${test.cab.size} cab available`,
		);
	}

	/** Re-reads drivers changed since the last read (with overlap for late commits): catches missed broadcasts. */
	async refresh(): Promise<void> {
		const now = await this.deps.repo.now();
		const rows = await this.deps.repo.drivers.driversChangedSince(this.refreshedUpTo ?? new Date(0));
		for (const row of rows) this.apply(toDriverChange(row));
		this.refreshedUpTo = now;
	}

	/** Re-reads the searching rides (catches changes other instances made), bringing the index in line in slices. */
	async refreshDemand(): Promise<void> {
		const before = demandIds(this.demand);
		const rows = await this.deps.repo.mirror.demandRides();
		await syncDemand(this.demand, rows, before, () => new Promise<void>((resolve) => setImmediate(resolve)));
	}

	/** This instance's demand index follows a ride it just changed: searching rides count, others do not. */
	setDemand(order: DemandOrder, searching: boolean): void {
		const index = this.demand[order.mode][order.serviceType];
		if (!index) return;
		if (searching) index.upsert(order.orderId, order.pickup, { partnerId: order.partnerId });
		else index.remove(order.orderId);
	}

	/** Pricing's input: per type, the nearest available driver's ETA and the supply and demand of one mode around the point. */
	supplyDemandAt(point: Point, mode: DriverMode): SupplyDemandReply {
		const s = this.deps.settings;
		const out = {} as SupplyDemandReply;
		const available = this.available[mode];
		for (const type of SERVICE_TYPES) {
			const nearest = available[type].nearest(point, { limit: 1, radiusM: s.searchRadiusM });
			const perPartner = this.demand[mode][type].countGroupsWithin(point, s.supplyRadiusM);
			out[type] = {
				eta: nearest[0] ? etaSeconds(nearest[0].distanceM, s.speedsKmh[type], s.roadFactor) : null,
				available: available[type].countWithin(point, s.supplyRadiusM),
				demand: cappedDemand(perPartner.values(), s.demandPerPartner),
			};
		}
		return out;
	}

	nearest({ point, serviceType, mode, limit, radiusM }: NearestDriversParams): NearbyDriver[] {
		const s = this.deps.settings;
		const found = this.available[mode ?? "test"][serviceType].nearest(point, { limit: limit ?? 5, radiusM: radiusM ?? s.searchRadiusM });
		return found.map((n) => ({
			driverId: n.id,
			distanceM: Math.round(n.distanceM),
			eta: etaSeconds(n.distanceM, s.speedsKmh[serviceType], s.roadFactor),
			location: n.point,
		}));
	}

	/** Whether some available driver not excluded from the ride is within the search radius. */
	hasCandidate(ride: RideRow): boolean {
		const excluded = new Set(ride.excluded_driver_ids);
		const found = this.available[ride.mode][ride.service_type].nearest(pickupOf(ride), {
			limit: 1,
			radiusM: this.deps.settings.searchRadiusM,
			accept: (id) => !excluded.has(id),
		});
		return found.length > 0;
	}

	/** Nearest available candidates: the index first; the database when the index has nobody (it may be behind). */
	async candidates(pickup: Point, serviceType: ServiceType, mode: DriverMode, excluded: Set<string>, t: Transaction): Promise<Array<{ driverId: string }>> {
		const { searchRadiusM, candidatesPerAttempt } = this.deps.settings;
		const fromIndex = this.available[mode][serviceType].nearest(pickup, {
			limit: candidatesPerAttempt,
			radiusM: searchRadiusM,
			accept: (id) => !excluded.has(id),
		});
		if (fromIndex.length > 0) return fromIndex.map((n) => ({ driverId: n.id }));
		const rows = await this.deps.repo.drivers.availableInBox(pickup, serviceType, mode, searchRadiusM, [...excluded], candidatesPerAttempt, t);
		return rows.filter((r) => haversineMeters(pickup, r) <= searchRadiusM).map((r) => ({ driverId: r.id }));
	}

	/** Available drivers counted by mode and type (the start-up log, tests). */
	size(mode: DriverMode, serviceType: ServiceType): number {
		return this.available[mode][serviceType].size;
	}
}
