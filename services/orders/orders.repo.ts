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
import { isUniqueViolation, type Db } from "../../mixins/db.mixin";
import { newId } from "../../lib/ids";
import { emitsEvent } from "./ride-state";
import { buildEventPayload, type OrderRow } from "./order-view";
import type { ActiveKey } from "./cursor";
import type { IdempotencyClaim } from "./idempotency.repo";
import { bindOf, INSERT_COLUMNS, INSERT_VALUES, jsonOrNull, ORDER_COLUMNS, UNNEST_ALIASES, UNNEST_ARRAYS, UNNEST_SELECT, type NewOrder } from "./order-columns";

export type { NewOrder };

/**
 * All of the orders service's SQL on `orders`, `ride_events` and `feedback`
 * (the Idempotency-Key claims are idempotency.repo.ts'). Every status move is
 * a conditional update plus its event row in one transaction; the event's
 * sequence is the order's version after that update, so sequence order is
 * commit order.
 */

/** Times a bound number of milliseconds into an interval. */
const MS = "* interval '1 millisecond'";
const ACTIVE_SQL = ACTIVE_STATUSES.map((s) => `'${s}'`).join(",");
const MOVING_SQL = MOVING_STATUSES.map((s) => `'${s}'`).join(",");

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

/** The unique index that judges a new order: the rider's one active ride, or its one waiting scheduled ride. */
const ON_ACTIVE_CONFLICT = `ON CONFLICT (rider_id, mode) WHERE status IN (${ACTIVE_SQL}) DO NOTHING`;
const ON_SCHEDULED_CONFLICT = "ON CONFLICT (rider_id, mode) WHERE status = 'scheduled' DO NOTHING";
const onConflictOf = (o: NewOrder) => (o.status === "scheduled" ? ON_SCHEDULED_CONFLICT : ON_ACTIVE_CONFLICT);

/** A timestamptz as JavaScript's toISOString() writes it (UTC, milliseconds truncated like node-postgres' parse). */
const isoSql = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** What insertOrder did: the new row; or null (the rider has an active ride); or the Idempotency-Key claim was taken over (nothing inserted). */
export interface InsertOutcome {
	row: OrderRow | null;
	claimLost: boolean;
}

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

	/** The rider's active ride, or with `scheduled` its waiting scheduled ride (each judged by its unique index). */
	async findActiveForRider(riderId: string, scope: PartnerScope, scheduled = false): Promise<OrderRow | null> {
		const row = await this.db.row<OrderRow>(
			`SELECT * FROM orders WHERE rider_id = $1 AND partner_id = $2 AND mode = $3 AND ${scheduled ? "status = 'scheduled'" : `status IN (${ACTIVE_SQL})`}`,
			[riderId, scope.partnerId, scope.mode],
		);
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
	async insertOrder(order: NewOrder, claim: IdempotencyClaim | null, answer?: unknown, t?: Transaction): Promise<InsertOutcome> {
		const bind = bindOf(order);
		const onConflict = onConflictOf(order);
		try {
			if (!claim) {
				const row = await this.db.row<OrderRow>(`INSERT INTO orders (${INSERT_COLUMNS}) VALUES (${INSERT_VALUES}) ${onConflict} RETURNING *`, bind, t);
				return { row: row ?? null, claimLost: false };
			}
			const n = bind.length;
			const [partner, key, token, body, mode] = [n + 1, n + 2, n + 3, n + 4, n + 5].map((i) => `$${i}`);
			bind.push(claim.partnerId, claim.key, claim.token, JSON.stringify(answer ?? {}), order.mode);
			const rows = await this.db.rows<OrderRow & { claim_held: number }>(
				`WITH claim AS (
				   SELECT 1 FROM idempotency_keys
				   WHERE partner_id = ${partner} AND key = ${key} AND claim_token = ${token} AND state = 'running' AND mode = ${mode}
				   FOR UPDATE
				 ), ins AS (
				   INSERT INTO orders (${INSERT_COLUMNS}) SELECT ${INSERT_VALUES} FROM claim ${onConflict} RETURNING *
				 ), fin AS (
				   UPDATE idempotency_keys k SET state = 'done', response_status = 201,
				          response_body = ${body}::jsonb || jsonb_build_object('createdAt', ${isoSql("ins.created_at")}, 'updatedAt', ${isoSql("ins.updated_at")})
				   FROM ins WHERE k.partner_id = ${partner} AND k.key = ${key} AND k.claim_token = ${token} AND k.mode = ${mode}
				   RETURNING 1
				 )
				 SELECT ins.*, held.n AS claim_held FROM (SELECT count(*)::int AS n FROM claim) held LEFT JOIN ins ON true`,
				bind,
				t,
			);
			const { claim_held: held, ...row } = rows[0];
			if (held === 0) return { row: null, claimLost: true };
			return { row: row.id === null ? null : (row as OrderRow), claimLost: false };
		} catch (err) {
			if (!t && (isUniqueViolation(err, "orders_one_active_per_rider") || isUniqueViolation(err, "orders_one_scheduled_per_rider")))
				return { row: null, claimLost: false };
			throw err;
		}
	}

	/**
	 * A scheduled ride: `insertOrder` and its `scheduled` event (sequence 1)
	 * in one transaction, so the partner hears of every ride booked and of
	 * nothing that was not.
	 */
	async insertScheduled(order: NewOrder, claim: IdempotencyClaim | null, answer?: unknown): Promise<MoveResult & InsertOutcome> {
		return this.db.tx(async (t) => {
			const outcome = await this.insertOrder(order, claim, answer, t);
			if (!outcome.row) return { ...outcome, eventId: null } as MoveResult & InsertOutcome;
			return { ...outcome, row: outcome.row, eventId: await this.appendEvent(outcome.row, "status", "scheduled", t) };
		});
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
		// Rides now only (one conflict target); scheduled rides are inserted alone with their event (insertScheduled).
		const binds = orders.map(bindOf);
		const rows = await this.db.rows<OrderRow>(
			`INSERT INTO orders (${INSERT_COLUMNS})
			 SELECT ${UNNEST_SELECT} FROM unnest(${UNNEST_ARRAYS}) AS n(${UNNEST_ALIASES})
			 ${ON_ACTIVE_CONFLICT} RETURNING *`,
			ORDER_COLUMNS.map((_c, i) => binds.map((b) => b[i])),
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
		return this.db.tx((t) => this.moveWithin(t, from, to, changes, emitsEvent(to), expectDriverId, expectVersion));
	}

	/** `applyMove` inside the caller's transaction; `withEvent` says whether the move is a webhook event. */
	private async moveWithin(
		t: Transaction,
		from: Pick<OrderRow, "id" | "status">,
		to: RideStatus,
		changes: MoveChanges,
		withEvent: boolean,
		expectDriverId?: string,
		expectVersion?: number,
	): Promise<MoveResult | null> {
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
		const row = await this.db.row<OrderRow>(`UPDATE orders SET ${sets.join(", ")} WHERE ${where} RETURNING *`, bind, t);
		if (!row) return null;
		if (!withEvent) return { row, eventId: null };
		return { row, eventId: await this.appendEvent(row, "status", to as WebhookStatus, t) };
	}

	// ---- the schedule (schedule.ts) ----

	/** When the earliest waiting scheduled ride is due (the first entry of `orders_scheduled_due`), or null when none waits. */
	async nextDispatchAt(): Promise<Date | null> {
		const row = await this.db.row<{ dispatch_at: Date }>("SELECT dispatch_at FROM orders WHERE status = 'scheduled' ORDER BY dispatch_at LIMIT 1");
		return row ? new Date(row.dispatch_at) : null;
	}

	/**
	 * One due scheduled ride, decided and moved in one transaction: the row
	 * is taken `FOR UPDATE SKIP LOCKED` (another instance on it: the next
	 * one), `decide` says what to do from whether its rider is on an active
	 * ride and whether its search could still end before the pickup time,
	 * and the move is a conditional update `WHERE status = 'scheduled'` plus
	 * its event. Null when nothing is due. A ride whose rider is busy is
	 * looked at again at `retryAt` (never past its last chance).
	 */
	async takeDueScheduled(
		o: { searchMarginMs: number; retryMs: number },
		decide: (ride: { riderBusy: boolean; tooLate: boolean }) => "start" | "give_up" | "wait",
	): Promise<{ step: "start" | "give_up" | "wait"; row: OrderRow; moved: MoveResult | null } | null> {
		return this.db.tx(async (t) => {
			const ride = await this.db.row<OrderRow & { rider_busy: boolean; too_late: boolean }>(
				`SELECT o.*,
				   EXISTS (SELECT 1 FROM orders a WHERE a.rider_id = o.rider_id AND a.mode = o.mode AND a.status IN (${ACTIVE_SQL})) AS rider_busy,
				   (o.pickup_at - $1 ${MS} <= now()) AS too_late
				 FROM orders o WHERE o.status = 'scheduled' AND o.dispatch_at <= now()
				 ORDER BY o.dispatch_at LIMIT 1 FOR UPDATE SKIP LOCKED`,
				[o.searchMarginMs],
				t,
			);
			if (!ride) return null;
			const { rider_busy: riderBusy, too_late: tooLate, ...row } = ride;
			const step = decide({ riderBusy, tooLate });
			if (step === "wait") {
				await this.db.run(
					`UPDATE orders SET dispatch_at = LEAST(now() + $2 ${MS}, pickup_at - $3 ${MS}) WHERE id = $1 AND status = 'scheduled'`,
					[row.id, o.retryMs, o.searchMarginMs],
					t,
				);
				return { step, row, moved: null };
			}
			return { step, row, moved: await this.leaveScheduleWithin(t, row, step === "start" ? "searching" : "no_driver_found") };
		});
	}

	/**
	 * A sandbox advance starts a manual scheduled ride's dispatch now
	 * (sandbox-advance.ts): the schedule's start, the same conditional move
	 * and `searching` event, on this one ride whatever its `dispatch_at`; the
	 * schedule then no longer sees it (it takes `scheduled` rows only). The
	 * rider's active ride is judged as the schedule judges it, under the row
	 * lock; `rider_busy` changes nothing. Null when the ride is not
	 * `scheduled` (any more): somebody moved it first.
	 */
	async startScheduledNow(orderId: string): Promise<MoveResult | "rider_busy" | null> {
		try {
			return await this.db.tx(async (t) => {
				const ride = await this.db.row<OrderRow & { rider_busy: boolean }>(
					`SELECT o.*,
					   EXISTS (SELECT 1 FROM orders a WHERE a.rider_id = o.rider_id AND a.mode = o.mode AND a.status IN (${ACTIVE_SQL})) AS rider_busy
					 FROM orders o WHERE o.id = $1 AND o.status = 'scheduled' FOR UPDATE`,
					[orderId],
					t,
				);
				if (!ride) return null;
				const { rider_busy: riderBusy, ...row } = ride;
				if (riderBusy) return "rider_busy";
				return this.leaveScheduleWithin(t, row, "searching");
			});
		} catch (err) {
			// A ride for now took the rider's active slot after the check: the index judged, nothing was written.
			if (isUniqueViolation(err, "orders_one_active_per_rider")) return "rider_busy";
			throw err;
		}
	}

	/** A scheduled ride's start (`searching`) or give-up (`no_driver_found`): a conditional move plus its webhook event, both of which are events here. */
	private leaveScheduleWithin(t: Transaction, row: OrderRow, to: "searching" | "no_driver_found"): Promise<MoveResult | null> {
		return this.moveWithin(t, row, to, { eta: null }, true);
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
