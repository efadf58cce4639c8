import type { Context, Service } from "moleculer";
import {
	METADATA_MAX_BYTES,
	ORDER_EVENTS,
	ORDERS_RETRY_AFTER_SECONDS,
	type CreateOrderParams,
	type CreateOrderResult,
	type OrderCreatedEvent,
	type OrdersMeta,
	type RideEventRecordedEvent,
} from "../../contracts/orders";
import type { Place, Point } from "../../contracts/common";
import type { PricedTrip } from "../../contracts/pricing";
import type { Rider } from "../../contracts/riders";
import { ApiError, validationError } from "../../lib/errors";
import { checkPickupAt, dispatchAtOf, type ScheduleSettings } from "../../lib/schedule";
import { newId } from "../../lib/ids";
import { assertWebhookUrlAllowed, type WebhookUrlPolicy } from "../../lib/webhook-url";
import { bindLogContext } from "../../middlewares/observability.middleware";
import { checkIdempotencyKey, requestHash } from "./idempotency";
import { keyTakenOver, type IdempotencyClaim, type IdempotencyRepo } from "./idempotency.repo";
import { generateOtp, majorToPaise, serialisedBytes, toOrder, type OrderRow } from "./order-view";
import { modeOf, sandboxRefusal } from "./modes";
import type { NewOrder, OrdersRepo } from "./orders.repo";
import { callService } from "./remote-calls";

type Logger = Service["logger"];

/**
 * The create-order use case: checks, the Idempotency-Key claim, the price
 * (a verified quote or a fresh one), the rider, and the insert that the
 * partial unique index judges ("one active ride per rider"): losing that race
 * answers the rider's active ride with `200 USER_HAVE_ACTIVE_RIDE`.
 */

/** How often create-order re-reads after losing the active-ride race to a ride that ended meanwhile. */
const ACTIVE_RIDE_ATTEMPTS = 5;

export interface CreateOrderDeps {
	orders: OrdersRepo;
	keys: IdempotencyRepo;
	webhookPolicy: WebhookUrlPolicy;
	logger: Logger;
	/** Inserts an order without an Idempotency-Key (concurrent ones may share a statement): the row, or null when the rider has an active ride. */
	insertNew(order: NewOrder): Promise<OrderRow | null>;
	/** Fire-and-forget broker event (a hint: the tables are the truth). */
	hint(event: string, payload: unknown): void;
	/** The booking window and dispatch lead of scheduled rides. */
	schedule: Pick<ScheduleSettings, "minLeadMs" | "maxAheadMs" | "dispatchLeadMs">;
	/** A scheduled ride was booked, due at `dispatchAtMs`: arm the schedule (here and on the other instances). */
	scheduled(dispatchAtMs: number): void;
	now?: () => number;
}

export interface CreateOrderAnswer {
	status: number;
	body: CreateOrderResult;
}

/** orders.create: the answer and the HTTP status the gateway relays (201 new, 200 active ride or replay). */
export async function createOrder(deps: CreateOrderDeps, ctx: Context<CreateOrderParams, OrdersMeta>): Promise<CreateOrderAnswer> {
	const partnerId = ctx.meta.partnerId!;
	const mode = modeOf(ctx.meta);
	const keyCheck = checkIdempotencyKey(ctx.meta.idempotencyKey);
	if (!keyCheck.ok) throw validationError(keyCheck.field, keyCheck.message);
	if (ctx.params.metadata !== undefined && serialisedBytes(ctx.params.metadata) > METADATA_MAX_BYTES) {
		throw validationError("metadata", `metadata must be at most ${METADATA_MAX_BYTES} bytes serialised`);
	}
	const sandbox = sandboxRefusal(mode, ctx.params.metadata);
	if (sandbox) throw validationError(sandbox.field, sandbox.message);

	const key = ctx.meta.idempotencyKey;
	if (key === undefined || key === null) return placeOrder(deps, ctx, null);

	const outcome = await deps.keys.claim(partnerId, mode, key, requestHash(ctx.params));
	if (outcome.kind === "replay") return { status: outcome.status, body: outcome.body as CreateOrderResult };
	try {
		return await placeOrder(deps, ctx, outcome.claim);
	} catch (err) {
		// A call that failed leaves nothing to replay: free the key for a retry.
		await deps.keys.release(outcome.claim).catch((e: unknown) => deps.logger.warn("Could not release an idempotency key", (e as Error)?.message));
		throw err;
	}
}

async function placeOrder(deps: CreateOrderDeps, ctx: Context<CreateOrderParams, OrdersMeta>, claim: IdempotencyClaim | null): Promise<CreateOrderAnswer> {
	const p = ctx.params;
	const partnerId = ctx.meta.partnerId!;
	const mode = modeOf(ctx.meta);
	// A ride for later: its pickup time must be inside the booking window (nothing is written otherwise).
	let pickupAtMs: number | null = null;
	if (p.pickupAt !== undefined) {
		const check = checkPickupAt(p.pickupAt, (deps.now ?? Date.now)(), deps.schedule);
		if (!check.ok) throw new ApiError(check.code, check.message, { details: [{ field: "pickupAt", message: check.message }] });
		pickupAtMs = check.pickupAtMs;
	}
	await assertWebhookUrlAllowed(p.webhookURL, deps.webhookPolicy);

	const pickupPoint: Point = { lat: p.pickup.lat, lng: p.pickup.lng };
	const dropPoint: Point = { lat: p.drop.lat, lng: p.drop.lng };
	const priced =
		p.quoteId !== undefined
			? await callService<PricedTrip>(ctx, deps.logger, "pricing.verifyQuote", {
					quoteId: p.quoteId,
					serviceType: p.serviceType,
					pickup: pickupPoint,
					drop: dropPoint,
					// The quote must be for this pickup time (or, without one, for a ride now).
					...(pickupAtMs !== null ? { pickupAtSeconds: pickupAtMs / 1000 } : {}),
				})
			: await callService<PricedTrip>(ctx, deps.logger, "pricing.quote", {
					serviceType: p.serviceType,
					pickup: pickupPoint,
					drop: dropPoint,
					...(pickupAtMs !== null ? { scheduled: true } : {}),
				});

	// The rider is written only once the request is known to be good: a refused order changes nothing.
	const rider = await callService<Rider>(ctx, deps.logger, "riders.upsert", {
		partnerId,
		mode,
		name: p.user.name,
		phone: p.user.phone,
		...(p.user.email !== undefined ? { email: p.user.email } : {}),
	});
	const pickup: Place = { ...pickupPoint, ...(p.pickup.address !== undefined ? { address: p.pickup.address } : {}) };
	const drop: Place = { ...dropPoint, ...(p.drop.address !== undefined ? { address: p.drop.address } : {}) };

	for (let attempt = 0; attempt < ACTIVE_RIDE_ATTEMPTS; attempt++) {
		const order: NewOrder = {
			id: newId("ord"),
			status: pickupAtMs === null ? "searching" : "scheduled",
			partnerId,
			mode,
			riderId: rider.riderId,
			serviceType: p.serviceType,
			pickup,
			drop,
			farePaise: Number.isInteger(priced.totalAmountPaise) ? priced.totalAmountPaise! : majorToPaise(priced.totalAmount),
			currency: priced.currency || "INR",
			fareBreakdown: priced.fareBreakdown,
			distance: Math.round(priced.distance),
			duration: Math.round(priced.duration),
			quoteId: p.quoteId ?? null,
			otp: generateOtp(),
			webhookURL: p.webhookURL,
			metadata: p.metadata,
			fareTerms: priced.terms ?? null,
			pickupAt: pickupAtMs === null ? null : new Date(pickupAtMs).toISOString(),
			dispatchAt: pickupAtMs === null ? null : new Date(dispatchAtOf(pickupAtMs, deps.schedule)).toISOString(),
		};
		if (order.status === "scheduled") {
			// The insert and its `scheduled` event in one transaction (with a claim, its 201 answer too).
			const { row, claimLost, eventId } = await deps.orders.insertScheduled(order, claim, claim ? answerTemplate(order) : undefined);
			if (claimLost) throw keyTakenOver();
			if (row) {
				bindLogContext({ orderId: row.id });
				deps.hint(ORDER_EVENTS.rideEventRecorded, { orderId: row.id, eventId: eventId!, kind: "status" } satisfies RideEventRecordedEvent);
				deps.scheduled(Date.parse(order.dispatchAt!));
				return { status: 201, body: toOrder(row) };
			}
		} else {
			// One statement: the insert, and with a claim its 201 answer in the same
			// statement, so a replay can never miss an order that exists.
			const { row, claimLost } = claim
				? await deps.orders.insertOrder(order, claim, answerTemplate(order))
				: { row: await deps.insertNew(order), claimLost: false };
			if (claimLost) throw keyTakenOver();
			if (row) {
				// From here on this handler's logs (and the calls and events it makes) carry the new order's id.
				bindLogContext({ orderId: row.id });
				const body = toOrder(row);
				deps.hint(ORDER_EVENTS.created, createdEvent(row, body));
				return { status: 201, body };
			}
		}
		// The rider already has an active ride (or, booking for later, a waiting scheduled one: the
		// index said so, after its insert committed): answer that one.
		const existing = await deps.orders.findActiveForRider(rider.riderId, { partnerId, mode }, order.status === "scheduled");
		if (existing) {
			bindLogContext({ orderId: existing.id });
			const body: CreateOrderResult = { code: "USER_HAVE_ACTIVE_RIDE", ...toOrder(existing) };
			if (claim) await deps.keys.finish(claim, 200, body);
			return { status: 200, body };
		}
		// That ride ended between the conflict and the read: try the insert again.
	}
	throw new ApiError("CONFLICT", "The rider's rides kept changing; try again", { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
}

/**
 * The `orders.created` hint: the new order as inserted, everything dispatch
 * needs to mirror the ride without asking `orders.get` back (one call and one
 * query per order saved); of the metadata only its `sandbox` directive.
 */
export function createdEvent(row: OrderRow, order: Pick<CreateOrderResult, "pickup" | "drop" | "updatedAt" | "pickupAt">): OrderCreatedEvent {
	const sandbox = row.metadata !== null && typeof row.metadata === "object" ? (row.metadata as Record<string, unknown>).sandbox : undefined;
	return {
		orderId: row.id,
		partnerId: row.partner_id,
		mode: row.mode === "live" ? "live" : "test",
		serviceType: row.service_type,
		pickup: order.pickup,
		drop: order.drop,
		status: "searching",
		version: row.version,
		updatedAt: order.updatedAt,
		...(order.pickupAt !== undefined ? { pickupAt: order.pickupAt } : {}),
		...(sandbox !== undefined ? { sandbox } : {}),
	};
}

/**
 * The 201 answer of a new order without its timestamps (insertOrder adds the
 * inserted row's createdAt/updatedAt in SQL): toOrder of the row the insert
 * will return, built from the same values.
 */
export function answerTemplate(order: NewOrder): Omit<CreateOrderResult, "createdAt" | "updatedAt"> {
	const row: OrderRow = {
		id: order.id,
		partner_id: order.partnerId,
		mode: order.mode,
		rider_id: order.riderId,
		status: order.status,
		service_type: order.serviceType as OrderRow["service_type"],
		pickup: order.pickup as OrderRow["pickup"],
		drop: order.drop as OrderRow["drop"],
		fare_paise: order.farePaise,
		currency: order.currency,
		fare_breakdown: (order.fareBreakdown as OrderRow["fare_breakdown"]) ?? null,
		distance: order.distance,
		duration: order.duration,
		quote_id: order.quoteId,
		otp: order.otp,
		otp_tries: 0,
		webhook_url: order.webhookURL,
		metadata: order.metadata === undefined ? null : (JSON.parse(JSON.stringify(order.metadata)) as OrderRow["metadata"]),
		driver: null,
		driver_location: null,
		eta: null,
		version: order.status === "scheduled" ? 1 : 0,
		cancel_reason: null,
		pickup_at: order.pickupAt,
		dispatch_at: order.dispatchAt,
		created_at: new Date(0),
		updated_at: new Date(0),
	};
	const { createdAt: _c, updatedAt: _u, ...rest } = toOrder(row);
	void _c;
	void _u;
	return rest;
}
