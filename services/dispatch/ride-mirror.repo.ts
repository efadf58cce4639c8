import type { Transaction } from "sequelize";
import type { ServiceType } from "../../contracts/common";
import type { DriverMode, RidePhase, SandboxScenario } from "../../contracts/dispatch";
import type { Point } from "../../contracts/common";
import type { Db } from "../../mixins/db.mixin";
import type { DriverRow } from "./drivers.repo";

/**
 * Dispatch's SQL on `dispatch_rides` as the mirror of each order (ride-mirror.ts):
 * the row made from an order snapshot, following the order's status, the
 * accept and no-driver transitions in flight to orders, and the reads of the
 * sweep and the demand index. When a searching ride is looked at again, and
 * by whom, is matching's (matching.repo.ts).
 */

/** A searching ride as the demand index reads it. */
export interface DemandRow {
	order_id: string;
	service_type: ServiceType;
	pickup_lat: number;
	pickup_lng: number;
	partner_id: string | null;
	mode: DriverMode;
}

export interface RideRow {
	order_id: string;
	service_type: ServiceType;
	pickup_lat: number;
	pickup_lng: number;
	drop_lat: number;
	drop_lng: number;
	/** Null for rides mirrored before the column existed. */
	partner_id: string | null;
	mode: DriverMode;
	state: RidePhase;
	order_status: string;
	order_version: number;
	order_updated_at: Date | null;
	driver_id: string | null;
	sandbox: SandboxScenario | null;
	search_started_at: Date;
	next_match_at: Date;
	excluded_driver_ids: string[];
	drop_outs: number;
	phase_since: Date;
	origin_lat: number | null;
	origin_lng: number | null;
	lease_until: Date | null;
	next_location_at: Date | null;
	/** A scheduled ride's search ends by then (migration 010); null for a ride booked now. */
	search_until?: Date | null;
	created_at: Date;
	/** Dispatch migration 011 (driven-distance.ts): metres driven since started, and the last position sampled. */
	driven_m?: number | null;
	driven_lat?: number | null;
	driven_lng?: number | null;
}

/** Which order snapshot a ride row last followed: `[orderId, version, updatedAt]`, the first binds of the mirror updates. */
export type SeenOrder = [orderId: string, version: number, updatedAt: string];

/** Times a bound number of milliseconds into an interval (also matching.repo.ts). */
export const MS = "* interval '1 millisecond'";
/**
 * When a searching ride ends `no_driver_found`: the dispatch timeout (a bind,
 * ms) after its search started, and for a scheduled ride no later than its
 * `search_until` (before its pickup time; LEAST ignores a NULL). `r` is the
 * ride's alias with its dot, or "".
 */
export const DEADLINE = (r: string, timeoutMs: string) => `LEAST(${r}search_started_at + ${timeoutMs}::double precision ${MS}, ${r}search_until)`;
/** Adds the driver (a bind) to the ride's excluded drivers, once, unless null (also matching.repo.ts). */
export const EXCLUDE = (id: string) =>
	`excluded_driver_ids = CASE WHEN ${id}::text IS NULL OR ${id} = ANY(excluded_driver_ids) THEN excluded_driver_ids ELSE array_append(excluded_driver_ids, ${id}::text) END`;

/**
 * True when no available driver could be offered a ride: none of its mode
 * and service type, not excluded for it, inside the search radius' bounding
 * box around its pickup (`radiusDeg`: the radius in degrees of latitude, a
 * bind). The ride's columns are named by `r`. Decides a lonely ride's backoff
 * in `dueSearches` and a new ride's first look in `insertNewRides`.
 */
export const NO_DRIVER_NEAR = (r: { mode: string; serviceType: string; lat: string; lng: string; excluded?: string }, radiusDeg: string) =>
	`NOT EXISTS (
		SELECT 1 FROM drivers d
		WHERE d.status = 'available' AND d.mode = ${r.mode} AND d.service_type = ${r.serviceType}
		AND d.lat BETWEEN ${r.lat} - ${radiusDeg}::double precision AND ${r.lat} + ${radiusDeg}::double precision
		AND d.lng BETWEEN ${r.lng} - ${radiusDeg}::double precision / GREATEST(0.01, cos(radians(${r.lat})))
		              AND ${r.lng} + ${radiusDeg}::double precision / GREATEST(0.01, cos(radians(${r.lat})))
		${r.excluded ? `AND NOT (d.id = ANY(${r.excluded}))` : ""})`;

/**
 * `unnest`'s arrays, `$1::type[]` … in order, each behind a scalar subquery.
 * The statement is prepared (mixins/db.mixin.ts), and PostgreSQL keeps one
 * generic plan only while it looks no dearer than a plan for the values: it
 * sees a literal array's length but not a parameter's, so the first look's
 * per-row driver probe made the generic plan look many times dearer and
 * every batch was planned again (~200 µs each). Behind a subquery both plans
 * assume the same row count.
 */
const OPAQUE_ARRAYS = (types: readonly string[]) => types.map((type, i) => `(SELECT $${i + 1}::${type}[])`).join(", ");

/** When a new ride is first looked at: its backoff and deadline, and the search radius. */
export interface FirstLook {
	retryMatchMs: number;
	dispatchTimeoutMs: number;
	radiusM: number;
}

/** A new searching ride from its `orders.created` snapshot (`insertNewRides`). */
export interface NewRide {
	orderId: string;
	partnerId: string;
	mode: DriverMode;
	serviceType: ServiceType;
	pickup: Point;
	drop: Point;
	sandbox: SandboxScenario | null;
	seen: { version: number; updatedAt: string };
	/** A scheduled ride's last moment of search (its pickup time less the margin), ISO 8601; null for a ride booked now. */
	searchUntil?: string | null;
}

export class RideMirrorRepo {
	constructor(private readonly db: Db) {}

	async ride(orderId: string): Promise<RideRow | undefined> {
		return (await this.db.rows<RideRow>("SELECT * FROM dispatch_rides WHERE order_id = $1", [orderId]))[0];
	}

	/** The ride's row, locked, and whether an in-flight transition's lease still runs. */
	async lockRide(orderId: string, t: Transaction): Promise<(RideRow & { lease_active: boolean }) | undefined> {
		const sql = "SELECT *, (lease_until IS NOT NULL AND lease_until > now()) AS lease_active FROM dispatch_rides WHERE order_id = $1 FOR UPDATE";
		return (await this.db.rows<RideRow & { lease_active: boolean }>(sql, [orderId], t))[0];
	}

	/**
	 * The ride's mirror row, unless one exists (whatever it says is at least as
	 * new: a ride's first snapshot is its creation). `seen` records the order
	 * snapshot it was made from; a `closed` row is the tombstone of an order
	 * that ended before dispatch mirrored it, so a late `orders.created` cannot
	 * open it again. Alone (no `t`) it is one autocommit statement. True when
	 * this call inserted it.
	 */
	async insertRide(r: Omit<NewRide, "seen"> & { seen?: NewRide["seen"]; closedAs?: string }, t?: Transaction): Promise<boolean> {
		const rows = await this.db.rows(
			`INSERT INTO dispatch_rides (order_id, partner_id, service_type, pickup_lat, pickup_lng, drop_lat, drop_lng, state, order_status, sandbox, mode, order_version, order_updated_at, search_until)
			 VALUES ($1, $8, $2, $3, $4, $5, $6, CASE WHEN $12::text IS NULL THEN 'searching' ELSE 'closed' END, COALESCE($12::text, 'searching'), $7, $9, COALESCE($10::int, 0), $11::timestamptz, $13::timestamptz)
			 ON CONFLICT (order_id) DO NOTHING RETURNING order_id`,
			[
				r.orderId,
				r.serviceType,
				r.pickup.lat,
				r.pickup.lng,
				r.drop.lat,
				r.drop.lng,
				r.sandbox,
				r.partnerId,
				r.mode,
				r.seen?.version ?? null,
				r.seen?.updatedAt ?? null,
				r.closedAs ?? null,
				r.searchUntil ?? null,
			],
			t,
		);
		return rows.length > 0;
	}

	/**
	 * New searching rides from their `orders.created` snapshots in one
	 * statement (dispatch groups concurrent events, lib/statement-batcher.ts);
	 * like `insertRide` an existing row is left alone. One answer per ride, in
	 * order: whether this statement inserted it.
	 */
	async insertNewRides(rides: NewRide[], first: FirstLook): Promise<boolean[]> {
		// A ride nobody could be offered now starts backed off (its first retry, as
		// `dueSearches` would set it a moment later) instead of due: that saves
		// the update of every lonely new ride. A driver who comes near wakes it
		// (`wakeSearches`) like any backed-off ride.
		const rows = await this.db.rows<{ order_id: string }>(
			`INSERT INTO dispatch_rides (order_id, partner_id, service_type, pickup_lat, pickup_lng, drop_lat, drop_lng, state, order_status, sandbox, mode, order_version, order_updated_at, search_until, next_match_at)
			 SELECT o, p, st, plat, plng, dlat, dlng, 'searching', 'searching', sb, m, v, u, su,
			   CASE WHEN sb IS DISTINCT FROM 'no_driver_found' AND ${NO_DRIVER_NEAR({ mode: "m", serviceType: "st", lat: "plat", lng: "plng" }, "$15")}
			        THEN LEAST(now() + LEAST($13::double precision, $14::double precision) ${MS}, su) ELSE now() END
			 FROM unnest(${OPAQUE_ARRAYS(["text", "text", "text", "float8", "float8", "float8", "float8", "text", "text", "int", "timestamptz", "timestamptz"])})
			   AS n(o, p, st, plat, plng, dlat, dlng, sb, m, v, u, su)
			 ON CONFLICT (order_id) DO NOTHING RETURNING order_id`,
			[
				rides.map((r) => r.orderId),
				rides.map((r) => r.partnerId),
				rides.map((r) => r.serviceType),
				rides.map((r) => r.pickup.lat),
				rides.map((r) => r.pickup.lng),
				rides.map((r) => r.drop.lat),
				rides.map((r) => r.drop.lng),
				rides.map((r) => r.sandbox),
				rides.map((r) => r.mode),
				rides.map((r) => r.seen.version),
				rides.map((r) => r.seen.updatedAt),
				rides.map((r) => r.searchUntil ?? null),
				first.retryMatchMs,
				first.dispatchTimeoutMs,
				first.radiusM / 111_320,
			],
		);
		const inserted = new Set(rows.map((r) => r.order_id));
		return rides.map((r) => inserted.has(r.orderId));
	}

	/** An accept (`accepting`) or no-driver (`ending`) transition goes to orders; the lease bounds how long it may be in flight. */
	async startTransition(orderId: string, phase: "accepting" | "ending", leaseMs: number, t: Transaction, driver?: DriverRow): Promise<void> {
		await this.db.rows(
			`UPDATE dispatch_rides SET state = $2, lease_until = now() + $3 ${MS}, updated_at = now(),
				driver_id = COALESCE($4, driver_id), origin_lat = CASE WHEN $4::text IS NULL THEN origin_lat ELSE $5 END,
				origin_lng = CASE WHEN $4::text IS NULL THEN origin_lng ELSE $6 END
			 WHERE order_id = $1`,
			[orderId, phase, leaseMs, driver?.id ?? null, driver?.lat ?? null, driver?.lng ?? null],
			t,
		);
	}

	/** The ride followed an order snapshot that changed nothing else. */
	async sawOrder(seen: SeenOrder, t: Transaction): Promise<void> {
		await this.db.rows("UPDATE dispatch_rides SET order_version = $2, order_updated_at = $3 WHERE order_id = $1", seen, t);
	}

	/** Closes the ride (with the snapshot that ended it, when there is one: a vanished order has none). */
	async closeRide(orderId: string, t: Transaction, seen?: { version: number; updatedAt: string; status: string }): Promise<void> {
		await this.db.rows(
			`UPDATE dispatch_rides SET state = 'closed', order_status = COALESCE($4, order_status), order_version = COALESCE($2, order_version),
				order_updated_at = COALESCE($3::timestamptz, order_updated_at), lease_until = NULL, next_location_at = NULL, updated_at = now()
			 WHERE order_id = $1`,
			[orderId, seen?.version ?? null, seen?.updatedAt ?? null, seen?.status ?? null],
			t,
		);
	}

	/** Searching from scratch without the former driver (dropped out, or its accept did not happen). */
	async searchAgain(seen: SeenOrder, formerDriverId: string | null, droppedOut: boolean, t: Transaction): Promise<void> {
		await this.db.rows(
			`UPDATE dispatch_rides SET state = 'searching', order_status = 'searching', order_version = $2, order_updated_at = $3,
				driver_id = NULL, lease_until = NULL, next_location_at = NULL, origin_lat = NULL, origin_lng = NULL,
				search_started_at = now(), next_match_at = now(), phase_since = now(), ${EXCLUDE("$4")},
				-- A scheduled ride's driver dropping out after its pickup time gets a full search, like a ride booked now.
				search_until = CASE WHEN search_until > now() THEN search_until END,
				drop_outs = drop_outs + $5, updated_at = now()
			 WHERE order_id = $1`,
			[...seen, formerDriverId, droppedOut ? 1 : 0],
			t,
		);
	}

	/** An unanswered no-driver call is given up: keep searching. */
	async resumeSearch(seen: SeenOrder, t: Transaction): Promise<void> {
		await this.db.rows(
			`UPDATE dispatch_rides SET state = 'searching', order_status = 'searching', order_version = $2, order_updated_at = $3,
				lease_until = NULL, next_match_at = now(), updated_at = now() WHERE order_id = $1`,
			seen,
			t,
		);
	}

	/** The ride has a driver and a status; a new status restarts its phase clock and, while moving, the location cadence. */
	async assignRide(
		seen: SeenOrder,
		a: { driverId: string | null; status: string; statusChanged: boolean; moving: boolean; locationIntervalMs: number; origin: Point | null },
		t: Transaction,
	): Promise<void> {
		await this.db.rows(
			`UPDATE dispatch_rides SET state = 'assigned', driver_id = $4, order_status = $5, order_version = $2, order_updated_at = $3,
				lease_until = NULL,
				phase_since = CASE WHEN $6 THEN now() ELSE phase_since END,
				next_location_at = CASE WHEN $7 THEN COALESCE(CASE WHEN $6 THEN NULL ELSE next_location_at END, now() + $8 ${MS}) ELSE NULL END,
				origin_lat = COALESCE(origin_lat, $9), origin_lng = COALESCE(origin_lng, $10), updated_at = now()
			 WHERE order_id = $1`,
			[...seen, a.driverId, a.status, a.statusChanged, a.moving, a.locationIntervalMs, a.origin?.lat ?? null, a.origin?.lng ?? null],
			t,
		);
	}

	/** Transitions in flight whose lease ran out. */
	async staleTransitions(): Promise<Array<{ order_id: string }>> {
		return this.db.rows("SELECT order_id FROM dispatch_rides WHERE state IN ('accepting','ending') AND lease_until < now() LIMIT 100");
	}

	/** The ids of the rides not closed (the sweep's pass starts from them). */
	async openRideIds(): Promise<Array<{ order_id: string }>> {
		return this.db.rows("SELECT order_id FROM dispatch_rides WHERE state <> 'closed'");
	}

	/** What the sweep compares, for one page of rides (those without a row are missing). */
	async mirrorStates(orderIds: readonly string[]): Promise<Array<{ order_id: string; order_status: string; driver_id: string | null }>> {
		return this.db.rows("SELECT order_id, order_status, driver_id FROM dispatch_rides WHERE order_id = ANY($1::text[])", [orderIds]);
	}

	/** Rides that count as demand: those still searching (a cancelled or matched request is no demand). */
	async demandRides() {
		return this.db.rows<DemandRow>("SELECT order_id, service_type, pickup_lat, pickup_lng, partner_id, mode FROM dispatch_rides WHERE state = 'searching'");
	}
}
