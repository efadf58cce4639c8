import type { KeyMode } from "../../contracts/partners";
import type { FareTerms } from "../../contracts/pricing";

/**
 * A new order as orders.repo.ts inserts it, and the insert's one column
 * list (name, SQL type, value) that the single and the batch insert are
 * both built from.
 */

/** A new order's columns: a ride now is inserted `searching`, a ride booked with a pickup time `scheduled`. */
export interface NewOrder {
	id: string;
	status: "searching" | "scheduled";
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
	/** A scheduled ride's pickup time and dispatch start (ISO 8601); null for a ride now. */
	pickupAt: string | null;
	dispatchAt: string | null;
}

export const jsonOrNull = (value: unknown) => (value === undefined || value === null ? null : JSON.stringify(value));

/**
 * A new order's columns, written once: the single insert binds them as
 * `$1::type, …` and the batch insert as one array each, so a new column is
 * added here and nowhere else.
 */
export const ORDER_COLUMNS: ReadonlyArray<{ name: string; type: "text" | "int" | "jsonb" | "timestamptz"; value: (o: NewOrder) => unknown }> = [
	{ name: "id", type: "text", value: (o) => o.id },
	{ name: "partner_id", type: "text", value: (o) => o.partnerId },
	{ name: "rider_id", type: "text", value: (o) => o.riderId },
	{ name: "status", type: "text", value: (o) => o.status },
	{ name: "service_type", type: "text", value: (o) => o.serviceType },
	{ name: "pickup", type: "jsonb", value: (o) => JSON.stringify(o.pickup) },
	{ name: '"drop"', type: "jsonb", value: (o) => JSON.stringify(o.drop) },
	{ name: "fare_paise", type: "int", value: (o) => o.farePaise },
	{ name: "currency", type: "text", value: (o) => o.currency },
	{ name: "fare_breakdown", type: "jsonb", value: (o) => (o.fareBreakdown ? JSON.stringify(o.fareBreakdown) : null) },
	{ name: "distance", type: "int", value: (o) => o.distance },
	{ name: "duration", type: "int", value: (o) => o.duration },
	{ name: "quote_id", type: "text", value: (o) => o.quoteId },
	{ name: "otp", type: "text", value: (o) => o.otp },
	{ name: "webhook_url", type: "text", value: (o) => o.webhookURL },
	{ name: "metadata", type: "jsonb", value: (o) => jsonOrNull(o.metadata) },
	{ name: "mode", type: "text", value: (o) => o.mode },
	// A scheduled ride's `scheduled` event is sequence 1, written with the insert.
	{ name: "version", type: "int", value: (o) => (o.status === "scheduled" ? 1 : 0) },
	{ name: "pickup_at", type: "timestamptz", value: (o) => o.pickupAt },
	{ name: "dispatch_at", type: "timestamptz", value: (o) => o.dispatchAt },
	{ name: "fare_terms", type: "jsonb", value: (o) => jsonOrNull(o.fareTerms) },
];
export const INSERT_COLUMNS = ORDER_COLUMNS.map((c) => c.name).join(", ");
export const INSERT_VALUES = ORDER_COLUMNS.map((c, i) => `$${i + 1}::${c.type}`).join(", ");
/** The batch insert: each column as an array (jsonb travels as text), unnested and cast back. */
export const UNNEST_ARRAYS = ORDER_COLUMNS.map((c, i) => `$${i + 1}::${c.type === "jsonb" ? "text" : c.type}[]`).join(", ");
export const UNNEST_ALIASES = ORDER_COLUMNS.map((_c, i) => `c${i}`).join(", ");
export const UNNEST_SELECT = ORDER_COLUMNS.map((c, i) => `c${i}::${c.type}`).join(", ");
export const bindOf = (o: NewOrder): unknown[] => ORDER_COLUMNS.map((c) => c.value(o));
