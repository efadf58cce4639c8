import { QueryTypes, type Sequelize, type Transaction } from "sequelize";
import type { ServiceType } from "../../contracts/common";
import type { DriverMode, DriverStatus, ListDriversParams, RidePhase, SandboxScenario } from "../../contracts/dispatch";
import type { LatLng } from "../../lib/geo";

/**
 * All of dispatch's SQL: `drivers`, `dispatch_rides` (dispatch's mirror of
 * each ride) and `dispatch_offers`. Every claim is a conditional update, so
 * any number of dispatch instances can run: the database decides who gets a
 * driver. Functions taking a transaction run inside the caller's.
 */

export interface DriverRow {
	id: string;
	name: string;
	phone: string;
	vehicle_number: string;
	service_type: ServiceType;
	status: DriverStatus;
	order_id: string | null;
	lat: number | null;
	lng: number | null;
	heading: number | null;
	location_at: Date | null;
	simulated: boolean;
	mode: DriverMode;
	wrong_otp_count: number;
	rev: string | number;
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
	created_at: Date;
}

export interface OfferRow {
	id: string;
	driver_id: string;
	state: string;
	distance_m: number;
	eta: number;
	created_at: Date;
	expires_at: Date;
	responded_at: Date | null;
}

/** Which order snapshot a ride row last followed: `[orderId, version, updatedAt]`, the first binds of the mirror updates. */
export type SeenOrder = [orderId: string, version: number, updatedAt: string];

/** A driver's position as the index keeps it. */
export type IndexRow = Pick<DriverRow, "id" | "service_type" | "status" | "lat" | "lng" | "rev" | "mode">;

/** The one way a driver becomes free: no ride, available, a new revision for the indexes. */
const FREE_DRIVER = "status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp()";
/** Every other driver change also bumps the revision the indexes order changes by. */
const BUMP = "rev = rev + 1, updated_at = clock_timestamp()";
const MS = "* interval '1 millisecond'";
const EXCLUDE = (id: string) =>
	`excluded_driver_ids = CASE WHEN ${id}::text IS NULL OR ${id} = ANY(excluded_driver_ids) THEN excluded_driver_ids ELSE array_append(excluded_driver_ids, ${id}::text) END`;

export class DispatchRepo {
	constructor(private readonly sequelize: Sequelize) {}

	async q<T extends object>(sql: string, bind: unknown[] = [], t?: Transaction): Promise<T[]> {
		return this.sequelize.query<T>(sql, { bind, type: QueryTypes.SELECT, transaction: t });
	}

	async tx<T>(fn: (t: Transaction) => Promise<T>): Promise<T> {
		return this.sequelize.transaction((t) => fn(t));
	}

	async dbNow(): Promise<Date> {
		return (await this.q<{ now: Date }>("SELECT now() AS now"))[0].now;
	}

	// ---- drivers ----

	async insertDriver(id: string, p: { name: string; phone: string; vehicleNumber: string; serviceType: ServiceType; simulated?: boolean; mode: DriverMode }): Promise<DriverRow | undefined> {
		const rows = await this.q<DriverRow>(
			`INSERT INTO drivers (id, name, phone, vehicle_number, service_type, simulated, mode)
			 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (phone) DO NOTHING RETURNING *`,
			[id, p.name, p.phone, p.vehicleNumber, p.serviceType, p.simulated ?? false, p.mode],
		);
		return rows[0];
	}

	async driverByPhone(phone: string): Promise<DriverRow | undefined> {
		return (await this.q<DriverRow>("SELECT * FROM drivers WHERE phone = $1", [phone]))[0];
	}

	async driver(driverId: string, t?: Transaction): Promise<DriverRow | undefined> {
		return (await this.q<DriverRow>("SELECT * FROM drivers WHERE id = $1", [driverId], t))[0];
	}

	/** Moves the driver; `online` also makes an offline driver available. */
	async setDriverLocation(driverId: string, at: { lat: number; lng: number; heading?: number | null }, online: boolean): Promise<DriverRow | undefined> {
		const status = online ? "status = CASE WHEN status = 'offline' THEN 'available' ELSE status END," : "";
		const rows = await this.q<DriverRow>(
			`UPDATE drivers SET ${status} lat = $2, lng = $3, heading = COALESCE($4, heading, 0), location_at = now(), ${BUMP}
			 WHERE id = $1 RETURNING *`,
			[driverId, at.lat, at.lng, at.heading ?? null],
		);
		return rows[0];
	}

	async setDriverOffline(driverId: string): Promise<DriverRow | undefined> {
		const rows = await this.q<DriverRow>(`UPDATE drivers SET status = 'offline', ${BUMP} WHERE id = $1 AND status IN ('available','offline') RETURNING *`, [driverId]);
		return rows[0];
	}

	/**
	 * Frees the drivers holding `orderId`: all of them, or only `driverId`
	 * while it is `offered`, or all but `exceptDriverId` (who keeps the ride).
	 */
	async freeDrivers(orderId: string, t: Transaction, only: { offeredDriverId?: string; exceptDriverId?: string | null } = {}): Promise<DriverRow[]> {
		return this.q<DriverRow>(
			`UPDATE drivers SET ${FREE_DRIVER}
			 WHERE order_id = $1 AND ($2::text IS NULL OR (id = $2 AND status = 'offered')) AND ($3::text IS NULL OR id <> $3) RETURNING *`,
			[orderId, only.offeredDriverId ?? null, only.exceptDriverId ?? null],
			t,
		);
	}

	/** Drivers holding a ride with no open offer or assignment behind it (a crash between steps). */
	async freeOrphanDrivers(): Promise<DriverRow[]> {
		return this.q<DriverRow>(
			`UPDATE drivers d SET ${FREE_DRIVER}
			 WHERE d.order_id IS NOT NULL AND d.updated_at < now() - interval '30 seconds'
			 AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = d.order_id AND o.driver_id = d.id AND o.state = 'pending' AND d.status = 'offered')
			 AND NOT EXISTS (SELECT 1 FROM dispatch_rides r WHERE r.order_id = d.order_id AND r.driver_id = d.id AND r.state IN ('accepting','assigned') AND d.status = 'on_trip')
			 RETURNING d.*`,
		);
	}

	/** Offers the ride to an available driver of the type and mode, unless another instance got there first. */
	async claimDriver(driverId: string, orderId: string, serviceType: ServiceType, mode: DriverMode, t: Transaction): Promise<DriverRow | undefined> {
		const rows = await this.q<DriverRow>(
			`UPDATE drivers SET status = 'offered', order_id = $2, ${BUMP}
			 WHERE id = (SELECT id FROM drivers WHERE id = $1 AND status = 'available' AND service_type = $3 AND mode = $4 FOR UPDATE SKIP LOCKED)
			 RETURNING *`,
			[driverId, orderId, serviceType, mode],
			t,
		);
		return rows[0];
	}

	/** The offered driver takes the ride. */
	async startTrip(driverId: string, orderId: string, t: Transaction): Promise<DriverRow | undefined> {
		const rows = await this.q<DriverRow>(`UPDATE drivers SET status = 'on_trip', ${BUMP} WHERE id = $1 AND status = 'offered' AND order_id = $2 RETURNING *`, [driverId, orderId], t);
		return rows[0];
	}

	/** The order names this driver: hold it on the ride (nothing when it already is, or holds another ride). */
	async holdForRide(driverId: string, orderId: string, t: Transaction): Promise<DriverRow[]> {
		return this.q<DriverRow>(
			`UPDATE drivers SET status = 'on_trip', order_id = $2, ${BUMP}
			 WHERE id = $1 AND (order_id IS NULL OR order_id = $2) AND NOT (status = 'on_trip' AND order_id = $2) RETURNING *`,
			[driverId, orderId],
			t,
		);
	}

	async countWrongOtp(driverId: string): Promise<void> {
		await this.q("UPDATE drivers SET wrong_otp_count = wrong_otp_count + 1 WHERE id = $1", [driverId]);
	}

	async listDrivers(p: ListDriversParams): Promise<DriverRow[]> {
		return this.q<DriverRow>(
			`SELECT * FROM drivers
			 WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR service_type = $2) AND ($3::boolean IS NULL OR simulated = $3)
			 AND ($6::text IS NULL OR mode = $6)
			 ORDER BY created_at DESC, id LIMIT $4 OFFSET $5`,
			[p.status ?? null, p.serviceType ?? null, p.simulated ?? null, p.limit ?? 100, p.offset ?? 0, p.mode ?? null],
		);
	}

	async driverCounts(): Promise<Array<{ status: DriverStatus; service_type: ServiceType; n: number }>> {
		return this.q("SELECT status, service_type, count(*)::int AS n FROM drivers GROUP BY status, service_type");
	}

	/** Every driver the index must know (offline ones it need not). */
	async indexDrivers(): Promise<IndexRow[]> {
		return this.q<IndexRow>("SELECT id, service_type, status, lat, lng, rev, mode FROM drivers WHERE status <> 'offline'");
	}

	/** Drivers changed since `since`, with overlap for late commits. */
	async driversChangedSince(since: Date): Promise<IndexRow[]> {
		return this.q<IndexRow>("SELECT id, service_type, status, lat, lng, rev, mode FROM drivers WHERE updated_at > $1::timestamptz - interval '10 seconds'", [since.toISOString()]);
	}

	/** Available drivers of a type and mode in the box around `pickup`, roughly nearest first (when the index knows nobody). */
	async availableInBox(pickup: LatLng, serviceType: ServiceType, mode: DriverMode, radiusM: number, excluded: string[], limit: number, t: Transaction): Promise<Array<{ id: string; lat: number; lng: number }>> {
		const dLat = radiusM / 111_320;
		const cos = Math.max(0.01, Math.cos((pickup.lat * Math.PI) / 180));
		const dLng = radiusM / (111_320 * cos);
		return this.q(
			`SELECT id, lat, lng FROM drivers
			 WHERE status = 'available' AND mode = $11 AND service_type = $1 AND lat BETWEEN $2 AND $3 AND lng BETWEEN $4 AND $5 AND NOT (id = ANY($6::text[]))
			 ORDER BY (lat - $7) * (lat - $7) + ((lng - $8) * $9) * ((lng - $8) * $9) LIMIT $10`,
			[serviceType, pickup.lat - dLat, pickup.lat + dLat, pickup.lng - dLng, pickup.lng + dLng, excluded, pickup.lat, pickup.lng, cos, limit, mode],
			t,
		);
	}

	// ---- rides ----

	async ride(orderId: string): Promise<RideRow | undefined> {
		return (await this.q<RideRow>("SELECT * FROM dispatch_rides WHERE order_id = $1", [orderId]))[0];
	}

	/** The ride's row, locked, and whether an in-flight transition's lease still runs. */
	async lockRide(orderId: string, t: Transaction): Promise<(RideRow & { lease_active: boolean }) | undefined> {
		const sql = "SELECT *, (lease_until IS NOT NULL AND lease_until > now()) AS lease_active FROM dispatch_rides WHERE order_id = $1 FOR UPDATE";
		return (await this.q<RideRow & { lease_active: boolean }>(sql, [orderId], t))[0];
	}

	/**
	 * The ride's mirror row, unless one exists (whatever it says is at least as
	 * new: a ride's first snapshot is its creation). `seen` records the order
	 * snapshot it was made from; a `closed` row is the tombstone of an order
	 * that ended before dispatch mirrored it, so a late `orders.created` cannot
	 * open it again. Alone (no `t`) it is one autocommit statement. True when
	 * this call inserted it.
	 */
	async insertRide(
		r: { orderId: string; partnerId: string; mode: DriverMode; serviceType: ServiceType; pickup: LatLng; drop: LatLng; sandbox: SandboxScenario | null; seen?: { version: number; updatedAt: string }; closedAs?: string },
		t?: Transaction,
	): Promise<boolean> {
		const rows = await this.q(
			`INSERT INTO dispatch_rides (order_id, partner_id, service_type, pickup_lat, pickup_lng, drop_lat, drop_lng, state, order_status, sandbox, mode, order_version, order_updated_at)
			 VALUES ($1, $8, $2, $3, $4, $5, $6, CASE WHEN $12::text IS NULL THEN 'searching' ELSE 'closed' END, COALESCE($12::text, 'searching'), $7, $9, COALESCE($10::int, 0), $11::timestamptz)
			 ON CONFLICT (order_id) DO NOTHING RETURNING order_id`,
			[r.orderId, r.serviceType, r.pickup.lat, r.pickup.lng, r.drop.lat, r.drop.lng, r.sandbox, r.partnerId, r.mode, r.seen?.version ?? null, r.seen?.updatedAt ?? null, r.closedAs ?? null],
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
	async insertNewRides(rides: Array<{ orderId: string; partnerId: string; mode: DriverMode; serviceType: ServiceType; pickup: LatLng; drop: LatLng; sandbox: SandboxScenario | null; seen: { version: number; updatedAt: string } }>): Promise<boolean[]> {
		const rows = await this.q<{ order_id: string }>(
			`INSERT INTO dispatch_rides (order_id, partner_id, service_type, pickup_lat, pickup_lng, drop_lat, drop_lng, state, order_status, sandbox, mode, order_version, order_updated_at)
			 SELECT o, p, st, plat, plng, dlat, dlng, 'searching', 'searching', sb, m, v, u
			 FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[], $5::float8[], $6::float8[], $7::float8[], $8::text[], $9::text[], $10::int[], $11::timestamptz[])
			   AS n(o, p, st, plat, plng, dlat, dlng, sb, m, v, u)
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
			],
		);
		const inserted = new Set(rows.map((r) => r.order_id));
		return rides.map((r) => inserted.has(r.orderId));
	}

	/** A searching ride due for matching, locked (SKIP LOCKED: another instance on it means skip), with its deadline state. */
	async lockDueSearch(orderId: string, dispatchTimeoutMs: number, t: Transaction) {
		const rows = await this.q<RideRow & { timed_out: boolean; pending_expiry: Date | null }>(
			`SELECT r.*, (r.search_started_at + $2 ${MS} <= now()) AS timed_out,
				(SELECT o.expires_at FROM dispatch_offers o WHERE o.order_id = r.order_id AND o.state = 'pending') AS pending_expiry
			 FROM dispatch_rides r WHERE r.order_id = $1 AND r.state = 'searching' AND r.next_match_at <= now() FOR UPDATE SKIP LOCKED`,
			[orderId, dispatchTimeoutMs],
			t,
		);
		return rows[0];
	}

	async matchAgainAt(orderId: string, at: Date, t: Transaction): Promise<void> {
		await this.q("UPDATE dispatch_rides SET next_match_at = $2, updated_at = now() WHERE order_id = $1", [orderId, at], t);
	}

	/**
	 * Nobody to offer the ride to: look again after a wait as long as the ride
	 * has been searching (so 1, 2, 4, 8 … s: exponential), at least `minMs`, at
	 * most `maxMs`, and never past its dispatch deadline (it ends on time).
	 * Something that changes its chances (a driver freed, online or moving
	 * near, an offer ending) wakes it earlier (`wakeSearches`, `excludeAndRematch`).
	 */
	async matchAgainBackoff(orderId: string, minMs: number, maxMs: number, dispatchTimeoutMs: number, t: Transaction): Promise<void> {
		await this.q(
			`UPDATE dispatch_rides SET next_match_at = LEAST(
				now() + GREATEST($2::double precision, LEAST($3::double precision, EXTRACT(EPOCH FROM now() - search_started_at) * 1000)) ${MS},
				search_started_at + $4 ${MS})
			 WHERE order_id = $1`,
			[orderId, minMs, maxMs, dispatchTimeoutMs],
			t,
		);
	}

	/** Searching rides (of these) waiting out a backoff with no open offer are due now: a driver came within reach. Returns how many. */
	async wakeSearches(orderIds: string[]): Promise<number> {
		const rows = await this.q<{ order_id: string }>(
			`UPDATE dispatch_rides r SET next_match_at = now()
			 WHERE r.order_id = ANY($1::text[]) AND r.state = 'searching' AND r.next_match_at > now()
			 AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = r.order_id AND o.state = 'pending')
			 RETURNING r.order_id`,
			[orderIds],
		);
		return rows.length;
	}

	/** An accept (`accepting`) or no-driver (`ending`) transition goes to orders; the lease bounds how long it may be in flight. */
	async startTransition(orderId: string, phase: "accepting" | "ending", leaseMs: number, t: Transaction, driver?: DriverRow): Promise<void> {
		await this.q(
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
		await this.q("UPDATE dispatch_rides SET order_version = $2, order_updated_at = $3 WHERE order_id = $1", seen, t);
	}

	/** Closes the ride (with the snapshot that ended it, when there is one: a vanished order has none). */
	async closeRide(orderId: string, t: Transaction, seen?: { version: number; updatedAt: string; status: string }): Promise<void> {
		await this.q(
			`UPDATE dispatch_rides SET state = 'closed', order_status = COALESCE($4, order_status), order_version = COALESCE($2, order_version),
				order_updated_at = COALESCE($3::timestamptz, order_updated_at), lease_until = NULL, next_location_at = NULL, updated_at = now()
			 WHERE order_id = $1`,
			[orderId, seen?.version ?? null, seen?.updatedAt ?? null, seen?.status ?? null],
			t,
		);
	}

	/** Searching from scratch without the former driver (dropped out, or its accept did not happen). */
	async searchAgain(seen: SeenOrder, formerDriverId: string | null, droppedOut: boolean, t: Transaction): Promise<void> {
		await this.q(
			`UPDATE dispatch_rides SET state = 'searching', order_status = 'searching', order_version = $2, order_updated_at = $3,
				driver_id = NULL, lease_until = NULL, next_location_at = NULL, origin_lat = NULL, origin_lng = NULL,
				search_started_at = now(), next_match_at = now(), phase_since = now(), ${EXCLUDE("$4")},
				drop_outs = drop_outs + $5, updated_at = now()
			 WHERE order_id = $1`,
			[...seen, formerDriverId, droppedOut ? 1 : 0],
			t,
		);
	}

	/** An unanswered no-driver call is given up: keep searching. */
	async resumeSearch(seen: SeenOrder, t: Transaction): Promise<void> {
		await this.q(
			`UPDATE dispatch_rides SET state = 'searching', order_status = 'searching', order_version = $2, order_updated_at = $3,
				lease_until = NULL, next_match_at = now(), updated_at = now() WHERE order_id = $1`,
			seen,
			t,
		);
	}

	/** The ride has a driver and a status; a new status restarts its phase clock and, while moving, the location cadence. */
	async assignRide(seen: SeenOrder, a: { driverId: string | null; status: string; statusChanged: boolean; moving: boolean; locationIntervalMs: number; origin: LatLng | null }, t: Transaction): Promise<void> {
		await this.q(
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

	/** The ride goes to the next driver, never to `driverId` again. */
	async excludeAndRematch(orderId: string, driverId: string, t: Transaction): Promise<void> {
		await this.q(`UPDATE dispatch_rides SET next_match_at = now(), updated_at = now(), ${EXCLUDE("$2")} WHERE order_id = $1`, [orderId, driverId], t);
	}

	/**
	 * Up to `limit` searching rides due a look, in one statement that also
	 * backs off (as `matchAgainBackoff`) every one of them nobody could be
	 * offered: no available driver of its mode and type, not excluded for it,
	 * inside the search radius' bounding box, no pending offer, and its
	 * deadline not reached. Those come back `backed_off`; the rest (a driver
	 * near, an offer to settle, time to end it) are matched one by one. A
	 * backlog of rides nobody is near thus costs one statement per pass, not a
	 * transaction per ride. The rows are locked SKIP LOCKED for the statement,
	 * so instances share the work; a driver committing meanwhile wakes the
	 * rides near it (`wakeSearches`) after this statement's lock is gone.
	 */
	async dueSearches(
		limit: number,
		b: { minMs: number; maxMs: number; dispatchTimeoutMs: number; radiusM: number },
	): Promise<Array<{ order_id: string; backed_off: boolean }>> {
		return this.q(
			`WITH due AS (
				SELECT order_id, mode, service_type, pickup_lat, pickup_lng, excluded_driver_ids, search_started_at, sandbox, next_match_at
				FROM dispatch_rides WHERE state = 'searching' AND next_match_at <= now()
				ORDER BY next_match_at LIMIT $1 FOR UPDATE SKIP LOCKED
			 ), nobody AS (
				UPDATE dispatch_rides r SET next_match_at = LEAST(
					now() + GREATEST($2::double precision, LEAST($3::double precision, EXTRACT(EPOCH FROM now() - r.search_started_at) * 1000)) ${MS},
					r.search_started_at + $4::double precision ${MS})
				FROM due
				WHERE r.order_id = due.order_id
				AND due.search_started_at + $4::double precision ${MS} > now()
				AND due.sandbox IS DISTINCT FROM 'no_driver_found'
				AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = due.order_id AND o.state = 'pending')
				AND NOT EXISTS (
					SELECT 1 FROM drivers d
					WHERE d.status = 'available' AND d.mode = due.mode AND d.service_type = due.service_type
					AND d.lat BETWEEN due.pickup_lat - $5::double precision AND due.pickup_lat + $5::double precision
					AND d.lng BETWEEN due.pickup_lng - $5::double precision / GREATEST(0.01, cos(radians(due.pickup_lat)))
					              AND due.pickup_lng + $5::double precision / GREATEST(0.01, cos(radians(due.pickup_lat)))
					AND NOT (d.id = ANY(due.excluded_driver_ids)))
				RETURNING r.order_id
			 )
			 SELECT due.order_id, (nobody.order_id IS NOT NULL) AS backed_off
			 FROM due LEFT JOIN nobody ON nobody.order_id = due.order_id ORDER BY due.next_match_at`,
			[limit, b.minMs, b.maxMs, b.dispatchTimeoutMs, b.radiusM / 111_320],
		);
	}

	/** Transitions in flight whose lease ran out. */
	async staleTransitions(): Promise<Array<{ order_id: string }>> {
		return this.q("SELECT order_id FROM dispatch_rides WHERE state IN ('accepting','ending') AND lease_until < now() LIMIT 100");
	}

	async openRides(): Promise<Array<{ order_id: string; state: string; order_status: string; driver_id: string | null }>> {
		return this.q("SELECT order_id, state, order_status, driver_id FROM dispatch_rides WHERE state <> 'closed'");
	}

	/** Claims the moving rides due a location event by pushing their next due time forward (SKIP LOCKED: instances share the work); live rides at their own (real-time) cadence. */
	async claimDueLocations(intervalMs: number, liveIntervalMs: number) {
		return this.q<RideRow & { d_lat: number | null; d_lng: number | null; d_heading: number | null }>(
			`UPDATE dispatch_rides r SET next_location_at = now() + (CASE WHEN r.mode = 'live' THEN $2::double precision ELSE $1::double precision END) ${MS}
			 FROM drivers d
			 WHERE r.order_id IN (
				SELECT order_id FROM dispatch_rides WHERE state = 'assigned' AND next_location_at <= now()
				ORDER BY next_location_at LIMIT 200 FOR UPDATE SKIP LOCKED)
			 AND d.id = r.driver_id
			 RETURNING r.*, d.lat AS d_lat, d.lng AS d_lng, d.heading AS d_heading`,
			[intervalMs, liveIntervalMs],
		);
	}

	/** Rides that count as demand: those still searching (a cancelled or matched request is no demand). */
	async demandRides() {
		return this.q<{ order_id: string; service_type: ServiceType; pickup_lat: number; pickup_lng: number; partner_id: string | null; mode: DriverMode }>(
			"SELECT order_id, service_type, pickup_lat, pickup_lng, partner_id, mode FROM dispatch_rides WHERE state = 'searching'",
		);
	}

	// ---- offers ----

	async insertOffer(o: { id: string; orderId: string; driverId: string; distanceM: number; eta: number; timeoutMs: number }, t: Transaction): Promise<Date> {
		const rows = await this.q<{ expires_at: Date }>(
			`INSERT INTO dispatch_offers (id, order_id, driver_id, state, distance_m, eta, expires_at)
			 VALUES ($1, $2, $3, 'pending', $4, $5, now() + $6 ${MS}) RETURNING expires_at`,
			[o.id, o.orderId, o.driverId, o.distanceM, o.eta, o.timeoutMs],
			t,
		);
		return rows[0].expires_at;
	}

	/** The driver's open (pending, unexpired) offer of the ride is accepted. */
	async acceptOffer(orderId: string, driverId: string, t: Transaction): Promise<boolean> {
		const rows = await this.q(
			`UPDATE dispatch_offers SET state = 'accepted', responded_at = now()
			 WHERE order_id = $1 AND driver_id = $2 AND state = 'pending' AND expires_at > now() RETURNING id`,
			[orderId, driverId],
			t,
		);
		return rows.length > 0;
	}

	/** Ends the driver's pending offer of the ride as declined, expired or cancelled. */
	async endOffer(orderId: string, driverId: string, how: "declined" | "expired" | "cancelled", t: Transaction): Promise<boolean> {
		const rows = await this.q("UPDATE dispatch_offers SET state = $3, responded_at = now() WHERE order_id = $1 AND driver_id = $2 AND state = 'pending' RETURNING id", [orderId, driverId, how], t);
		return rows.length > 0;
	}

	/** Ends the ride's pending offers: `acceptedDriverId`'s as accepted, the others cancelled. */
	async settleOffers(orderId: string, t: Transaction, acceptedDriverId: string | null = null): Promise<void> {
		await this.q(
			`UPDATE dispatch_offers SET state = CASE WHEN driver_id = $2 THEN 'accepted' ELSE 'cancelled' END, responded_at = now()
			 WHERE order_id = $1 AND state = 'pending'`,
			[orderId, acceptedDriverId],
			t,
		);
	}

	async expiredOffers(): Promise<Array<{ order_id: string; driver_id: string }>> {
		return this.q("SELECT order_id, driver_id FROM dispatch_offers WHERE state = 'pending' AND expires_at <= now() ORDER BY expires_at LIMIT 200");
	}

	async offersOfRide(orderId: string): Promise<OfferRow[]> {
		return this.q<OfferRow>("SELECT * FROM dispatch_offers WHERE order_id = $1 ORDER BY created_at, id", [orderId]);
	}

	/** The driver's pending offer with its ride. */
	async openOfferOf(driverId: string) {
		const rows = await this.q<RideRow & { expires_at: Date; distance_m: number; eta: number }>(
			`SELECT r.*, o.expires_at, o.distance_m, o.eta FROM dispatch_offers o JOIN dispatch_rides r ON r.order_id = o.order_id
			 WHERE o.driver_id = $1 AND o.state = 'pending'`,
			[driverId],
		);
		return rows[0];
	}

	// ---- the simulated fleet's inbox ----

	async simulatedOffers() {
		return this.q<{ driver_id: string; order_id: string; created_at: Date; expires_at: Date; sandbox: SandboxScenario | null }>(
			`SELECT o.driver_id, o.order_id, o.created_at, o.expires_at, r.sandbox
			 FROM dispatch_offers o JOIN drivers d ON d.id = o.driver_id JOIN dispatch_rides r ON r.order_id = o.order_id
			 WHERE o.state = 'pending' AND d.simulated AND o.expires_at > now()`,
		);
	}

	async simulatedRides(): Promise<RideRow[]> {
		return this.q<RideRow>(
			`SELECT r.* FROM dispatch_rides r JOIN drivers d ON d.id = r.driver_id
			 WHERE r.state = 'assigned' AND d.simulated AND d.status = 'on_trip' AND d.order_id = r.order_id`,
		);
	}

	/** Searching test-mode rides with no offer out, oldest first (the sandbox never serves live rides). */
	async unofferedSearches(): Promise<RideRow[]> {
		return this.q<RideRow>(
			`SELECT r.* FROM dispatch_rides r WHERE r.state = 'searching' AND r.mode = 'test'
			 AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = r.order_id AND o.state = 'pending')
			 ORDER BY r.created_at LIMIT 500`,
		);
	}
}
