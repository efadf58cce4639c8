/**
 * The orders service's contract: the params of its actions (the exact
 * fastest-validator schemas the actions use, and the OpenAPI document is
 * generated from), the types they validate into, its replies, the webhook
 * body it stores, the broker events it emits, and the ride statuses.
 * Type-only plus plain data: no service code, no I/O.
 */
import { etaRule, locationRule, orderIdRule, pickupAtRule, placeRule, serviceTypeRule, type DriverLocation, type Place, type ServiceType } from "./common";
import { E164_PATTERN } from "./riders";
import { SERVICE_RETRY_AFTER_SECONDS } from "./constants";
import type { EventDeliveryState } from "./notifications";
import type { KeyMode } from "./partners";

// ---- ride statuses (API.md, "Ride states") -----------------------------------------

export const RIDE_STATUSES = ["scheduled", "searching", "accepted", "arrived", "started", "dropped", "customer_cancelled", "no_driver_found"] as const;
export type RideStatus = (typeof RIDE_STATUSES)[number];

/** A ride dispatch works on (one per rider and mode); a `scheduled` ride waits for its dispatch time and is not among them. */
export const ACTIVE_STATUSES = ["searching", "accepted", "arrived", "started"] as const satisfies readonly RideStatus[];
export const TERMINAL_STATUSES = ["dropped", "customer_cancelled", "no_driver_found"] as const satisfies readonly RideStatus[];
/** Statuses in which the driver's location is tracked and location events go out. */
export const MOVING_STATUSES = ["accepted", "arrived", "started"] as const satisfies readonly RideStatus[];
export type ActiveStatus = (typeof ACTIVE_STATUSES)[number];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** Who asks for a move: the partner (cancel), the driver (via dispatch) or the platform itself (dispatch timeouts). */
export type Actor = "partner" | "driver" | "system";
/** The actors of internal moves (orders.transition); partners cancel through orders.cancel only. */
export const INTERNAL_ACTORS = ["driver", "system"] as const satisfies readonly Actor[];
export type InternalActor = (typeof INTERNAL_ACTORS)[number];

/** The webhook statuses: every ride status a partner hears about, plus driver positions. */
export type WebhookStatus = RideStatus | "location_updated";

// ---- contract constants ------------------------------------------------------------

/** `metadata` is at most this many UTF-8 bytes serialised (API.md: "4 KB serialised"). */
export const METADATA_MAX_BYTES = 4096;
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;
/** How long a finished create-order response is replayed for its Idempotency-Key. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** Seconds a partner is told to wait (`Retry-After`) after a retryable orders conflict. */
export const ORDERS_RETRY_AFTER_SECONDS = SERVICE_RETRY_AFTER_SECONDS;

// ---- partner actions (the /ride/* bodies) ------------------------------------------

// Partner params are strict: an unknown or misspelled field (`quoteID`) is a
// 400 VALIDATION_ERROR naming it, never silently dropped. `metadata` stays free-form.

/** POST /ride/create-order (orders.create). */
export const createOrderParams = {
	$$strict: true,
	user: {
		type: "object",
		strict: true,
		props: {
			name: { type: "string", trim: true, min: 1, max: 200 },
			phone: { type: "string", pattern: E164_PATTERN, messages: { stringPattern: "user.phone must be an E.164 number such as +919812345678" } },
			email: { type: "email", mode: "precise", max: 254, optional: true },
		},
	},
	serviceType: serviceTypeRule,
	pickup: placeRule,
	drop: placeRule,
	webhookURL: { type: "string", min: 1, max: 2048 },
	quoteId: { type: "string", min: 1, max: 2048, optional: true },
	/** A scheduled ride's pickup time (lib/schedule.ts checks the format and the window). */
	pickupAt: pickupAtRule,
	metadata: { type: "object", optional: true },
} as const;
export interface CreateOrderParams {
	user: { name: string; phone: string; email?: string };
	serviceType: ServiceType;
	pickup: Place;
	drop: Place;
	webhookURL: string;
	quoteId?: string;
	/** ISO 8601 with an offset; absent = a ride now. */
	pickupAt?: string;
	metadata?: Record<string, unknown>;
}

// ---- cancellation policy (API.md, "Cancellation policy") ---------------------------

/** Why a partner cancels (`reasonCode`; required with `confirmFee`). */
export const CANCEL_REASON_CODES = [
	"RIDER_CHANGED_PLANS",
	"DRIVER_TOO_FAR",
	"DRIVER_NOT_MOVING",
	"DRIVER_ASKED_TO_CANCEL",
	"WRONG_PICKUP",
	"FOUND_OTHER_RIDE",
	"PRICE_TOO_HIGH",
	"OTHER",
] as const;
export type CancelReasonCode = (typeof CANCEL_REASON_CODES)[number];

/**
 * Which rule of the policy set a cancel's fee: free while the ride is not yet
 * with a driver, in the grace period after acceptance or while the driver is
 * far; the service type's fixed fee once the driver is near or has arrived;
 * the fare for a plain cancel of a started ride.
 */
export const CANCELLATION_RULES = ["searching", "scheduled", "grace_period", "driver_far", "driver_near", "driver_arrived", "ride_started"] as const;
export type CancellationRule = (typeof CANCELLATION_RULES)[number];

/** Cancels within this many seconds of the driver's acceptance are free (`CANCEL_GRACE_SECONDS`). */
export const DEFAULT_CANCEL_GRACE_SECONDS = 120;
/** The driver counts as near (the fee applies) within this distance of the pickup … */
export const DRIVER_NEAR_METRES = 500;
/** … or when its ETA to the pickup is at most this. */
export const DRIVER_NEAR_ETA_SECONDS = 120;

/** POST /ride/cancel (orders.cancel): a plain cancel, a preview (`preview: true`, writes nothing) or a confirmed cancel (`confirmFee` + `reasonCode`). */
export const cancelParams = {
	$$strict: true,
	orderId: orderIdRule,
	reason: { type: "string", max: 200, optional: true },
	preview: { type: "boolean", optional: true },
	confirmFee: { type: "number", min: 0, max: 1_000_000, optional: true },
	reasonCode: { type: "enum", values: [...CANCEL_REASON_CODES], optional: true },
} as const;
export interface CancelParams extends OrderIdParams {
	reason?: string;
	/** A dry run: the fee a cancel now would cost; nothing is written. */
	preview?: boolean;
	/** The fee (major units) the partner accepted, usually from a preview: the cancel happens only while the fee is at most this. */
	confirmFee?: number;
	reasonCode?: CancelReasonCode;
}

/** A cancel's fee: major units (≤ 2 decimals), and the rule that set it. */
export interface CancellationFee {
	amount: number;
	currency: string;
	rule: CancellationRule;
}

// ---- final fare (API.md, "Final fare") ---------------------------------------------

/** A ride dropped within this distance of its booked drop pays its quote (a longer route never costs more). */
export const DROP_TOLERANCE_METRES = 500;
export const FINAL_FARE_BASES = ["quote", "metered"] as const;
export type FinalFareBasis = (typeof FINAL_FARE_BASES)[number];

/** What the ride costs once dropped: the trip (quoted or metered) plus waiting at the pickup. */
export interface FinalFare {
	/** Major units, ≤ 2 decimals: `tripFare` + `waitingCharge`. */
	totalAmount: number;
	currency: string;
	/** `quote`: dropped at the booked drop, the quote holds; `metered`: ended elsewhere, metered from the distance driven (never above the quote). */
	basis: FinalFareBasis;
	/** The fare booked (the order's `fare.totalAmount`). */
	quotedAmount: number;
	tripFare: number;
	waitingCharge: number;
	/** How the trip fare was made: the quote's breakdown, or the metered one. */
	fareBreakdown: {
		baseFare: number;
		distanceFare: number;
		timeFare: number;
		surgeMultiplier: number;
		tax: number;
	};
	/** Metres driven from the start to the drop, as dispatch measured them from the driver's positions. */
	distance: number;
	/** Seconds from `started` to `dropped`. */
	duration: number;
	/** Seconds from `arrived` to `started`, and how many of them were charged. */
	waitingSeconds: number;
	chargedWaitingSeconds: number;
}

/** POST /ride/feedback (orders.feedback). */
export const feedbackParams = {
	$$strict: true,
	orderId: orderIdRule,
	rating: { type: "number", integer: true, min: 1, max: 5 },
	comment: { type: "string", max: 1000, optional: true },
	tags: { type: "array", items: { type: "string", max: 100 }, max: 50, optional: true },
} as const;
export interface FeedbackParams extends OrderIdParams {
	rating: number;
	comment?: string;
	tags?: string[];
}

/** POST /ride/status (orders.status). */
export const statusParams = { $$strict: true, orderId: orderIdRule } as const;
/** `/ride/events` pages: this many events unless `limit` says otherwise, at most the maximum. */
export const EVENTS_PAGE_DEFAULT = 100;
export const EVENTS_PAGE_MAX = 1000;
/**
 * A `/ride/events` page's events, serialised, stay within this many bytes (API.md): a page is cut early (with
 * `nextCursor` after its last event) so that it always fits one bus message (NATS `max_payload`, 1 MiB by default),
 * whatever the events' `metadata`. A page always holds at least one event.
 */
export const EVENTS_PAGE_MAX_BYTES = 512 * 1024;
/** POST /ride/events (orders.events): one page of the ride's events, from the start or after `cursor`. */
export const eventsParams = {
	$$strict: true,
	orderId: orderIdRule,
	cursor: { type: "string", min: 1, max: 200, optional: true },
	limit: { type: "number", integer: true, min: 1, max: EVENTS_PAGE_MAX, optional: true },
} as const;
export interface EventsParams extends OrderIdParams {
	/** `nextCursor` of the previous page; absent = the first page. */
	cursor?: string;
	/** Events per page, 1..1000 (default 100). */
	limit?: number;
}
export interface OrderIdParams {
	orderId: string;
}

/** Meta the gateway sets: the partner, the request id, the Idempotency-Key header, and the HTTP status it relays. */
export interface OrdersMeta {
	partnerId?: string;
	/** The API key's mode; absent = `test`. Partner calls see only their mode's orders. */
	mode?: KeyMode;
	requestId?: string;
	idempotencyKey?: string;
	$statusCode?: number;
}

// ---- internal actions (dispatch, the simulated fleet, operators) -------------------

/** orders.get: one order as services see it. */
export const getOrderParams = { orderId: orderIdRule } as const;
/** orders.riderOtp: the simulated fleet stands in for the rider telling the driver the OTP (test rides only; 403 FORBIDDEN for a live ride). */
export const riderOtpParams = { orderId: orderIdRule } as const;

/** orders.transition: a ride's status move on a driver's or the platform's behalf. */
export const transitionParams = {
	orderId: orderIdRule,
	to: { type: "enum", values: [...RIDE_STATUSES] },
	from: { type: "enum", values: [...RIDE_STATUSES], optional: true },
	actor: { type: "enum", values: [...INTERNAL_ACTORS], optional: true },
	driver: {
		type: "object",
		optional: true,
		props: {
			id: { type: "string", min: 1, max: 100 },
			name: { type: "string", min: 1, max: 200, optional: true },
			phone: { type: "string", min: 1, max: 32, optional: true },
			vehicleNumber: { type: "string", min: 1, max: 32, optional: true },
			location: { ...locationRule, optional: true },
		},
	},
	location: { ...locationRule, optional: true },
	eta: etaRule,
	otp: { type: "string", max: 16, optional: true },
	reason: { type: "string", max: 200, optional: true },
	/** `dropped` only: metres driven since `started`, as dispatch accumulated them from the driver's positions. */
	drivenMeters: { type: "number", integer: true, min: 0, optional: true },
} as const;
export interface TransitionDriver {
	id: string;
	name?: string;
	phone?: string;
	vehicleNumber?: string;
	location?: DriverLocation;
}
export interface TransitionParams {
	orderId: string;
	to: RideStatus;
	from?: RideStatus;
	/** Who asks; by default the driver, except `no_driver_found`, which is the platform's. */
	actor?: InternalActor;
	driver?: TransitionDriver;
	location?: DriverLocation;
	eta?: number | null;
	otp?: string;
	reason?: string;
	drivenMeters?: number;
}

/** orders.recordLocation: the driver's position while the ride moves. */
export const recordLocationParams = {
	orderId: orderIdRule,
	location: locationRule,
	eta: etaRule,
} as const;
export interface RecordLocationParams {
	orderId: string;
	location: DriverLocation;
	eta?: number | null;
}

/** orders.listActive: one page of the active rides, oldest first (dispatch's reconciliation sweep pages through all of them). */
export const listActiveParams = {
	status: { type: "enum", values: [...ACTIVE_STATUSES], optional: true },
	limit: { type: "number", integer: true, min: 1, max: 10_000, optional: true },
	/** `nextCursor` of the previous page; absent = from the oldest. */
	after: { type: "string", min: 1, max: 200, optional: true },
} as const;
export interface ListActiveParams {
	status?: ActiveStatus;
	limit?: number;
	after?: string;
}
export interface ListActiveResult {
	orders: InternalOrder[];
	/** Pass as `after` for the next page; null after the last. */
	nextCursor: string | null;
}

/** Where an active ride stands: what dispatch's sweep compares with its mirror (orders.listActiveStates). */
export interface ActiveRideState {
	orderId: string;
	status: ActiveStatus;
	/** The assigned driver's id; null while searching. */
	driverId: string | null;
}
/** orders.listActiveStates: orders.listActive's pages (same params, same cursor) with each ride's state only. */
export interface ListActiveStatesResult {
	rides: ActiveRideState[];
	/** Pass as `after` for the next page; null after the last. */
	nextCursor: string | null;
}

/** orders.unlockOtp (operators): a fresh set of OTP tries for an `arrived` ride whose start was locked by wrong OTPs. */
export const unlockOtpParams = { orderId: orderIdRule } as const;

// ---- replies -----------------------------------------------------------------------

/** The driver as stored on the order; the location is reported beside it. */
export interface DriverInfo {
	id: string;
	name: string;
	phone: string;
	vehicleNumber: string;
}
export interface OrderDriver extends DriverInfo {
	location: DriverLocation | null;
}
export interface Fare {
	totalAmount: number;
	currency: string;
}

/** The contract's Order (create-order, status). */
export interface Order {
	orderId: string;
	otp: string;
	status: RideStatus;
	serviceType: ServiceType;
	pickup: Place;
	drop: Place;
	fare: Fare;
	distance: number;
	duration: number;
	driver: OrderDriver | null;
	metadata: Record<string, unknown> | null;
	/** A scheduled ride's pickup time (ISO 8601, UTC); absent for a ride booked for now. */
	pickupAt?: string;
	createdAt: string;
	updatedAt: string;
	/** Once `customer_cancelled`: what the cancel cost. */
	cancellationFee?: CancellationFee;
	/** Once `dropped`: what the ride cost. */
	finalFare?: FinalFare;
	/** While `accepted` (and `arrived`, 0): seconds until the driver reaches the pickup, as last estimated. */
	etaToPickupSeconds?: number;
}

/** What services (dispatch, operators) get from orders.get/transition/recordLocation/listActive: every field but the OTP, plus ownership and version. */
export interface InternalOrder extends Omit<Order, "otp"> {
	partnerId: string;
	/** The mode of the key that booked it: `test` rides the sandbox may drive, `live` rides real drivers only. */
	mode: KeyMode;
	riderId: string;
	version: number;
	/** Last known driver location (also inside `driver`), null before a driver is assigned. */
	location: DriverLocation | null;
	/** Seconds to the pickup (before arrived) or to the drop (after started), as dispatch last reported. */
	eta: number | null;
	webhookURL: string;
	quoteId: string | null;
	fareBreakdown: Record<string, unknown> | null;
	cancelReason: string | null;
}

/** 201 with the new Order, or 200 with the rider's active ride and this code. */
export type CreateOrderResult = Order | (Order & { code: "USER_HAVE_ACTIVE_RIDE" });

export interface CancelResult {
	code: "RIDE_CANCELLED";
	orderId: string;
	status: "customer_cancelled";
	/** What the cancel cost (absent only for rides cancelled before fees were recorded). */
	cancellationFee?: CancellationFee;
}

/** `preview: true`: what a cancel now would cost; nothing changed. */
export interface CancelPreviewResult {
	code: "CANCEL_PREVIEW";
	orderId: string;
	/** The ride's status now (still active). */
	status: RideStatus;
	cancellationFee: CancellationFee;
}

export interface FeedbackResult {
	code: "FEEDBACK_SUBMITTED";
	orderId: string;
}

export interface RiderOtpResult {
	orderId: string;
	otp: string;
}

/** The webhook body (API.md, "Webhooks"), stored verbatim in `ride_events.payload`. */
export interface RideEventPayload {
	eventId: string;
	orderId: string;
	status: WebhookStatus;
	sequence: number;
	occurredAt: string;
	/** The ride's mode (the booking key's): a test ride's webhooks are signed with the test secret. */
	mode: KeyMode;
	driver?: OrderDriver;
	location?: DriverLocation;
	eta?: number;
	/** A scheduled ride's pickup time; absent for a ride booked for now. */
	pickupAt?: string;
	/** `accepted`, `arrived` (0) and their `location_updated` events: seconds until the driver reaches the pickup. */
	etaToPickupSeconds?: number;
	/** `customer_cancelled`: what the cancel cost. */
	cancellationFee?: CancellationFee;
	/** `dropped`: what the ride cost. */
	finalFare?: FinalFare;
	metadata: Record<string, unknown> | null;
}

/** A webhook event's delivery as notifications reports it (pending until notifications knows better). */
export type EventDelivery = Pick<EventDeliveryState, "state" | "attempts" | "lastStatus" | "lastError">;
export interface RideEventView {
	eventId: string;
	sequence: number;
	status: WebhookStatus;
	occurredAt: string;
	payload: RideEventPayload;
	delivery: EventDelivery;
}
export interface EventsResult {
	/** In sequence order, at most `limit`. */
	events: RideEventView[];
	/** Pass as `cursor` for the next page; null when this page is the last. */
	nextCursor: string | null;
}

// ---- broker events orders emits (hints only: the tables are the truth) -------------

export const ORDER_EVENTS = {
	created: "orders.created",
	/** A scheduled ride was booked or is due: every orders instance re-arms its schedule timer. */
	scheduleChanged: "orders.scheduleChanged",
	statusChanged: "orders.statusChanged",
	rideEventRecorded: "orders.rideEventRecorded",
} as const;

/**
 * `orders.created`: a new ride is searching (booked now, or a scheduled ride whose dispatch started). It carries the order's
 * snapshot as inserted, so dispatch mirrors the ride in one statement
 * instead of asking `orders.get` for every new order.
 */
export interface OrderCreatedEvent {
	orderId: string;
	partnerId: string;
	mode: KeyMode;
	serviceType: ServiceType;
	pickup: Place;
	drop: Place;
	/** Always `searching`: the status the order was inserted with. */
	status: "searching";
	/** The order's version (0) and `updatedAt` at the insert: the snapshot dispatch's mirror records, so an older one never overwrites a newer one. */
	version: number;
	updatedAt: string;
	/** A scheduled ride's pickup time: its search ends before it (dispatch's deadline). */
	pickupAt?: string;
	/** `metadata.sandbox` as the partner sent it, when present (dispatch decides whether it applies); the rest of the metadata stays with orders. */
	sandbox?: unknown;
}
/** `orders.scheduleChanged`: the earliest dispatch time it knows of (Unix ms). */
export interface ScheduleChangedEvent {
	dispatchAt: number;
}
/** `orders.statusChanged`: a committed status move (dispatch frees drivers on it). */
export interface StatusChangedEvent {
	orderId: string;
	partnerId: string;
	mode: KeyMode;
	from: RideStatus;
	to: RideStatus;
	driverId: string | null;
}
/** `orders.rideEventRecorded`: a new `ride_events` row (notifications wakes up on it). */
export interface RideEventRecordedEvent {
	orderId: string;
	eventId: string;
	kind: "status" | "location";
}
