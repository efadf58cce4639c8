import type { Transaction } from "sequelize";
import {
	ACTIVE_STATUSES,
	MOVING_STATUSES,
	type ActiveStatus,
	type CancellationRule,
	type FinalFare,
	type DriverInfo,
	type RideStatus,
	type WebhookStatus,
	type RideEventPayload,
} from "../../contracts/orders";
import type { DriverLocation } from "../../contracts/common";
import type { KeyMode } from "../../contracts/partners";
import type { FareTerms } from "../../contracts/pricing";
import { isUniqueViolation, type Db } from "../../mixins/db.mixin";
import { newId } from "../../lib/ids";
import { emitsEvent } from "./ride-state";
import { buildEventPayload, type OrderRow } from "./order-view";
import type { ActiveKey } from "./cursor";
import type { IdempotencyClaim } from "./idempotency.repo";

/**
 * All of the orders service's SQL on `orders`, `ride_events` and `feedback`
 * (the Idempotency-Key claims are idempotency.repo.ts'). Every status move is
 * a conditional update plus its event row in one transaction; the event's
 * sequence is the order's version after that update, so sequence order is
 * commit order.
 */

const ACTIVE_SQL = ACTIVE_STATUSES.map((s) => `'${s}'`).join(",");
const MOVING_SQL = MOVING_STATUSES.map((s) => `'${s}'`).join(",");

/** A new order's columns (status is always `searching`). */
export interface NewOrder {
	id: string;
	partnerId: string;
	mode: KeyMode;
	riderId: string;
	serviceType: string;
	pickup: unknown;
	drop: unknown;
	farePaise: number;
	currency: string;
	fareBreakdown: unknown;
	distance: number;
	duration: number;
	quoteId: string | null;
	otp: string;
	webhookURL: string;
	metadata: unknown;
	/** The terms the ride is booked on (pricing's; null when pricing gave none). */
	fareTerms?: FareTerms | null;
}

/** Column changes a status move makes besides status/version (undefined = keep). */
export interface MoveChanges {
	driver?: DriverInfo | null;
	driverLocation?: DriverLocation | null;
	eta?: number | null;
	cancelReason?: string | null;
	/** A fresh set of OTP tries (`otp_tries = 0`), in the same statement as the move. */
	resetOtpTries?: boolean;
	/** A cancel: its fee, the policy rule and the partner's reason code (cancel-policy.ts). */
	cancellation?: { feePaise: number; rule: CancellationRule; reasonCode: string | null };
	/** A drop: the final fare (final-fare.ts). */
	finalFare?: FinalFare;
}

/** The moves whose time the policy needs (the grace period, waiting at the pickup, the trip's duration) stamp it in the same update. */
const STAMPED_AT: Partial<Record<RideStatus, string>> = { accepted: "accepted_at", arrived: "arrived_at", started: "started_at" };

/** The order as the move left it, and its event row's id (null for a move that is not a webhook event). */
export interface MoveResult {
	row: OrderRow;
	eventId: string | null;
}

export interface RideEventRow {
	id: string;
	sequence: number;
	status: WebhookStatus;
	occurred_at: Date;
	payload: RideEventPayload;
	mode: KeyMode;
}

/** Whose orders a partner call may see: its partner's, of its key's mode. */
export interface PartnerScope {
	partnerId: string;
	mode: KeyMode;
}

/**
 * The insert's columns, each with its SQL type and its value from a NewOrder:
 * the one list both inserts (one order, several in one statement) are made of.
 */
const INSERT_FIELDS: ReadonlyArray<{ column: string; type: "text" | "int" | "jsonb"; value: (o: NewOrder) => unknown }> = [
	{ column: "id", type: "text", value: (o) => o.id },
	{ column: "partner_id", type: "text", value: (o) => o.partnerId },
	{ column: "rider_id", type: "text", value: (o) => o.riderId },
	{ column: "status", type: "text", value: () => "searching" },
	{ column: "service_type", type: "text", value: (o) => o.serviceType },
	{ column: "pickup", type: "jsonb", value: (o) => JSON.stringify(o.pickup) },
	{ column: '"drop"', type: "jsonb", value: (o) => JSON.stringify(o.drop) },
	{ column: "fare_paise", type: "int", value: (o) => o.farePaise },
	{ column: "currency", type: "text", value: (o) => o.currency },
	{ column: "fare_breakdown", type: "jsonb", value: (o) => (o.fareBreakdown ? JSON.stringify(o.fareBreakdown) : null) },
	{ column: "distance", type: "int", value: (o) => o.distance },
	{ column: "duration", type: "int", value: (o) => o.duration },
	{ column: "quote_id", type: "text", value: (o) => o.quoteId },
	{ column: "otp", type: "text", value: (o) => o.otp },
	{ column: "webhook_url", type: "text", value: (o) => o.webhookURL },
	{ column: "metadata", type: "jsonb", value: (o) => (o.metadata !== undefined ? JSON.stringify(o.metadata) : null) },
	{ column: "mode", type: "text", value: (o) => o.mode },
	{ column: "fare_terms", type: "jsonb", value: (o) => jsonOrNull(o.fareTerms) },
];
const INSERT_COLUMNS = INSERT_FIELDS.map((f) => f.column).join(", ");
/** `$1::text, $2::text, …`: one order's values. */
const INSERT_VALUES = INSERT_FIELDS.map((f, i) => `$${i + 1}::${f.type}`).join(", ");
/** The bind position of the order's mode (the claim is looked up in the same mode). */
const MODE_BIND = INSERT_FIELDS.findIndex((f) => f.column === "mode") + 1;
const bindOf = (order: NewOrder): unknown[] => INSERT_FIELDS.map((f) => f.value(order));
const ON_ACTIVE_CONFLICT = `ON CONFLICT (rider_id, mode) WHERE status IN (${ACTIVE_SQL}) DO NOTHING`;

/** A timestamptz as JavaScript's toISOString() writes it (UTC, milliseconds truncated like node-postgres' parse). */
const isoSql = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** What insertOrder did: the new row; or null (the rider has an active ride); or the Idempotency-Key claim was taken over (nothing inserted). */
export interface InsertOutcome {
	row: OrderRow | null;
	claimLost: boolean;
}

const jsonOrNull = (value: unknown) => (value === undefined || value === null ? null : JSON.stringify(value));

export class OrdersRepo {
	constructor(private readonly db: Db) {}

	/**
	 * The order; with a partner scope, a foreign order, or one of the key's
	 * other mode, is read exactly like an unknown one (partner and mode are
	 * part of the key).
	 */
	async findOrder(orderId: string, scope?: PartnerScope): Promise<OrderRow | null> {
		const row = await this.db.row<OrderRow>(
			scope === undefined ? "SELECT * FROM orders WHERE id = $1" : "SELECT * FROM orders WHERE id = $1 AND partner_id = $2 AND mode = $3",
			scope === undefined ? [orderId] : [orderId, scope.partnerId, scope.mode],
		);
		return row ?? null;
	}

	async findActiveForRider(riderId: string, scope: PartnerScope): Promise<OrderRow | null> {
		const row = await this.db.row<OrderRow>(`SELECT * FROM orders WHERE rider_id = $1 AND partner_id = $2 AND mode = $3 AND status IN (${ACTIVE_SQL})`, [
			riderId,
			scope.partnerId,
			scope.mode,
		]);
		return row ?? null;
	}

	/** Active rides, oldest first by (created_at, id), after the keyset `after` when given. */
	async listActive(statuses: readonly ActiveStatus[], limit: number, after?: ActiveKey): Promise<Array<OrderRow & { key_at: string }>> {
		return this.activePage<OrderRow>("*", statuses, limit, after);
	}

	/** `listActive` with each ride's id, status and driver id only: what the sweep compares, a fraction of the bytes. */
	async listActiveStates(
		statuses: readonly ActiveStatus[],
		limit: number,
		after?: ActiveKey,
	): Promise<Array<{ id: string; status: ActiveStatus; driver_id: string | null; key_at: string }>> {
		return this.activePage<{ id: string; status: ActiveStatus; driver_id: string | null }>(
			"id, status, driver->>'id' AS driver_id",
			statuses,
			limit,
			after,
		);
	}

	/** One keyset page of active rides with `columns` and the row's cursor key (`key_at`). */
	private async activePage<T extends object>(
		columns: string,
		statuses: readonly ActiveStatus[],
		limit: number,
		after?: ActiveKey,
	): Promise<Array<T & { key_at: string }>> {
		return this.db.rows<T & { key_at: string }>(
			`SELECT ${columns}, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS key_at
			 FROM orders WHERE status IN (${ACTIVE_SQL}) AND status = ANY($1::text[])
			 AND ($3::timestamptz IS NULL OR (created_at, id) > ($3::timestamptz, $4::text))
			 ORDER BY created_at, id LIMIT $2`,
			[statuses, limit, after?.createdAt ?? null, after?.id ?? null],
		);
	}

	/**
	 * Counts one OTP try on an `arrived` ride before the OTP is compared, only
	 * while fewer than `maxTries` were made: the new count, or null (not
	 * arrived, or locked). One conditional update, so concurrent tries through
	 * any instance never exceed the limit.
	 */
	async reserveOtpTry(orderId: string, maxTries: number): Promise<number | null> {
		const row = await this.db.row<{ otp_tries: number }>(
			"UPDATE orders SET otp_tries = otp_tries + 1 WHERE id = $1 AND status = 'arrived' AND otp_tries < $2 RETURNING otp_tries",
			[orderId, maxTries],
		);
		return row?.otp_tries ?? null;
	}

	/** Operators: gives an arrived ride's driver a fresh set of OTP tries; the order, or null when it is not arrived. */
	async unlockOtp(orderId: string): Promise<OrderRow | null> {
		const row = await this.db.row<OrderRow>("UPDATE orders SET otp_tries = 0 WHERE id = $1 AND status = 'arrived' RETURNING *", [orderId]);
		return row ?? null;
	}

	/**
	 * Inserts the order in one autocommit statement (no transaction, one round
	 * trip); null when the rider already has an active ride. The partial
	 * unique index judges: `ON CONFLICT … DO NOTHING` waits for a concurrent
	 * insert for the same rider to commit and then yields to it, without
	 * raising an error (which upsets the embedded PGlite's shared session).
	 *
	 * With an Idempotency-Key `claim`, the same statement finishes the claim
	 * (state `done`, status 201, the answer) so a replay can never miss an
	 * order that exists: a CTE locks the claim row while this call still holds
	 * it, inserts the order only then, and stores `answer` (the Order without
	 * its timestamps) plus the inserted row's `createdAt`/`updatedAt`,
	 * rendered like `toISOString()` (both truncate to milliseconds). A claim
	 * taken over meanwhile inserts nothing: `claimLost`.
	 */
	async insertOrder(order: NewOrder, claim: IdempotencyClaim | null, answer?: unknown): Promise<InsertOutcome> {
		const bind = bindOf(order);
		const values = INSERT_VALUES;
		const n = INSERT_FIELDS.length;
		try {
			if (!claim) {
				const row = await this.db.row<OrderRow>(`INSERT INTO orders (${INSERT_COLUMNS}) VALUES (${values}) ${ON_ACTIVE_CONFLICT} RETURNING *`, bind);
				return { row: row ?? null, claimLost: false };
			}
			bind.push(claim.partnerId, claim.key, claim.token, JSON.stringify(answer ?? {}));
			const rows = await this.db.rows<OrderRow & { claim_held: number }>(
				`WITH claim AS (
				   SELECT 1 FROM idempotency_keys
				   WHERE partner_id = $${n + 1} AND key = $${n + 2} AND claim_token = $${n + 3} AND state = 'running' AND mode = $${MODE_BIND}
				   FOR UPDATE
				 ), ins AS (
				   INSERT INTO orders (${INSERT_COLUMNS}) SELECT ${values} FROM claim ${ON_ACTIVE_CONFLICT} RETURNING *
				 ), fin AS (
				   UPDATE idempotency_keys k SET state = 'done', response_status = 201,
				          response_body = $${n + 4}::jsonb || jsonb_build_object('createdAt', ${isoSql("ins.created_at")}, 'updatedAt', ${isoSql("ins.updated_at")})
				   FROM ins WHERE k.partner_id = $${n + 1} AND k.key = $${n + 2} AND k.claim_token = $${n + 3} AND k.mode = $${MODE_BIND}
				   RETURNING 1
				 )
				 SELECT ins.*, held.n AS claim_held FROM (SELECT count(*)::int AS n FROM claim) held LEFT JOIN ins ON true`,
				bind,
			);
			const { claim_held: held, ...row } = rows[0];
			if (held === 0) return { row: null, claimLost: true };
			return { row: row.id === null ? null : (row as OrderRow), claimLost: false };
		} catch (err) {
			if (isUniqueViolation(err, "orders_one_active_per_rider")) return { row: null, claimLost: false };
			throw err;
		}
	}

	/**
	 * `insertOrder` without an Idempotency-Key for several orders in one
	 * statement (orders groups concurrent create-orders, see
	 * lib/statement-batcher.ts): one answer per order, in order, the new row or
	 * null when its rider already has an active ride of its mode. The partial
	 * unique index still judges every row; the caller never passes two orders
	 * of one (rider, mode), so each conflict is with a committed or concurrent
	 * ride, exactly as alone.
	 */
	async insertOrders(orders: NewOrder[]): Promise<Array<OrderRow | null>> {
		if (orders.length === 1) return [(await this.insertOrder(orders[0], null)).row];
		// One array per column (jsonb travels as text and is cast back), unnested into rows in the list's order.
		const rows = await this.db.rows<OrderRow>(
			`INSERT INTO orders (${INSERT_COLUMNS})
			 SELECT ${INSERT_FIELDS.map((f, i) => `c${i}::${f.type}`).join(", ")}
			 FROM unnest(${INSERT_FIELDS.map((f, i) => `$${i + 1}::${f.type === "jsonb" ? "text" : f.type}[]`).join(", ")})
			   AS n(${INSERT_FIELDS.map((_f, i) => `c${i}`).join(", ")})
			 ${ON_ACTIVE_CONFLICT} RETURNING *`,
			INSERT_FIELDS.map((f) => orders.map((o) => f.value(o))),
		);
		const byId = new Map(rows.map((r) => [r.id, r]));
		return orders.map((o) => byId.get(o.id) ?? null);
	}

	/**
	 * One status move as a conditional update `WHERE id AND status = from`
	 * plus, when the move is a webhook event, its event row with
	 * sequence = the version the same update produced. Null when somebody
	 * moved the ride first (nothing written). `expectVersion`: only while the
	 * order is still exactly as read (a cancel's fee was judged on it).
	 */
	async applyMove(from: OrderRow, to: RideStatus, changes: MoveChanges, expectDriverId?: string, expectVersion?: number): Promise<MoveResult | null> {
		const withEvent = emitsEvent(to);
		const bind: unknown[] = [from.id, from.status, to];
		// clock_timestamp(), not now(): evaluated after the row lock is won, so
		// occurredAt follows the sequence even when transactions queue on the row.
		const sets = ["status = $3", "updated_at = clock_timestamp()"];
		if (withEvent) sets.push("version = version + 1");
		const set = (column: string, value: unknown, cast = "") => {
			bind.push(value);
			sets.push(`${column} = $${bind.length}${cast}`);
		};
		if (changes.driver !== undefined) set("driver", jsonOrNull(changes.driver), "::jsonb");
		if (changes.driverLocation !== undefined) set("driver_location", jsonOrNull(changes.driverLocation), "::jsonb");
		if (changes.eta !== undefined) set("eta", changes.eta);
		if (changes.cancelReason !== undefined) set("cancel_reason", changes.cancelReason);
		if (changes.resetOtpTries) sets.push("otp_tries = 0");
		if (changes.cancellation) {
			set("cancellation_fee_paise", changes.cancellation.feePaise);
			set("cancellation_rule", changes.cancellation.rule);
			set("cancel_reason_code", changes.cancellation.reasonCode);
		}
		if (changes.finalFare) set("final_fare", JSON.stringify(changes.finalFare), "::jsonb");
		const stamped = STAMPED_AT[to];
		if (stamped) sets.push(`${stamped} = clock_timestamp()`);
		let where = "id = $1 AND status = $2";
		if (expectDriverId !== undefined) {
			bind.push(expectDriverId);
			where += ` AND driver->>'id' = $${bind.length}`;
		}
		if (expectVersion !== undefined) {
			bind.push(expectVersion);
			where += ` AND version = $${bind.length}`;
		}
		return this.db.tx(async (t) => {
			const row = await this.db.row<OrderRow>(`UPDATE orders SET ${sets.join(", ")} WHERE ${where} RETURNING *`, bind, t);
			if (!row) return null;
			if (!withEvent) return { row, eventId: null };
			return { row, eventId: await this.appendEvent(row, "status", to, t) };
		});
	}

	/** The driver's position on a moving ride plus its `location_updated` event; null when the ride is not moving. */
	async recordLocation(orderId: string, location: DriverLocation, eta: number | null): Promise<MoveResult | null> {
		return this.db.tx(async (t) => {
			const row = await this.db.row<OrderRow>(
				`UPDATE orders SET driver_location = $2::jsonb, eta = $3, version = version + 1, updated_at = clock_timestamp()
				 WHERE id = $1 AND status IN (${MOVING_SQL}) RETURNING *`,
				[orderId, JSON.stringify(location), eta],
				t,
			);
			if (!row) return null;
			return { row, eventId: await this.appendEvent(row, "location", "location_updated", t) };
		});
	}

	/** The outbox row of one webhook event, sequence = the version the same transaction's update produced. */
	private async appendEvent(row: OrderRow, kind: "status" | "location", status: WebhookStatus, transaction: Transaction): Promise<string> {
		const eventId = newId("evt");
		const payload = buildEventPayload({ eventId, row, status, sequence: row.version, occurredAt: row.updated_at });
		await this.db.run(
			`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at, mode)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10)`,
			[eventId, row.id, row.partner_id, row.version, kind, status, row.webhook_url, JSON.stringify(payload), row.updated_at, row.mode],
			transaction,
		);
		return eventId;
	}

	/** Up to `limit` of the ride's webhook events after sequence `afterSequence`, in sequence order (the (order_id, sequence) key serves it). */
	async listEvents(orderId: string, afterSequence: number, limit: number): Promise<RideEventRow[]> {
		return this.db.rows<RideEventRow>(
			"SELECT id, sequence, status, occurred_at, payload, mode FROM ride_events WHERE order_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
			[orderId, afterSequence, limit],
		);
	}

	/** Stores the ride's feedback; false when it already has some (`feedback.order_id` is the key: once per ride). */
	async insertFeedback(orderId: string, partnerId: string, rating: number, comment: string | null, tags: string[]): Promise<boolean> {
		const inserted = await this.db.rows<{ order_id: string }>(
			`INSERT INTO feedback (order_id, partner_id, rating, comment, tags) VALUES ($1, $2, $3, $4, $5::text[])
			 ON CONFLICT (order_id) DO NOTHING RETURNING order_id`,
			[orderId, partnerId, rating, comment, tags],
		);
		return inserted.length > 0;
	}
}
