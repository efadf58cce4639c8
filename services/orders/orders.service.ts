import { randomUUID } from "node:crypto";
import type { Context, Service, ServiceSchema } from "moleculer";
import { QueryTypes, type Transaction } from "sequelize";
import { DbMixin, isUniqueViolation, type DbThis } from "../../mixins/db.mixin";
import { ApiError, orderNotFound, validationError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { readSettings } from "../../lib/settings";
import { assertWebhookUrlAllowed, type WebhookUrlPolicy } from "../../lib/webhook-url";
import { bindLogContext } from "../../mixins/observability.middleware";
import { migrations } from "./migrations";
import {
	ACTIVE_STATUSES,
	MOVING_STATUSES,
	METADATA_MAX_BYTES,
	cancelParams,
	createOrderParams,
	eventsParams,
	feedbackParams,
	getOrderParams,
	listActiveParams,
	recordLocationParams,
	riderOtpParams,
	statusParams,
	transitionParams,
	type CancelParams,
	type CancelResult,
	type CreateOrderParams,
	type CreateOrderResult,
	type DeliveryState,
	type DriverInfo,
	type EventsResult,
	type FeedbackParams,
	type FeedbackResult,
	type InternalOrder,
	type ListActiveParams,
	type Order,
	type OrderCreatedEvent,
	type OrderIdParams,
	type OrdersMeta,
	type RecordLocationParams,
	type RideEventPayload,
	type RideEventRecordedEvent,
	type RideStatus,
	type StatusChangedEvent,
	type TransitionParams,
} from "../../contracts/orders";
import type { DriverLocation, Place, Point, ServiceType } from "../../contracts/common";
import { canTransition, defaultActorFor, emitsEvent, isActive } from "./ride-state";
import { buildEventPayload, generateOtp, majorToPaise, serialisedBytes, toInternalOrder, toOrder, type OrderRow } from "./order-view";
import { DEFAULT_RUNNING_TIMEOUT_MS, checkIdempotencyKey, judgeClaim, requestHash, type StoredClaim } from "./idempotency";

/**
 * Orders: the rides, their state machine and the transactional outbox
 * (`ride_events`) notifications delivers from. Every status move is a
 * conditional update plus its event row in one transaction; the event's
 * sequence is the order's version after that update, so sequence order is
 * commit order.
 */

/** What the other services answer (docs/ARCHITECTURE.md). */
interface RiderResult {
	riderId: string;
}
interface PricedTrip {
	serviceType: ServiceType;
	totalAmount: number;
	/** The exact integer to store (pricing computes in paise). */
	totalAmountPaise?: number;
	currency: string;
	fareBreakdown: Record<string, unknown>;
	distance: number;
	duration: number;
	quoteId?: string;
}

// ---- service -----------------------------------------------------------------------

interface OrdersSettings {
	/** A running Idempotency-Key claim older than this is from a dead call and may be taken over. */
	idempotencyRunningTimeoutMs: number;
	/** How often finished keys older than 24 h are deleted. */
	idempotencyCleanupMs: number;
}

interface OrdersLocal {
	webhookPolicy: WebhookUrlPolicy;
	cleanupTimer?: NodeJS.Timeout;
}

/** Column changes a status move makes besides status/version (undefined = keep). */
interface MoveChanges {
	driver?: DriverInfo | null;
	driverLocation?: DriverLocation | null;
	eta?: number | null;
	cancelReason?: string | null;
}

interface MoveResult {
	row: OrderRow;
	eventId: string | null;
}

interface IdempotencyClaim {
	partnerId: string;
	key: string;
	token: string;
}

type ClaimOutcome = { kind: "claimed"; claim: IdempotencyClaim } | { kind: "replay"; status: number; body: unknown };

interface OrdersMethods {
	findOrder(orderId: string, partnerId?: string): Promise<OrderRow | null>;
	findActiveForRider(riderId: string, partnerId: string): Promise<OrderRow | null>;
	createOrder(ctx: Context<CreateOrderParams, OrdersMeta>, claim: IdempotencyClaim | null): Promise<{ status: number; body: CreateOrderResult }>;
	insertOrder(values: unknown[], claim: IdempotencyClaim | null): Promise<OrderRow | null>;
	claimKey(partnerId: string, key: string, hash: string): Promise<ClaimOutcome>;
	finishKey(claim: IdempotencyClaim, status: number, body: unknown, transaction?: Transaction): Promise<boolean>;
	releaseKey(claim: IdempotencyClaim): Promise<void>;
	applyMove(from: OrderRow, to: RideStatus, changes: MoveChanges, expectDriverId?: string): Promise<MoveResult | null>;
	announceMove(from: RideStatus, result: MoveResult, previousDriverId: string | null): void;
	hint(event: string, payload: unknown): void;
	callService<R>(ctx: Context, action: string, params: unknown): Promise<R>;
}

type OrdersThis = Service<OrdersSettings> & OrdersMethods & OrdersLocal & DbThis;

/** Failures that mean "the other service is not there right now", answered as 503 (retryable). */
const UNAVAILABLE_ERRORS = new Set([
	"ServiceNotFoundError",
	"ServiceNotAvailableError",
	"RequestTimeoutError",
	"RequestRejectedError",
	"RequestSkippedError",
	"BrokerDisconnectedError",
	"QueueIsFullError",
]);

function serviceUnavailable(): ApiError {
	return new ApiError(503, "SERVICE_UNAVAILABLE", "A required service is temporarily unavailable", { retryAfter: 1 });
}

const ACTIVE_SQL = ACTIVE_STATUSES.map((s) => `'${s}'`).join(",");
const MOVING_SQL = MOVING_STATUSES.map((s) => `'${s}'`).join(",");
/** How often create-order re-reads after losing the active-ride race to a ride that ended meanwhile. */
const ACTIVE_RIDE_ATTEMPTS = 5;
/** How often cancel re-reads when a driver move landed between its read and its update. */
const CANCEL_ATTEMPTS = 10;

const OrdersService: ServiceSchema<OrdersSettings, OrdersMethods, OrdersLocal & DbThis> = {
	name: "orders",
	mixins: [DbMixin({ service: "orders", migrations })],
	settings: {
		idempotencyRunningTimeoutMs: DEFAULT_RUNNING_TIMEOUT_MS,
		idempotencyCleanupMs: 10 * 60_000,
	},

	actions: {
		// ---- partner actions (the /ride/* endpoints) ----

		/** POST /ride/create-order */
		create: {
			access: "partner",
			params: createOrderParams,
			async handler(this: OrdersThis, ctx: Context<CreateOrderParams, OrdersMeta>): Promise<CreateOrderResult> {
				const partnerId = ctx.meta.partnerId!;
				const keyCheck = checkIdempotencyKey(ctx.meta.idempotencyKey);
				if (!keyCheck.ok) throw validationError(keyCheck.field, keyCheck.message);
				if (ctx.params.metadata !== undefined && serialisedBytes(ctx.params.metadata) > METADATA_MAX_BYTES) {
					throw validationError("metadata", `metadata must be at most ${METADATA_MAX_BYTES} bytes serialised`);
				}

				const key = ctx.meta.idempotencyKey;
				if (key === undefined || key === null) {
					const result = await this.createOrder(ctx, null);
					ctx.meta.$statusCode = result.status;
					return result.body;
				}

				const outcome = await this.claimKey(partnerId, key, requestHash(ctx.params));
				if (outcome.kind === "replay") {
					ctx.meta.$statusCode = outcome.status;
					return outcome.body as CreateOrderResult;
				}
				try {
					const result = await this.createOrder(ctx, outcome.claim);
					ctx.meta.$statusCode = result.status;
					return result.body;
				} catch (err) {
					// A call that failed leaves nothing to replay: free the key for a retry.
					await this.releaseKey(outcome.claim).catch((e: unknown) => this.logger.warn("Could not release an idempotency key", (e as Error)?.message));
					throw err;
				}
			},
		},

		/** POST /ride/cancel */
		cancel: {
			access: "partner",
			params: cancelParams,
			async handler(this: OrdersThis, ctx: Context<CancelParams, OrdersMeta>): Promise<CancelResult> {
				const partnerId = ctx.meta.partnerId!;
				const answer: CancelResult = { code: "RIDE_CANCELLED", orderId: ctx.params.orderId, status: "customer_cancelled" };
				for (let attempt = 0; attempt < CANCEL_ATTEMPTS; attempt++) {
					const row = await this.findOrder(ctx.params.orderId, partnerId);
					if (!row) throw orderNotFound();
					// Safe retries: a cancelled ride answers the same, and no second event is written.
					if (row.status === "customer_cancelled") return answer;
					if (!isActive(row.status) || !canTransition(row.status, "customer_cancelled", "partner")) {
						throw new ApiError(409, "RIDE_NOT_ACTIVE", `The ride is ${row.status} and can no longer be cancelled`);
					}
					const moved = await this.applyMove(row, "customer_cancelled", { cancelReason: ctx.params.reason ?? null, eta: null });
					if (moved) {
						this.announceMove(row.status, moved, row.driver?.id ?? null);
						return answer;
					}
					// A driver move landed between the read and the update: judge again on the new status.
				}
				throw new ApiError(409, "CONFLICT", "The ride kept changing; try again", { retryAfter: 1 });
			},
		},

		/** POST /ride/feedback */
		feedback: {
			access: "partner",
			params: feedbackParams,
			async handler(this: OrdersThis, ctx: Context<FeedbackParams, OrdersMeta>): Promise<FeedbackResult> {
				const partnerId = ctx.meta.partnerId!;
				const row = await this.findOrder(ctx.params.orderId, partnerId);
				if (!row) throw orderNotFound();
				// `dropped` is terminal, so this check cannot go stale before the insert.
				if (row.status !== "dropped") throw new ApiError(409, "RIDE_NOT_COMPLETED", `Feedback is accepted once the ride is dropped (it is ${row.status})`);
				const inserted = await this.sequelize.query<{ order_id: string }>(
					`INSERT INTO feedback (order_id, partner_id, rating, comment, tags) VALUES ($1, $2, $3, $4, $5::text[])
					 ON CONFLICT (order_id) DO NOTHING RETURNING order_id`,
					{ bind: [row.id, partnerId, ctx.params.rating, ctx.params.comment ?? null, ctx.params.tags ?? []], type: QueryTypes.SELECT },
				);
				if (inserted.length === 0) throw new ApiError(409, "FEEDBACK_ALREADY_SUBMITTED", "Feedback for this ride was already submitted");
				return { code: "FEEDBACK_SUBMITTED", orderId: row.id };
			},
		},

		/** POST /ride/status */
		status: {
			access: "partner",
			params: statusParams,
			async handler(this: OrdersThis, ctx: Context<OrderIdParams, OrdersMeta>): Promise<Order> {
				const row = await this.findOrder(ctx.params.orderId, ctx.meta.partnerId!);
				if (!row) throw orderNotFound();
				return toOrder(row);
			},
		},

		/** POST /ride/events: the ride's webhook events in sequence order with their delivery state. */
		events: {
			access: "partner",
			params: eventsParams,
			async handler(this: OrdersThis, ctx: Context<OrderIdParams, OrdersMeta>): Promise<EventsResult> {
				const row = await this.findOrder(ctx.params.orderId, ctx.meta.partnerId!);
				if (!row) throw orderNotFound();
				const rows = await this.sequelize.query<{ id: string; sequence: number; status: RideEventPayload["status"]; occurred_at: Date; payload: RideEventPayload }>(
					"SELECT id, sequence, status, occurred_at, payload FROM ride_events WHERE order_id = $1 ORDER BY sequence",
					{ bind: [row.id], type: QueryTypes.SELECT },
				);
				const states = new Map<string, Partial<DeliveryState>>();
				if (rows.length > 0) {
					const answer = await this.callService<unknown>(ctx, "notifications.deliveryStates", { eventIds: rows.map((r) => r.id) });
					// Accept either a map keyed by eventId or a list of { eventId, … }.
					if (Array.isArray(answer)) {
						for (const item of answer as Array<Partial<DeliveryState> & { eventId?: string }>) {
							if (item && typeof item.eventId === "string") states.set(item.eventId, item);
						}
					} else if (answer && typeof answer === "object") {
						for (const [id, item] of Object.entries(answer as Record<string, Partial<DeliveryState>>)) {
							if (item && typeof item === "object") states.set(id, item);
						}
					}
				}
				return {
					events: rows.map((r) => {
						const s = states.get(r.id);
						return {
							eventId: r.id,
							sequence: r.sequence,
							status: r.status,
							occurredAt: new Date(r.occurred_at).toISOString(),
							payload: r.payload,
							delivery: {
								state: s?.state ?? "pending",
								attempts: s?.attempts ?? 0,
								lastStatus: s?.lastStatus ?? null,
								lastError: s?.lastError ?? null,
							},
						};
					}),
				};
			},
		},

		// ---- internal actions (dispatch, operators) ----

		/** One order as services see it (no OTP). */
		get: {
			access: "internal",
			params: getOrderParams,
			async handler(this: OrdersThis, ctx: Context<OrderIdParams>): Promise<InternalOrder> {
				const row = await this.findOrder(ctx.params.orderId);
				if (!row) throw orderNotFound();
				return toInternalOrder(row);
			},
		},

		/**
		 * The simulated fleet stands in for the rider telling the driver the
		 * OTP; nothing else needs it (live drivers hear it from the rider).
		 */
		riderOtp: {
			access: "internal",
			params: riderOtpParams,
			async handler(this: OrdersThis, ctx: Context<OrderIdParams>): Promise<{ orderId: string; otp: string }> {
				// Only the simulated fleet may read an OTP: in live mode the rider tells it to the driver.
				if (readSettings(process.env).fleetMode !== "simulated") {
					throw new ApiError(403, "FORBIDDEN", "The rider's OTP is only readable in simulated fleet mode");
				}
				const row = await this.findOrder(ctx.params.orderId);
				if (!row) throw orderNotFound();
				return { orderId: row.id, otp: row.otp };
			},
		},

		/**
		 * Moves a ride (dispatch): legality from the pure state machine, then one
		 * conditional update `WHERE id = $1 AND status = $from` plus the event
		 * row in the same transaction.
		 */
		transition: {
			access: "internal",
			params: transitionParams,
			async handler(this: OrdersThis, ctx: Context<TransitionParams>): Promise<InternalOrder> {
				const p = ctx.params;
				const row = await this.findOrder(p.orderId);
				if (!row) throw orderNotFound();
				const from = p.from ?? row.status;
				const actor = p.actor ?? defaultActorFor(p.to);
				if (!canTransition(from, p.to, actor)) {
					throw new ApiError(409, "INVALID_TRANSITION", `A ${actor} cannot move a ride from ${from} to ${p.to}`);
				}
				if (row.status !== from) throw new ApiError(409, "CONFLICT", `The ride is ${row.status}, not ${from}`);

				const changes: MoveChanges = {};
				let expectDriverId: string | undefined;
				switch (p.to) {
					case "accepted": {
						const d = p.driver;
						if (!d || !d.name || !d.phone || !d.vehicleNumber) {
							throw validationError("driver", "accepted needs driver { id, name, phone, vehicleNumber }");
						}
						changes.driver = { id: d.id, name: d.name, phone: d.phone, vehicleNumber: d.vehicleNumber };
						changes.driverLocation = p.location ?? d.location ?? null;
						changes.eta = p.eta ?? null;
						break;
					}
					case "started":
						// The OTP never changes, so comparing it with the row read above is safe.
						if (typeof p.otp !== "string" || p.otp !== row.otp) throw new ApiError(422, "INVALID_OTP", "The OTP does not match this ride");
						if (p.location) changes.driverLocation = p.location;
						changes.eta = p.eta ?? null;
						break;
					case "searching":
						// The driver dropped out: forget them; only that driver's drop-out counts.
						changes.driver = null;
						changes.driverLocation = null;
						changes.eta = null;
						expectDriverId = p.driver?.id;
						break;
					case "dropped":
						if (p.location) changes.driverLocation = p.location;
						changes.eta = null;
						break;
					default:
						if (p.location) changes.driverLocation = p.location;
						changes.eta = p.eta ?? null;
				}
				const moved = await this.applyMove(row, p.to, changes, expectDriverId);
				if (!moved) throw new ApiError(409, "CONFLICT", `The ride is no longer ${from}`);
				this.announceMove(from, moved, row.driver?.id ?? null);
				return toInternalOrder(moved.row);
			},
		},

		/** The driver's position while the ride moves: updates the order and appends a location_updated event. */
		recordLocation: {
			access: "internal",
			params: recordLocationParams,
			async handler(this: OrdersThis, ctx: Context<RecordLocationParams>): Promise<InternalOrder> {
				const p = ctx.params;
				const location: DriverLocation = { lat: p.location.lat, lng: p.location.lng };
				if (typeof p.location.heading === "number") location.heading = p.location.heading;
				const result = await this.sequelize.transaction(async (transaction) => {
					const rows = await this.sequelize.query<OrderRow>(
						`UPDATE orders SET driver_location = $2::jsonb, eta = $3, version = version + 1, updated_at = clock_timestamp()
						 WHERE id = $1 AND status IN (${MOVING_SQL}) RETURNING *`,
						{ bind: [p.orderId, JSON.stringify(location), p.eta ?? null], type: QueryTypes.SELECT, transaction },
					);
					const row = rows[0];
					if (!row) return null;
					const eventId = newId("evt");
					const payload = buildEventPayload({ eventId, row, status: "location_updated", sequence: row.version, occurredAt: row.updated_at });
					await this.sequelize.query(
						`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
						 VALUES ($1, $2, $3, $4, 'location', 'location_updated', $5, $6::jsonb, $7)`,
						{ bind: [eventId, row.id, row.partner_id, row.version, row.webhook_url, JSON.stringify(payload), row.updated_at], transaction },
					);
					return { row, eventId };
				});
				if (!result) {
					const current = await this.findOrder(p.orderId);
					if (!current) throw orderNotFound();
					throw new ApiError(409, "CONFLICT", `No location updates while the ride is ${current.status}`);
				}
				this.hint("orders.rideEventRecorded", { orderId: result.row.id, eventId: result.eventId, kind: "location" } satisfies RideEventRecordedEvent);
				return toInternalOrder(result.row);
			},
		},

		/** Active rides (dispatch's reconciliation sweep), oldest first. */
		listActive: {
			access: "internal",
			params: listActiveParams,
			async handler(this: OrdersThis, ctx: Context<ListActiveParams>): Promise<InternalOrder[]> {
				const statuses = ctx.params.status ? [ctx.params.status] : [...ACTIVE_STATUSES];
				const rows = await this.sequelize.query<OrderRow>(
					"SELECT * FROM orders WHERE status = ANY($1::text[]) ORDER BY created_at LIMIT $2",
					{ bind: [statuses, ctx.params.limit ?? 500], type: QueryTypes.SELECT },
				);
				return rows.map(toInternalOrder);
			},
		},
	},

	methods: {
		async findOrder(this: OrdersThis, orderId: string, partnerId?: string): Promise<OrderRow | null> {
			// A foreign order is read exactly like an unknown one: the partner is part of the key.
			const rows = await this.sequelize.query<OrderRow>(
				partnerId === undefined ? "SELECT * FROM orders WHERE id = $1" : "SELECT * FROM orders WHERE id = $1 AND partner_id = $2",
				{ bind: partnerId === undefined ? [orderId] : [orderId, partnerId], type: QueryTypes.SELECT },
			);
			return rows[0] ?? null;
		},

		async findActiveForRider(this: OrdersThis, riderId: string, partnerId: string): Promise<OrderRow | null> {
			const rows = await this.sequelize.query<OrderRow>(
				`SELECT * FROM orders WHERE rider_id = $1 AND partner_id = $2 AND status IN (${ACTIVE_SQL})`,
				{ bind: [riderId, partnerId], type: QueryTypes.SELECT },
			);
			return rows[0] ?? null;
		},

		async createOrder(this: OrdersThis, ctx: Context<CreateOrderParams, OrdersMeta>, claim: IdempotencyClaim | null) {
			const p = ctx.params;
			const partnerId = ctx.meta.partnerId!;
			await assertWebhookUrlAllowed(p.webhookURL, this.webhookPolicy);

			const pickupPoint: Point = { lat: p.pickup.lat, lng: p.pickup.lng };
			const dropPoint: Point = { lat: p.drop.lat, lng: p.drop.lng };
			const priced = p.quoteId !== undefined
				? await this.callService<PricedTrip>(ctx, "pricing.verifyQuote", { quoteId: p.quoteId, serviceType: p.serviceType, pickup: pickupPoint, drop: dropPoint })
				: await this.callService<PricedTrip>(ctx, "pricing.quote", { serviceType: p.serviceType, pickup: pickupPoint, drop: dropPoint });

			// The rider is written only once the request is known to be good: a refused order changes nothing.
			const rider = await this.callService<RiderResult>(ctx, "riders.upsert", {
				partnerId,
				name: p.user.name,
				phone: p.user.phone,
				...(p.user.email !== undefined ? { email: p.user.email } : {}),
			});
			const pickup: Place = { ...pickupPoint, ...(p.pickup.address !== undefined ? { address: p.pickup.address } : {}) };
			const drop: Place = { ...dropPoint, ...(p.drop.address !== undefined ? { address: p.drop.address } : {}) };

			for (let attempt = 0; attempt < ACTIVE_RIDE_ATTEMPTS; attempt++) {
				const row = await this.insertOrder(
					[
						newId("ord"),
						partnerId,
						rider.riderId,
						p.serviceType,
						JSON.stringify(pickup),
						JSON.stringify(drop),
						Number.isInteger(priced.totalAmountPaise) ? priced.totalAmountPaise : majorToPaise(priced.totalAmount),
						priced.currency || "INR",
						priced.fareBreakdown ? JSON.stringify(priced.fareBreakdown) : null,
						Math.round(priced.distance),
						Math.round(priced.duration),
						p.quoteId ?? null,
						generateOtp(),
						p.webhookURL,
						p.metadata !== undefined ? JSON.stringify(p.metadata) : null,
					],
					claim,
				);
				if (row) {
					// From here on this handler's logs (and the calls and events it makes) carry the new order's id.
					bindLogContext({ orderId: row.id });
					this.hint("orders.created", { orderId: row.id, partnerId, serviceType: row.service_type, pickup: row.pickup } satisfies OrderCreatedEvent);
					return { status: 201, body: toOrder(row) };
				}
				// The rider already has an active ride (the index said so, after its
				// insert committed): answer that one.
				const existing = await this.findActiveForRider(rider.riderId, partnerId);
				if (existing) {
					bindLogContext({ orderId: existing.id });
					const body: CreateOrderResult = { code: "USER_HAVE_ACTIVE_RIDE", ...toOrder(existing) };
					if (claim && !(await this.finishKey(claim, 200, body))) {
						throw new ApiError(409, "IDEMPOTENCY_KEY_IN_USE", "This Idempotency-Key was taken over by another call", { retryAfter: 1 });
					}
					return { status: 200, body };
				}
				// That ride ended between the conflict and the read: try the insert again.
			}
			throw new ApiError(409, "CONFLICT", "The rider's rides kept changing; try again", { retryAfter: 1 });
		},

		/**
		 * Inserts the order (and finishes the idempotency claim) in one
		 * transaction; null when the rider already has an active ride. The
		 * partial unique index judges: `ON CONFLICT … DO NOTHING` waits for a
		 * concurrent insert for the same rider to commit and then yields to it,
		 * without raising an error (which would abort the transaction, and
		 * upsets the embedded PGlite's shared session).
		 */
		async insertOrder(this: OrdersThis, values: unknown[], claim: IdempotencyClaim | null): Promise<OrderRow | null> {
			try {
				return await this.sequelize.transaction(async (transaction) => {
					const rows = await this.sequelize.query<OrderRow>(
						`INSERT INTO orders (id, partner_id, rider_id, status, service_type, pickup, "drop", fare_paise, currency, fare_breakdown,
						                     distance, duration, quote_id, otp, webhook_url, metadata)
						 VALUES ($1, $2, $3, 'searching', $4, $5::jsonb, $6::jsonb, $7, $8, $9::jsonb, $10, $11, $12, $13, $14, $15::jsonb)
						 ON CONFLICT (rider_id) WHERE status IN (${ACTIVE_SQL}) DO NOTHING
						 RETURNING *`,
						{ bind: values, type: QueryTypes.SELECT, transaction },
					);
					const row = rows[0];
					if (!row) return null;
					// Finishing the claim in the same transaction: a replay can never miss an order that exists.
					if (claim && !(await this.finishKey(claim, 201, toOrder(row), transaction))) {
						throw new ApiError(409, "IDEMPOTENCY_KEY_IN_USE", "This Idempotency-Key was taken over by another call", { retryAfter: 1 });
					}
					return row;
				});
			} catch (err) {
				if (isUniqueViolation(err, "orders_one_active_per_rider")) return null;
				throw err;
			}
		},

		/**
		 * Claims `key` for this call: INSERT … ON CONFLICT DO NOTHING decides
		 * between simultaneous first calls; an existing claim is judged by
		 * `judgeClaim` (replay, reused, in use, or free again).
		 */
		async claimKey(this: OrdersThis, partnerId: string, key: string, hash: string): Promise<ClaimOutcome> {
			for (let attempt = 0; attempt < 5; attempt++) {
				const token = randomUUID();
				const inserted = await this.sequelize.query<{ claim_token: string }>(
					`INSERT INTO idempotency_keys (partner_id, key, request_hash, state, claim_token) VALUES ($1, $2, $3, 'running', $4)
					 ON CONFLICT (partner_id, key) DO NOTHING RETURNING claim_token`,
					{ bind: [partnerId, key, hash, token], type: QueryTypes.SELECT },
				);
				if (inserted.length > 0) return { kind: "claimed", claim: { partnerId, key, token } };

				const rows = await this.sequelize.query<StoredClaim & { claim_token: string; db_now: Date }>(
					`SELECT request_hash, state, response_status, response_body, created_at, claim_token, now() AS db_now
					 FROM idempotency_keys WHERE partner_id = $1 AND key = $2`,
					{ bind: [partnerId, key], type: QueryTypes.SELECT },
				);
				const existing = rows[0];
				if (!existing) continue; // released meanwhile: claim again
				const verdict = judgeClaim(existing, hash, new Date(existing.db_now).getTime(), this.settings.idempotencyRunningTimeoutMs);
				switch (verdict.kind) {
					case "replay":
						return { kind: "replay", status: verdict.status, body: verdict.body };
					case "reused":
						throw new ApiError(422, "IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request body");
					case "in_use":
						throw new ApiError(409, "IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is still being processed", { retryAfter: 1 });
					case "takeover": {
						// Compare-and-swap on the old token: of several takers, one wins.
						const taken = await this.sequelize.query<{ claim_token: string }>(
							`UPDATE idempotency_keys SET request_hash = $3, state = 'running', claim_token = $5,
							        response_status = NULL, response_body = NULL, created_at = now()
							 WHERE partner_id = $1 AND key = $2 AND claim_token = $4 RETURNING claim_token`,
							{ bind: [partnerId, key, hash, existing.claim_token, token], type: QueryTypes.SELECT },
						);
						if (taken.length > 0) return { kind: "claimed", claim: { partnerId, key, token } };
					}
				}
			}
			throw new ApiError(409, "IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is still being processed", { retryAfter: 1 });
		},

		async finishKey(this: OrdersThis, claim: IdempotencyClaim, status: number, body: unknown, transaction?: Transaction): Promise<boolean> {
			const rows = await this.sequelize.query<{ key: string }>(
				`UPDATE idempotency_keys SET state = 'done', response_status = $4, response_body = $5::jsonb
				 WHERE partner_id = $1 AND key = $2 AND claim_token = $3 AND state = 'running' RETURNING key`,
				{ bind: [claim.partnerId, claim.key, claim.token, status, JSON.stringify(body)], type: QueryTypes.SELECT, transaction },
			);
			return rows.length > 0;
		},

		async releaseKey(this: OrdersThis, claim: IdempotencyClaim): Promise<void> {
			await this.sequelize.query(
				"DELETE FROM idempotency_keys WHERE partner_id = $1 AND key = $2 AND claim_token = $3 AND state = 'running'",
				{ bind: [claim.partnerId, claim.key, claim.token] },
			);
		},

		/**
		 * One status move as a conditional update `WHERE id AND status = from`
		 * plus, when the move is a webhook event, its event row with
		 * sequence = the version the same update produced. Null when somebody
		 * moved the ride first (nothing written).
		 */
		async applyMove(this: OrdersThis, from: OrderRow, to: RideStatus, changes: MoveChanges, expectDriverId?: string): Promise<MoveResult | null> {
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
			if (changes.driver !== undefined) set("driver", changes.driver === null ? null : JSON.stringify(changes.driver), "::jsonb");
			if (changes.driverLocation !== undefined) set("driver_location", changes.driverLocation === null ? null : JSON.stringify(changes.driverLocation), "::jsonb");
			if (changes.eta !== undefined) set("eta", changes.eta);
			if (changes.cancelReason !== undefined) set("cancel_reason", changes.cancelReason);
			let where = "id = $1 AND status = $2";
			if (expectDriverId !== undefined) {
				bind.push(expectDriverId);
				where += ` AND driver->>'id' = $${bind.length}`;
			}
			return this.sequelize.transaction(async (transaction) => {
				const rows = await this.sequelize.query<OrderRow>(`UPDATE orders SET ${sets.join(", ")} WHERE ${where} RETURNING *`, {
					bind,
					type: QueryTypes.SELECT,
					transaction,
				});
				const row = rows[0];
				if (!row) return null;
				if (!withEvent) return { row, eventId: null };
				const eventId = newId("evt");
				const payload = buildEventPayload({ eventId, row, status: to, sequence: row.version, occurredAt: row.updated_at });
				await this.sequelize.query(
					`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
					 VALUES ($1, $2, $3, $4, 'status', $5, $6, $7::jsonb, $8)`,
					{ bind: [eventId, row.id, row.partner_id, row.version, to, row.webhook_url, JSON.stringify(payload), row.updated_at], transaction },
				);
				return { row, eventId };
			});
		},

		/** Post-commit hints: dispatch frees drivers on status changes, notifications wakes up on new events. */
		announceMove(this: OrdersThis, from: RideStatus, result: MoveResult, previousDriverId: string | null) {
			const { row } = result;
			this.hint("orders.statusChanged", {
				orderId: row.id,
				partnerId: row.partner_id,
				from,
				to: row.status,
				driverId: row.driver?.id ?? previousDriverId,
			} satisfies StatusChangedEvent);
			if (result.eventId) {
				this.hint("orders.rideEventRecorded", { orderId: row.id, eventId: result.eventId, kind: "status" } satisfies RideEventRecordedEvent);
			}
		},

		hint(this: OrdersThis, event: string, payload: unknown) {
			// Fire-and-forget: the tables are the truth, so a lost hint only costs latency.
			Promise.resolve()
				.then(() => this.broker.emit(event, payload))
				.catch((err: unknown) => this.logger.warn(`Could not emit ${event}`, (err as Error)?.message));
		},

		async callService<R>(this: OrdersThis, ctx: Context, action: string, params: unknown): Promise<R> {
			try {
				return await ctx.call<R, unknown>(action, params);
			} catch (err) {
				if (UNAVAILABLE_ERRORS.has((err as Error)?.name)) {
					this.logger.warn(`${action} is unavailable: ${(err as Error).name}`);
					throw serviceUnavailable();
				}
				throw err;
			}
		},
	},

	created(this: OrdersThis) {
		const settings = readSettings(process.env);
		this.webhookPolicy = { allowPrivate: settings.webhookAllowPrivate };
		const running = Number(process.env.IDEMPOTENCY_RUNNING_TIMEOUT_MS);
		if (Number.isFinite(running) && running > 0) this.settings.idempotencyRunningTimeoutMs = running;
	},

	async started(this: OrdersThis) {
		// Keys are replayed for 24 h; older ones are only dead weight.
		this.cleanupTimer = setInterval(() => {
			this.sequelize
				.query("DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours'")
				.catch((err: unknown) => this.logger.warn("Idempotency key cleanup failed", (err as Error)?.message));
		}, this.settings.idempotencyCleanupMs);
		this.cleanupTimer.unref();
	},

	async stopped(this: OrdersThis) {
		if (this.cleanupTimer) clearInterval(this.cleanupTimer);
	},
};

export default OrdersService;
