import { randomInt } from "node:crypto";
import type {
	CancellationFee,
	CancellationRule,
	EventDelivery,
	FinalFare,
	DriverInfo,
	OrderDriver,
	InternalOrder,
	Order,
	RideEventPayload,
	RideEventView,
	RideStatus,
	WebhookStatus,
} from "../../contracts/orders";
import type { DriverLocation, Place, ServiceType } from "../../contracts/common";
import { OTP_DIGITS } from "../../contracts/constants";
import type { KeyMode } from "../../contracts/partners";
import type { FareTerms } from "../../contracts/pricing";

/**
 * Pure views of an order: the database row turned into the contract's Order
 * (create-order, status), the InternalOrder other services get, and the
 * webhook body stored in `ride_events.payload` (shapes in contracts/orders.ts).
 */

/** One row of `orders`, as PostgreSQL returns it. */
export interface OrderRow {
	id: string;
	partner_id: string;
	/** The booking key's mode (migration 003). */
	mode: KeyMode;
	rider_id: string;
	status: RideStatus;
	service_type: ServiceType;
	pickup: Place;
	drop: Place;
	fare_paise: number;
	currency: string;
	fare_breakdown: Record<string, unknown> | null;
	distance: number;
	duration: number;
	quote_id: string | null;
	otp: string;
	/** OTP tries made on this order (services/orders/otp.ts). */
	otp_tries: number;
	webhook_url: string;
	metadata: Record<string, unknown> | null;
	driver: DriverInfo | null;
	driver_location: DriverLocation | null;
	eta: number | null;
	version: number;
	cancel_reason: string | null;
	/** A scheduled ride's pickup time and when its dispatch starts (migration 007); null for a ride booked now. */
	pickup_at?: Date | string | null;
	dispatch_at?: Date | string | null;
	created_at: Date | string;
	updated_at: Date | string;
	// Orders migration 008 (absent on rows read before it, null on rides booked before it).
	/** The terms the ride was booked on (final-fare.ts, cancel-policy.ts). */
	fare_terms?: FareTerms | null;
	/** When the current driver accepted, arrived at the pickup, started the ride. */
	accepted_at?: Date | string | null;
	arrived_at?: Date | string | null;
	started_at?: Date | string | null;
	/** Once cancelled: what the cancel cost and the policy rule that said so. */
	cancellation_fee_paise?: number | null;
	cancellation_rule?: CancellationRule | null;
	cancel_reason_code?: string | null;
	/** Once dropped: the final fare as presented. */
	final_fare?: FinalFare | null;
}

/** OTP_DIGITS (4) digits from a cryptographic random source, leading zeros kept. */
export function generateOtp(): string {
	return String(randomInt(0, 10 ** OTP_DIGITS)).padStart(OTP_DIGITS, "0");
}

/** Money is integer paise in the database and major units (≤ 2 decimals) in every response. */
export function paiseToMajor(paise: number): number {
	return Math.round(paise) / 100;
}

export function majorToPaise(amount: number): number {
	return Math.round(amount * 100);
}

function iso(value: Date | string): string {
	return (value instanceof Date ? value : new Date(value)).toISOString();
}

function place(p: Place): Place {
	const out: Place = { lat: p.lat, lng: p.lng };
	if (typeof p.address === "string") out.address = p.address;
	return out;
}

function location(l: DriverLocation | null | undefined): DriverLocation | null {
	if (!l) return null;
	const out: DriverLocation = { lat: l.lat, lng: l.lng };
	if (typeof l.heading === "number") out.heading = l.heading;
	return out;
}

export function driverView(row: Pick<OrderRow, "driver" | "driver_location">): OrderDriver | null {
	if (!row.driver) return null;
	const d = row.driver;
	return { id: d.id, name: d.name, phone: d.phone, vehicleNumber: d.vehicleNumber, location: location(row.driver_location) };
}

/** What the cancel cost, once cancelled; undefined for rides cancelled before the policy recorded fees. */
export function cancellationFeeOf(row: Pick<OrderRow, "cancellation_fee_paise" | "cancellation_rule" | "currency">): CancellationFee | undefined {
	if (row.cancellation_fee_paise === null || row.cancellation_fee_paise === undefined || !row.cancellation_rule) return undefined;
	return { amount: paiseToMajor(row.cancellation_fee_paise), currency: row.currency, rule: row.cancellation_rule };
}

/** Seconds until the driver reaches the pickup: the last ETA while accepted, 0 once arrived; undefined otherwise. */
export function etaToPickup(row: Pick<OrderRow, "status" | "eta">): number | undefined {
	if (row.status === "arrived") return 0;
	if (row.status === "accepted" && typeof row.eta === "number") return row.eta;
	return undefined;
}

/** The fields the policy adds to an Order or a webhook for the ride's status (ETA to the pickup, cancellation fee, final fare). */
function policyFields(row: OrderRow, status: string): Pick<Order, "etaToPickupSeconds" | "cancellationFee" | "finalFare"> {
	const out: Pick<Order, "etaToPickupSeconds" | "cancellationFee" | "finalFare"> = {};
	const eta = etaToPickup(row);
	if (eta !== undefined && (status === row.status || status === "location_updated")) out.etaToPickupSeconds = eta;
	const fee = status === "customer_cancelled" ? cancellationFeeOf(row) : undefined;
	if (fee) out.cancellationFee = fee;
	if (status === "dropped" && row.final_fare) out.finalFare = row.final_fare;
	return out;
}

export function toOrder(row: OrderRow): Order {
	return {
		orderId: row.id,
		otp: row.otp,
		status: row.status,
		serviceType: row.service_type,
		pickup: place(row.pickup),
		drop: place(row.drop),
		fare: { totalAmount: paiseToMajor(row.fare_paise), currency: row.currency },
		distance: row.distance,
		duration: row.duration,
		driver: driverView(row),
		metadata: row.metadata ?? null,
		...(row.pickup_at ? { pickupAt: iso(row.pickup_at) } : {}),
		createdAt: iso(row.created_at),
		updatedAt: iso(row.updated_at),
		...policyFields(row, row.status),
	};
}

export function toInternalOrder(row: OrderRow): InternalOrder {
	const { otp: _otp, ...order } = toOrder(row);
	void _otp;
	return {
		...order,
		partnerId: row.partner_id,
		mode: row.mode === "live" ? "live" : "test",
		riderId: row.rider_id,
		version: row.version,
		location: location(row.driver_location),
		eta: row.eta ?? null,
		webhookURL: row.webhook_url,
		quoteId: row.quote_id ?? null,
		fareBreakdown: row.fare_breakdown ?? null,
		cancelReason: row.cancel_reason ?? null,
	};
}

/**
 * The webhook body of one event, built from the order row as the same
 * transaction left it: `driver` once one is assigned, the latest `location`,
 * `eta` when known, and always the ride's `mode` and the partner's `metadata`.
 */
export function buildEventPayload(input: {
	eventId: string;
	row: OrderRow;
	status: RideEventPayload["status"];
	sequence: number;
	occurredAt: Date | string;
}): RideEventPayload {
	const { row } = input;
	const payload: RideEventPayload = {
		eventId: input.eventId,
		orderId: row.id,
		status: input.status,
		sequence: input.sequence,
		occurredAt: iso(input.occurredAt),
		mode: row.mode === "live" ? "live" : "test",
		metadata: row.metadata ?? null,
	};
	const driver = driverView(row);
	if (driver) payload.driver = driver;
	const loc = location(row.driver_location);
	if (loc) payload.location = loc;
	if (typeof row.eta === "number") payload.eta = row.eta;
	if (row.pickup_at) payload.pickupAt = iso(row.pickup_at);
	// Before the metadata, so the contract's fields keep their order (metadata last).
	const { metadata, ...rest } = payload;
	return { ...rest, ...policyFields(row, input.status), metadata };
}

/** Size of a JSON value as sent (UTF-8 bytes of its serialisation): the contract's "4 KB serialised" limit. */
export function serialisedBytes(value: unknown): number {
	return Buffer.byteLength(JSON.stringify(value) ?? "", "utf8");
}

/**
 * The delivery states notifications.deliveryStates answered, by event id.
 * Accepts either a map keyed by eventId or a list of `{ eventId, … }`.
 */
export function deliveryStatesById(answer: unknown): Map<string, Partial<EventDelivery>> {
	const states = new Map<string, Partial<EventDelivery>>();
	if (Array.isArray(answer)) {
		for (const item of answer as Array<Partial<EventDelivery> & { eventId?: string }>) {
			if (item && typeof item.eventId === "string") states.set(item.eventId, item);
		}
	} else if (answer && typeof answer === "object") {
		for (const [id, item] of Object.entries(answer as Record<string, Partial<EventDelivery>>)) {
			if (item && typeof item === "object") states.set(id, item);
		}
	}
	return states;
}

/** One `ride_events` row as /ride/events lists it; an event notifications does not know yet is pending. */
export function toRideEventView(
	row: { id: string; sequence: number; status: WebhookStatus; occurred_at: Date | string; payload: RideEventPayload; mode?: KeyMode },
	state: Partial<EventDelivery> | undefined,
): RideEventView {
	return {
		eventId: row.id,
		sequence: row.sequence,
		status: row.status,
		occurredAt: iso(row.occurred_at),
		// Events stored before payloads carried the mode get it from their row (orders migration 004).
		payload: withMode(row.payload, row.mode),
		delivery: {
			state: state?.state ?? "pending",
			attempts: state?.attempts ?? 0,
			lastStatus: state?.lastStatus ?? null,
			lastError: state?.lastError ?? null,
		},
	};
}

/** The payload with its ride's `mode`: stored payloads from before modes lack it, their ride_events row has it. */
export function withMode(payload: RideEventPayload, mode: KeyMode | undefined): RideEventPayload {
	if (payload.mode !== undefined || mode === undefined) return payload;
	return { ...payload, mode };
}

/** The widest delivery state a view can carry (longest state and error names, largest numbers). */
const WIDEST_DELIVERY: EventDelivery = { state: "superseded", attempts: 2_147_483_647, lastStatus: 599, lastError: "BLOCKED_ADDRESS" };

/** An upper bound of one event's bytes in a `/ride/events` answer, whatever its delivery state (events-page.ts). */
export function eventViewBytes(row: Parameters<typeof toRideEventView>[0]): number {
	return Buffer.byteLength(JSON.stringify(toRideEventView(row, WIDEST_DELIVERY)), "utf8");
}
