/**
 * The riders service's contract: the params of its internal actions (the
 * exact fastest-validator schemas the actions use), the types they validate
 * into, and the Rider it answers. Type-only plus plain data.
 */

/** Phones are E.164 ("+" then 7..15 digits, no leading zero): the key of a rider within a partner. */
export const E164_PATTERN = /^\+[1-9]\d{6,14}$/;

const partnerIdRule = { type: "string", min: 1, max: 100 } as const;

/**
 * The mode of the key that booked (test or live): a rider is one row per
 * (partner, mode, phone), so a test booking never changes a live rider's
 * stored details. Omitted only by callers from before modes: `live`, the
 * row those callers always wrote.
 */
export const RIDER_MODES = ["test", "live"] as const;
export type RiderMode = (typeof RIDER_MODES)[number];
export const DEFAULT_RIDER_MODE: RiderMode = "live";

/** riders.upsert: creates the rider or updates their name (and email, when given). */
export const upsertRiderParams = {
	partnerId: partnerIdRule,
	name: { type: "string", trim: true, min: 1, max: 200 },
	phone: {
		type: "string",
		trim: true,
		pattern: E164_PATTERN,
		messages: { stringPattern: "The '{field}' field must be an E.164 phone number like +919812345678." },
	},
	email: { type: "email", mode: "precise", max: 254, optional: true },
	mode: { type: "enum", values: [...RIDER_MODES], optional: true },
} as const;
export interface UpsertRiderParams {
	partnerId: string;
	/** The booking key's mode; `live` when omitted (see RIDER_MODES). */
	mode?: RiderMode;
	name: string;
	phone: string;
	/** Omitted: the stored email is kept. */
	email?: string;
}

/** riders.get: a rider by id, scoped to a partner when `partnerId` is given. */
export const getRiderParams = {
	riderId: { type: "string", min: 1, max: 100 },
	partnerId: { ...partnerIdRule, optional: true },
} as const;
export interface GetRiderParams {
	riderId: string;
	/** When given, a rider of another partner is "not found". */
	partnerId?: string;
}

/** What riders.upsert and riders.get answer. */
export interface Rider {
	riderId: string;
	partnerId: string;
	/** The mode of the bookings that wrote this row. */
	mode: RiderMode;
	name: string;
	phone: string;
	email: string | null;
	createdAt: string;
	updatedAt: string;
}
