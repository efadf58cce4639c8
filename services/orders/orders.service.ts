import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { ApiError, orderNotFound, validationError } from "../../lib/errors";
import type { WebhookUrlPolicy } from "../../lib/webhook-url";
import { webhookDnsResolver } from "../../lib/dns-resolver";
import {
	ACTIVE_STATUSES,
	type ActiveStatus,
	ORDER_EVENTS,
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
	type CancelPreviewResult,
	type CancelResult,
	type CreateOrderParams,
	type CreateOrderResult,
	type EventsParams,
	type EventsResult,
	type ListActiveResult,
	type ListActiveStatesResult,
	EVENTS_PAGE_DEFAULT,
	EVENTS_PAGE_MAX_BYTES,
	unlockOtpParams,
	type FeedbackParams,
	type FeedbackResult,
	type InternalOrder,
	type ListActiveParams,
	type Order,
	type OrderIdParams,
	type OrdersMeta,
	type RecordLocationParams,
	type RideEventRecordedEvent,
	type RideStatus,
	type RiderOtpResult,
	type ScheduleChangedEvent,
	type StatusChangedEvent,
	type TransitionParams,
} from "../../contracts/orders";
import type { DriverLocation } from "../../contracts/common";
import { EVENT_PAYLOAD_VERSION_BYTES } from "../../contracts/versions";
import { migrations } from "./migrations";
import { deliveryStatesById, eventViewBytes, toInternalOrder, toOrder, toRideEventView, type OrderRow } from "./order-view";
import { cutEventsPage } from "./events-page";
import { OrdersRepo, type MoveResult, type NewOrder } from "./orders.repo";
import { StatementBatcher } from "../../lib/statement-batcher";
import { IdempotencyRepo } from "./idempotency.repo";
import { readOrdersSettings, type OrdersSettings } from "./orders.settings";
import { createOrder } from "./create-order";
import { cancelOrder } from "./cancel-order";
import { finalFareOf, planTransition } from "./transition-plan";
import { callService } from "./remote-calls";
import { decodeActiveCursor, decodeEventsCursor, encodeActiveCursor, encodeEventsCursor, type ActiveKey } from "./cursor";
import { otpTryAllowed } from "./otp";
import { modeOf, otpReadable } from "./modes";
import { serviceEnv, useServiceSettings } from "../../lib/settings";
import { RetentionPass } from "../../lib/retention";
import { OrdersRetentionRepo, type FinishedKey } from "./retention.repo";
import { removeFinishedOrders } from "./retention";
import { SandboxMixin } from "./sandbox.mixin";
import { ScheduleLoop } from "./schedule";
import { createdEvent } from "./create-order";

/**
 * Orders: the rides, their state machine (ride-state.ts) and the
 * transactional outbox (`ride_events`) notifications delivers from. The
 * actions delegate: SQL in orders.repo.ts and idempotency.repo.ts, the
 * create-order use case in create-order.ts, pure rules beside them.
 */

interface OrdersLocal {
	orders: OrdersRepo;
	/** Concurrent create-orders without an Idempotency-Key share one INSERT (never two of one rider and mode). */
	newOrders: StatementBatcher<NewOrder, OrderRow | null>;
	keys: IdempotencyRepo;
	webhookPolicy: WebhookUrlPolicy;
	cleanupTimer?: NodeJS.Timeout;
	retention: RetentionPass<FinishedKey>;
	/** Starts scheduled rides when they are due (schedule.ts). */
	schedule: ScheduleLoop;
}

interface OrdersMethods {
	loadPartnerOrder(ctx: Context<OrderIdParams, OrdersMeta>): Promise<void>;
	loadOrder(ctx: Context<OrderIdParams>): Promise<void>;
	countOtpTry(row: OrderRow): Promise<OrderRow>;
	announceMove(from: RideStatus, result: MoveResult, previousDriverId: string | null): void;
	hint(event: string, payload: unknown): void;
}

type OrdersThis = Service<OrdersSettings> & OrdersMethods & OrdersLocal & DbThis;

/** The order the `loadPartnerOrder` / `loadOrder` hook left on `ctx.locals`. */
function loadedOrder(ctx: Context<unknown, OrdersMeta>): OrderRow {
	return (ctx.locals as { order: OrderRow }).order;
}

/** The keyset page an `orders.listActive*` call asks for; a 400 when `after` is not one of their cursors. */
function activePageOf(params: ListActiveParams): { statuses: readonly ActiveStatus[]; limit: number; after: ActiveKey | undefined } {
	const after = params.after === undefined ? undefined : decodeActiveCursor(params.after);
	if (after === null) throw validationError("after", "after is not a nextCursor of orders.listActive");
	return { statuses: params.status ? [params.status] : ACTIVE_STATUSES, limit: params.limit ?? 500, after };
}

/** The cursor after a full page's last ride; null after a short (the last) page. */
function nextActiveCursor(rows: ReadonlyArray<{ id: string; key_at: string }>, limit: number): string | null {
	const last = rows[rows.length - 1];
	return rows.length === limit && last ? encodeActiveCursor({ createdAt: last.key_at, id: last.id }) : null;
}

const OrdersService: ServiceSchema<OrdersSettings, OrdersMethods, OrdersLocal & DbThis> = {
	name: "orders",
	mixins: [DbMixin({ service: "orders", migrations }), SandboxMixin],

	hooks: {
		before: {
			// Every partner action on one order: the partner's own order, or 404 (a foreign id behaves like an unknown one).
			"cancel|feedback|status|events": "loadPartnerOrder",
			// Internal actions on one order: any partner's, or 404.
			"get|transition": "loadOrder",
		},
	},

	actions: {
		// ---- partner actions (the /ride/* endpoints) ----

		/** POST /ride/create-order */
		create: {
			access: "partner",
			params: createOrderParams,
			async handler(this: OrdersThis, ctx: Context<CreateOrderParams, OrdersMeta>): Promise<CreateOrderResult> {
				const result = await createOrder(
					{
						orders: this.orders,
						keys: this.keys,
						webhookPolicy: this.webhookPolicy,
						logger: this.logger,
						insertNew: (order) => this.newOrders.submit(order),
						hint: (event, payload) => this.hint(event, payload),
						schedule: this.settings.schedule,
						scheduled: (dispatchAt) => {
							this.schedule.noteDue(dispatchAt);
							// The other orders instances re-arm too (a hint: each also polls the table).
							Promise.resolve()
								.then(() =>
									this.broker.broadcast(ORDER_EVENTS.scheduleChanged, { dispatchAt } satisfies ScheduleChangedEvent, { groups: ["orders"] }),
								)
								.catch((err: unknown) => this.logger.warn(`Could not broadcast ${ORDER_EVENTS.scheduleChanged}`, (err as Error)?.message));
						},
					},
					ctx,
				);
				ctx.meta.$statusCode = result.status;
				return result.body;
			},
		},

		/** POST /ride/cancel: plain, preview or confirmed (cancel-order.ts); safe to retry (a cancelled ride answers the same, and no second event is written). */
		cancel: {
			access: "partner",
			params: cancelParams,
			async handler(this: OrdersThis, ctx: Context<CancelParams, OrdersMeta>): Promise<CancelResult | CancelPreviewResult> {
				return cancelOrder(
					{
						orders: this.orders,
						graceSeconds: this.settings.cancelGraceSeconds,
						announceMove: (from, moved, previousDriverId) => this.announceMove(from, moved, previousDriverId),
					},
					ctx.params,
					loadedOrder(ctx),
					{ partnerId: ctx.meta.partnerId!, mode: modeOf(ctx.meta) },
				);
			},
		},

		/** POST /ride/feedback: once per ride, once it is dropped. */
		feedback: {
			access: "partner",
			params: feedbackParams,
			async handler(this: OrdersThis, ctx: Context<FeedbackParams, OrdersMeta>): Promise<FeedbackResult> {
				const row = loadedOrder(ctx);
				// `dropped` is terminal, so this check cannot go stale before the insert.
				if (row.status !== "dropped") throw new ApiError("RIDE_NOT_COMPLETED", `Feedback is accepted once the ride is dropped (it is ${row.status})`);
				const { rating, comment, tags } = ctx.params;
				if (!(await this.orders.insertFeedback(row.id, ctx.meta.partnerId!, rating, comment ?? null, tags ?? []))) {
					throw new ApiError("FEEDBACK_ALREADY_SUBMITTED", "Feedback for this ride was already submitted");
				}
				return { code: "FEEDBACK_SUBMITTED", orderId: row.id };
			},
		},

		/** POST /ride/status */
		status: {
			access: "partner",
			params: statusParams,
			handler(this: OrdersThis, ctx: Context<OrderIdParams, OrdersMeta>): Order {
				return toOrder(loadedOrder(ctx));
			},
		},

		/**
		 * POST /ride/events: one page of the ride's webhook events in sequence
		 * order with their delivery state; `nextCursor` continues after it (a
		 * keyset on the sequence: no gaps or repeats while events are added).
		 */
		events: {
			access: "partner",
			params: eventsParams,
			async handler(this: OrdersThis, ctx: Context<EventsParams, OrdersMeta>): Promise<EventsResult> {
				const after = ctx.params.cursor === undefined ? 0 : decodeEventsCursor(ctx.params.cursor);
				if (after === null) throw validationError("cursor", "cursor is not a nextCursor of /ride/events");
				const limit = ctx.params.limit ?? EVENTS_PAGE_DEFAULT;
				// One more than the page tells whether another page follows.
				const rows = await this.orders.listEvents(loadedOrder(ctx).id, after, limit + 1);
				// Cut early when the events would not fit one bus message (events-page.ts); the cursor follows the cut.
				// Each payload is measured with the `apiVersion` the gateway adds to it (contracts/versions.ts).
				const { page, more } = cutEventsPage(rows, limit, EVENTS_PAGE_MAX_BYTES, (row) => eventViewBytes(row) + EVENT_PAYLOAD_VERSION_BYTES);
				const states =
					page.length > 0
						? deliveryStatesById(await callService<unknown>(ctx, this.logger, "notifications.deliveryStates", { eventIds: page.map((r) => r.id) }))
						: new Map();
				return {
					events: page.map((r) => toRideEventView(r, states.get(r.id))),
					nextCursor: more ? encodeEventsCursor(page[page.length - 1].sequence) : null,
				};
			},
		},

		// ---- internal actions (dispatch, the simulated fleet, operators); never published on the gateway (access middleware) ----

		/** One order as services see it (no OTP). */
		get: {
			access: "internal",
			params: getOrderParams,
			handler(this: OrdersThis, ctx: Context<OrderIdParams>): InternalOrder {
				return toInternalOrder(loadedOrder(ctx));
			},
		},

		/**
		 * The simulated fleet stands in for the rider telling the driver the
		 * OTP; nothing else needs it (live drivers hear it from the rider).
		 * Test rides only, and only in simulated fleet mode: 403 otherwise.
		 */
		riderOtp: {
			access: "internal",
			params: riderOtpParams,
			async handler(this: OrdersThis, ctx: Context<OrderIdParams>): Promise<RiderOtpResult> {
				if (this.settings.fleetMode !== "simulated") {
					throw new ApiError("FORBIDDEN", "The rider's OTP is only readable in simulated fleet mode");
				}
				const row = await this.orders.findOrder(ctx.params.orderId);
				if (!row) throw orderNotFound();
				if (!otpReadable(row.mode)) throw new ApiError("FORBIDDEN", "The rider's OTP is only readable for test-mode rides");
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
				let row = loadedOrder(ctx);
				if (ctx.params.to === "started" && row.status === "arrived") row = await this.countOtpTry(row);
				const plan = planTransition(ctx.params, row);
				if (ctx.params.to === "dropped") plan.changes.finalFare = finalFareOf(row, ctx.params, Date.now());
				const moved = await this.orders.applyMove(row, ctx.params.to, plan.changes, plan.expectDriverId);
				if (!moved) throw new ApiError("CONFLICT", `The ride is no longer ${plan.from}`);
				this.announceMove(plan.from, moved, row.driver?.id ?? null);
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
				const result = await this.orders.recordLocation(p.orderId, location, p.eta ?? null);
				if (!result) {
					const current = await this.orders.findOrder(p.orderId);
					if (!current) throw orderNotFound();
					throw new ApiError("CONFLICT", `No location updates while the ride is ${current.status}`);
				}
				this.hint(ORDER_EVENTS.rideEventRecorded, {
					orderId: result.row.id,
					eventId: result.eventId!,
					kind: "location",
				} satisfies RideEventRecordedEvent);
				return toInternalOrder(result.row);
			},
		},

		/** One page of the active rides, whole (operators; dispatch's sweep reads listActiveStates), oldest first; `after` = the previous page's `nextCursor`. */
		listActive: {
			access: "internal",
			params: listActiveParams,
			async handler(this: OrdersThis, ctx: Context<ListActiveParams>): Promise<ListActiveResult> {
				const page = activePageOf(ctx.params);
				const rows = await this.orders.listActive(page.statuses, page.limit, page.after);
				return { orders: rows.map(toInternalOrder), nextCursor: nextActiveCursor(rows, page.limit) };
			},
		},

		/** orders.listActive's pages with each ride's id, status and driver id only (what dispatch's sweep compares). */
		listActiveStates: {
			access: "internal",
			params: listActiveParams,
			async handler(this: OrdersThis, ctx: Context<ListActiveParams>): Promise<ListActiveStatesResult> {
				const page = activePageOf(ctx.params);
				const rows = await this.orders.listActiveStates(page.statuses, page.limit, page.after);
				return { rides: rows.map((r) => ({ orderId: r.id, status: r.status, driverId: r.driver_id })), nextCursor: nextActiveCursor(rows, page.limit) };
			},
		},

		/** Operators: one retention pass now (ORDERS_RETENTION_DAYS). REPL: `call orders.runRetention` */
		runRetention: {
			access: "internal",
			async handler(this: OrdersThis): Promise<{ removed: number }> {
				return { removed: await this.retention.run() };
			},
		},

		/**
		 * Operators: the driver of an `arrived` ride used up its OTP tries
		 * (starting it answers 409 OTP_LOCKED); after checking with the rider,
		 * give it a fresh set. Alternatives: the driver drops out, the partner cancels.
		 * REPL: `call orders.unlockOtp --orderId ord_…`
		 */
		unlockOtp: {
			access: "internal",
			params: unlockOtpParams,
			async handler(this: OrdersThis, ctx: Context<OrderIdParams>): Promise<InternalOrder> {
				const row = await this.orders.unlockOtp(ctx.params.orderId);
				if (row) {
					this.logger.info(`OTP tries of ${row.id} unlocked by an operator`);
					return toInternalOrder(row);
				}
				const current = await this.orders.findOrder(ctx.params.orderId);
				if (!current) throw orderNotFound();
				throw new ApiError("INVALID_TRANSITION", `Only an arrived ride has OTP tries to unlock (it is ${current.status})`);
			},
		},
	},

	events: {
		/** Another orders instance booked a scheduled ride: fire this instance's timer then too, if that is earlier. */
		[ORDER_EVENTS.scheduleChanged]: {
			handler(this: OrdersThis, ctx: Context<ScheduleChangedEvent>) {
				if (typeof ctx.params?.dispatchAt === "number") this.schedule.noteDue(ctx.params.dispatchAt);
			},
		},
	},

	methods: {
		async loadPartnerOrder(this: OrdersThis, ctx: Context<OrderIdParams, OrdersMeta>) {
			const partnerId = ctx.meta.partnerId;
			// Hooks run before the access middleware: without a partner, leave the 401 to it.
			if (typeof partnerId !== "string" || partnerId.length === 0) return;
			// A test key never sees a live order, nor the reverse: both read as unknown.
			const row = await this.orders.findOrder(ctx.params.orderId, { partnerId, mode: modeOf(ctx.meta) });
			if (!row) throw orderNotFound();
			ctx.locals.order = row;
		},

		/**
		 * Counts one OTP try before the OTP is compared (see otp.ts); refuses
		 * with 409 OTP_LOCKED once the order's tries are used up. The row
		 * comes back as re-read when the ride moved meanwhile, so the plan
		 * judges the current status.
		 */
		async countOtpTry(this: OrdersThis, row: OrderRow): Promise<OrderRow> {
			const max = this.settings.otpMaxTries;
			const tries = await this.orders.reserveOtpTry(row.id, max);
			if (tries !== null) return { ...row, otp_tries: tries };
			const current = await this.orders.findOrder(row.id);
			if (!current) throw orderNotFound();
			if (current.status === "arrived" && !otpTryAllowed(current.otp_tries, max)) {
				this.logger.warn(`OTP start of ${row.id} is locked after ${current.otp_tries} tries`);
				throw new ApiError(
					"OTP_LOCKED",
					`Too many OTP tries for this ride (${max}): the driver drops out, the partner cancels, or an operator unlocks it`,
				);
			}
			return current;
		},

		async loadOrder(this: OrdersThis, ctx: Context<OrderIdParams>) {
			const row = await this.orders.findOrder(ctx.params.orderId);
			if (!row) throw orderNotFound();
			ctx.locals.order = row;
		},

		/** Post-commit hints: dispatch frees drivers on status changes, notifications wakes up on new events. */
		announceMove(this: OrdersThis, from: RideStatus, result: MoveResult, previousDriverId: string | null) {
			const { row } = result;
			if (from === "scheduled") {
				// Dispatch never saw the ride: a start is a new searching ride for it, any other end is none of its business.
				if (row.status === "searching") this.hint(ORDER_EVENTS.created, createdEvent(row, toOrder(row)));
				if (result.eventId) {
					this.hint(ORDER_EVENTS.rideEventRecorded, { orderId: row.id, eventId: result.eventId, kind: "status" } satisfies RideEventRecordedEvent);
				}
				return;
			}
			this.hint(ORDER_EVENTS.statusChanged, {
				orderId: row.id,
				partnerId: row.partner_id,
				mode: row.mode,
				from,
				to: row.status,
				driverId: row.driver?.id ?? previousDriverId,
			} satisfies StatusChangedEvent);
			if (result.eventId) {
				this.hint(ORDER_EVENTS.rideEventRecorded, { orderId: row.id, eventId: result.eventId, kind: "status" } satisfies RideEventRecordedEvent);
			}
		},

		hint(this: OrdersThis, event: string, payload: unknown) {
			// Fire-and-forget: the tables are the truth, so a lost hint only costs latency.
			Promise.resolve()
				.then(() => this.broker.emit(event, payload))
				.catch((err: unknown) => this.logger.warn(`Could not emit ${event}`, (err as Error)?.message));
		},
	},

	created(this: OrdersThis) {
		useServiceSettings(this, readOrdersSettings);
		this.webhookPolicy = {
			allowPrivate: this.settings.webhookAllowPrivate,
			ports: this.settings.webhookPorts,
			resolveAll: webhookDnsResolver(serviceEnv(this)),
		};
		// The DB mixin's created() ran first: the pool is there.
		this.orders = new OrdersRepo(this.db);
		this.keys = new IdempotencyRepo(this.db, this.settings.idempotencyRunningTimeoutMs);
		const retentionRepo = new OrdersRetentionRepo(this.db);
		this.retention = new RetentionPass<FinishedKey>({
			name: "finished rides",
			settings: this.settings,
			logger: this.logger,
			removeBatch: (days, limit, after) =>
				removeFinishedOrders(
					{
						repo: retentionRepo,
						undeliveredOrders: async (orderIds) =>
							(await this.broker.call<{ orderIds: string[] }, { orderIds: string[] }>("notifications.undeliveredOrders", { orderIds })).orderIds,
					},
					days,
					limit,
					after,
				),
		});
		// Up to 4 statements out at once: the pool is shared with the process's other services.
		this.newOrders = new StatementBatcher(
			(orders) => this.orders.insertOrders(orders),
			(o) => `${o.riderId}\u0000${o.mode}`,
			{ maxBatch: 100, maxInFlight: 4 },
		);
		this.schedule = new ScheduleLoop({
			orders: this.orders,
			settings: this.settings.schedule,
			onMoved: (from, result) => this.announceMove(from.status, result, null),
			log: this.logger,
		});
	},

	async started(this: OrdersThis) {
		this.cleanupTimer = setInterval(() => {
			this.keys.deleteExpired().catch((err: unknown) => this.logger.warn("Idempotency key cleanup failed", (err as Error)?.message));
		}, this.settings.idempotencyCleanupMs);
		this.cleanupTimer.unref();
		this.retention.start();
		this.schedule.start();
	},

	async stopped(this: OrdersThis) {
		if (this.cleanupTimer) clearInterval(this.cleanupTimer);
		await this.schedule.stop();
		await this.retention.stop();
	},
};

export default OrdersService;
