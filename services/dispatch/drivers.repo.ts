import type { Transaction } from "sequelize";
import type { ServiceType } from "../../contracts/common";
import type { DriverMode, DriverStatus, ListDriversParams, OfflineReason } from "../../contracts/dispatch";
import type { Point } from "../../contracts/common";
import type { Db } from "../../mixins/db.mixin";
import type { AuditHook } from "../../lib/audit";

/**
 * Dispatch's SQL on `drivers`: registration, position and status, the
 * claims that hold a driver on a ride (`claimDriver`: a conditional update,
 * so the database decides which instance gets the driver) and free it, and
 * the reads behind the nearest-driver index.
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
	offline_reason: OfflineReason | null;
}

/** A driver's position as the index keeps it. */
export type IndexRow = Pick<DriverRow, "id" | "service_type" | "status" | "lat" | "lng" | "rev" | "mode" | "order_id" | "offline_reason">;
const INDEX_COLUMNS = "id, service_type, status, lat, lng, rev, mode, order_id, offline_reason";

/** A driver's newest position as an instance recorded it (`at`: epoch ms). */
export interface PositionFix {
	driverId: string;
	lat: number;
	lng: number;
	heading: number;
	at: number;
}

/** The one way a driver becomes free: no ride, available, a new revision for the indexes. */
const FREE_DRIVER = "status = 'available', order_id = NULL, rev = rev + 1, updated_at = clock_timestamp()";
/** Every other driver change also bumps the revision the indexes order changes by. */
const BUMP = "rev = rev + 1, updated_at = clock_timestamp()";

export class DriversRepo {
	constructor(private readonly db: Db) {}

	async insertDriver(
		id: string,
		p: { name: string; phone: string; vehicleNumber: string; serviceType: ServiceType; simulated?: boolean; mode: DriverMode },
		audit?: AuditHook<DriverRow>,
	): Promise<DriverRow | undefined> {
		const insert = async (t?: Transaction) =>
			(
				await this.db.rows<DriverRow>(
					`INSERT INTO drivers (id, name, phone, vehicle_number, service_type, simulated, mode)
					 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (phone) DO NOTHING RETURNING *`,
					[id, p.name, p.phone, p.vehicleNumber, p.serviceType, p.simulated ?? false, p.mode],
					t,
				)
			)[0];
		if (!audit) return insert();
		// An operator's registration and its audit entry commit together (a new driver only).
		return this.db.tx(async (t) => {
			const row = await insert(t);
			if (row) await audit(t, row);
			return row;
		});
	}

	async driverByPhone(phone: string): Promise<DriverRow | undefined> {
		return (await this.db.rows<DriverRow>("SELECT * FROM drivers WHERE phone = $1", [phone]))[0];
	}

	async driver(driverId: string, t?: Transaction): Promise<DriverRow | undefined> {
		return (await this.db.rows<DriverRow>("SELECT * FROM drivers WHERE id = $1", [driverId], t))[0];
	}

	/** Moves the driver; `online` also makes an offline driver available. */
	async setDriverLocation(driverId: string, at: { lat: number; lng: number; heading?: number | null }, online: boolean): Promise<DriverRow | undefined> {
		const status = online ? "status = CASE WHEN status = 'offline' THEN 'available' ELSE status END, offline_reason = NULL," : "";
		const rows = await this.db.rows<DriverRow>(
			`UPDATE drivers SET ${status} lat = $2, lng = $3, heading = COALESCE($4, heading, 0), location_at = now(), ${BUMP}
			 WHERE id = $1 RETURNING *`,
			[driverId, at.lat, at.lng, at.heading ?? null],
		);
		return rows[0];
	}

	async setDriverOffline(driverId: string, reason: OfflineReason): Promise<DriverRow | undefined> {
		const rows = await this.db.rows<DriverRow>(
			`UPDATE drivers SET status = 'offline', offline_reason = $2, ${BUMP} WHERE id = $1 AND status IN ('available','offline') RETURNING *`,
			[driverId, reason],
		);
		return rows[0];
	}

	/**
	 * Positions recorded since the last flush, one statement: each driver's
	 * newest only, never older than what the row has. Positions are not state
	 * changes: no revision, no `updated_at` (the index refresh re-reads state
	 * changes only).
	 */
	async recordPositions(fixes: readonly PositionFix[]): Promise<void> {
		await this.db.run(
			`UPDATE drivers d SET lat = f.lat, lng = f.lng, heading = f.heading, location_at = to_timestamp(f.at / 1000.0)
			 FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[], $5::float8[]) AS f(id, lat, lng, heading, at)
			 WHERE d.id = f.id AND (d.location_at IS NULL OR d.location_at < to_timestamp(f.at / 1000.0))`,
			[fixes.map((f) => f.driverId), fixes.map((f) => f.lat), fixes.map((f) => f.lng), fixes.map((f) => f.heading), fixes.map((f) => f.at)],
		);
	}

	/**
	 * Available drivers not heard of for `silentMs` go offline (`silent`), at
	 * most `limit` per statement. The partial index on `location_at` makes this
	 * read only the silent ones; SKIP LOCKED lets instances share the work.
	 */
	async offlineSilent(silentMs: number, limit: number): Promise<DriverRow[]> {
		return this.db.rows<DriverRow>(
			`UPDATE drivers SET status = 'offline', offline_reason = 'silent', ${BUMP}
			 WHERE id IN (SELECT id FROM drivers WHERE status = 'available' AND NOT simulated AND location_at < now() - $1 * interval '1 millisecond'
			              ORDER BY location_at LIMIT $2 FOR UPDATE SKIP LOCKED)
			 RETURNING *`,
			[silentMs, limit],
		);
	}

	/** A driver offline because its app went silent is back with its next position. */
	async backFromSilence(driverId: string, at: { lat: number; lng: number; heading: number }): Promise<DriverRow | undefined> {
		return this.db.row<DriverRow>(
			`UPDATE drivers SET status = 'available', offline_reason = NULL, lat = $2, lng = $3, heading = $4, location_at = now(), ${BUMP}
			 WHERE id = $1 AND status = 'offline' AND offline_reason = 'silent' RETURNING *`,
			[driverId, at.lat, at.lng, at.heading],
		);
	}

	/**
	 * Frees the drivers holding `orderId`: all of them, or only `driverId`
	 * while it is `offered`, or all but `exceptDriverId` (who keeps the ride).
	 */
	async freeDrivers(orderId: string, t: Transaction, only: { offeredDriverId?: string; exceptDriverId?: string | null } = {}): Promise<DriverRow[]> {
		return this.db.rows<DriverRow>(
			`UPDATE drivers SET ${FREE_DRIVER}
			 WHERE order_id = $1 AND ($2::text IS NULL OR (id = $2 AND status = 'offered')) AND ($3::text IS NULL OR id <> $3) RETURNING *`,
			[orderId, only.offeredDriverId ?? null, only.exceptDriverId ?? null],
			t,
		);
	}

	/** Drivers holding a ride with no open offer or assignment behind it (a crash between steps). */
	async freeOrphanDrivers(): Promise<DriverRow[]> {
		return this.db.rows<DriverRow>(
			`UPDATE drivers d SET ${FREE_DRIVER}
			 WHERE d.order_id IS NOT NULL AND d.updated_at < now() - interval '30 seconds'
			 AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = d.order_id AND o.driver_id = d.id AND o.state = 'pending' AND d.status = 'offered')
			 AND NOT EXISTS (SELECT 1 FROM dispatch_rides r WHERE r.order_id = d.order_id AND r.driver_id = d.id AND r.state IN ('accepting','assigned') AND d.status = 'on_trip')
			 RETURNING d.*`,
		);
	}

	/** Offers the ride to an available driver of the type and mode, unless another instance got there first. */
	async claimDriver(driverId: string, orderId: string, serviceType: ServiceType, mode: DriverMode, t: Transaction): Promise<DriverRow | undefined> {
		const rows = await this.db.rows<DriverRow>(
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
		const rows = await this.db.rows<DriverRow>(
			`UPDATE drivers SET status = 'on_trip', ${BUMP} WHERE id = $1 AND status = 'offered' AND order_id = $2 RETURNING *`,
			[driverId, orderId],
			t,
		);
		return rows[0];
	}

	/** The order names this driver: hold it on the ride (nothing when it already is, or holds another ride). */
	async holdForRide(driverId: string, orderId: string, t: Transaction): Promise<DriverRow[]> {
		return this.db.rows<DriverRow>(
			`UPDATE drivers SET status = 'on_trip', order_id = $2, ${BUMP}
			 WHERE id = $1 AND (order_id IS NULL OR order_id = $2) AND NOT (status = 'on_trip' AND order_id = $2) RETURNING *`,
			[driverId, orderId],
			t,
		);
	}

	async countWrongOtp(driverId: string): Promise<void> {
		await this.db.rows("UPDATE drivers SET wrong_otp_count = wrong_otp_count + 1 WHERE id = $1", [driverId]);
	}

	async listDrivers(p: ListDriversParams): Promise<DriverRow[]> {
		return this.db.rows<DriverRow>(
			`SELECT * FROM drivers
			 WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR service_type = $2) AND ($3::boolean IS NULL OR simulated = $3)
			 AND ($6::text IS NULL OR mode = $6)
			 ORDER BY created_at DESC, id LIMIT $4 OFFSET $5`,
			[p.status ?? null, p.serviceType ?? null, p.simulated ?? null, p.limit ?? 100, p.offset ?? 0, p.mode ?? null],
		);
	}

	async driverCounts(): Promise<Array<{ status: DriverStatus; service_type: ServiceType; n: number }>> {
		return this.db.rows("SELECT status, service_type, count(*)::int AS n FROM drivers GROUP BY status, service_type");
	}

	/** Every driver the index must know (offline ones it need not). */
	async indexDrivers(): Promise<IndexRow[]> {
		return this.db.rows<IndexRow>(`SELECT ${INDEX_COLUMNS} FROM drivers WHERE status <> 'offline'`);
	}

	/** Drivers changed since `since`, with overlap for late commits. */
	async driversChangedSince(since: Date): Promise<IndexRow[]> {
		return this.db.rows<IndexRow>(`SELECT ${INDEX_COLUMNS} FROM drivers WHERE updated_at > $1::timestamptz - interval '10 seconds'`, [since.toISOString()]);
	}

	/** Available drivers of a type and mode in the box around `pickup`, roughly nearest first (when the index knows nobody). */
	async availableInBox(
		pickup: Point,
		serviceType: ServiceType,
		mode: DriverMode,
		radiusM: number,
		excluded: string[],
		limit: number,
		t: Transaction,
	): Promise<Array<{ id: string; lat: number; lng: number }>> {
		const dLat = radiusM / 111_320;
		const cos = Math.max(0.01, Math.cos((pickup.lat * Math.PI) / 180));
		const dLng = radiusM / (111_320 * cos);
		return this.db.rows(
			`SELECT id, lat, lng FROM drivers
			 WHERE status = 'available' AND mode = $11 AND service_type = $1 AND lat BETWEEN $2 AND $3 AND lng BETWEEN $4 AND $5 AND NOT (id = ANY($6::text[]))
			 ORDER BY (lat - $7) * (lat - $7) + ((lng - $8) * $9) * ((lng - $8) * $9) LIMIT $10`,
			[serviceType, pickup.lat - dLat, pickup.lat + dLat, pickup.lng - dLng, pickup.lng + dLng, excluded, pickup.lat, pickup.lng, cos, limit, mode],
			t,
		);
	}
}
