/**
 * The contract of the notifications service (webhook delivery): the params
 * of its actions (fastest-validator schemas, written once here and used by
 * the service), the types they validate into, its replies, the payload of
 * and the webhook constants of the partner contract (the retry jitter is in
 * contracts/constants.ts). What it consumes is owned by others:
 * `orders.rideEventRecorded` (contracts/orders.ts) and `partners.signingSecret`
 * (contracts/partners.ts). Type-only plus plain data: no service code, no I/O.
 */

// ---- contract constants (API.md, "Webhooks") ---------------------------------------

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * Retries at these offsets AFTER THE FIRST TRY (the Standard Webhooks
 * schedule), each with up to 10% jitter, so a partner that is down for a day
 * still gets every event. `WEBHOOK_RETRY_SCHEDULE_MS` replaces the list.
 */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [
	5 * SECOND,
	5 * MINUTE,
	30 * MINUTE,
	2 * HOUR,
	5 * HOUR,
	10 * HOUR,
	14 * HOUR,
	20 * HOUR,
	24 * HOUR,
];

/** Deadline of one webhook try; `WEBHOOK_TIMEOUT_MS` overrides it. */
export const WEBHOOK_TIMEOUT_MS = 10 * SECOND;

/** A location event is only worth sending this long after it was made; `WEBHOOK_LOCATION_TTL_MS` overrides it. */
export const LOCATION_TTL_MS = 120 * SECOND;

/**
 * Delivery state of one event. API.md lists the first three; location events
 * may also end `superseded` (a newer event of the ride exists) or `expired`
 * (past their lifetime) and are then never sent, by design.
 */
export const DELIVERY_STATES = ["pending", "delivered", "failed", "superseded", "expired"] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

/** What a ride event is about: a status change or a driver position. */
export type RideEventKind = "status" | "location";

// ---- notifications.deliveryStates (orders' /ride/events) ---------------------------

export const deliveryStatesParams = {
	eventIds: { type: "array", items: { type: "string", min: 1, max: 100 }, max: 10_000 },
} as const;
export interface DeliveryStatesParams {
	eventIds: string[];
}
export interface EventDeliveryState {
	state: DeliveryState;
	attempts: number;
	lastStatus: number | null;
	/** Error class of the last failed try: TIMEOUT, CONNECTION, DNS, BLOCKED_ADDRESS, HTTP_3XX, HTTP_4XX, HTTP_5XX. */
	lastError: string | null;
	lastAttemptAt: string | null;
}
/** By event id; unknown or not yet ingested ids are `pending` with no tries. */
export type DeliveryStatesResult = Record<string, EventDeliveryState>;

// ---- notifications.undeliveredOrders (orders' retention pass) ---------------------

/**
 * Which of these rides may not be removed yet: a ride with an event whose
 * delivery is still pending, or an event notifications has not taken in yet.
 * Delivered, failed (given up), superseded and expired events hold nothing.
 */
export const undeliveredOrdersParams = {
	orderIds: { type: "array", items: { type: "string", min: 1, max: 100 }, max: 10_000 },
} as const;
export interface UndeliveredOrdersParams {
	orderIds: string[];
}
export interface UndeliveredOrdersResult {
	orderIds: string[];
}

// ---- notifications.replay (operators) ----------------------------------------------

export const replayParams = {
	eventId: { type: "string", min: 1, max: 100 },
} as const;
export interface ReplayParams {
	eventId: string;
}
export interface ReplayResult {
	eventId: string;
	replayed: boolean;
	state: DeliveryState;
}

// ---- notifications.replayFailed (operators) ----------------------------------------

export const replayFailedParams = {
	partnerId: { type: "string", min: 1, max: 100 },
	since: { type: "date", convert: true },
} as const;
export interface ReplayFailedParams {
	partnerId: string;
	since: Date;
}
export interface ReplayFailedResult {
	partnerId: string;
	since: string;
	replayed: number;
	eventIds: string[];
}

// ---- notifications.stats (operators) -----------------------------------------------

export interface StatsResult {
	states: Record<DeliveryState, number>;
	inFlight: number;
	oldestPendingAgeSeconds: number | null;
	attemptsLastHour: Record<string, number>;
	instance: { id: string; inFlight: number };
}
