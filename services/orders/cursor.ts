/**
 * Opaque page cursors (base64url text): the `/ride/events` cursor (the last
 * sequence a page returned) and orders.listActive's keyset cursor (the last
 * row's `created_at`, to the microsecond, and id). Pure. A cursor that does
 * not decode is `null`: the caller answers 400 VALIDATION_ERROR naming it.
 */

const EVENTS_PREFIX = "ev1:";
const ACTIVE_PREFIX = "ac1:";
/** `created_at` as PostgreSQL prints it in UTC with microseconds (orders.repo.ts selects it so). */
const MICRO_ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const ORDER_ID = /^[A-Za-z0-9_-]{1,100}$/;

const encode = (text: string): string => Buffer.from(text, "utf8").toString("base64url");

function decode(cursor: string, prefix: string): string | null {
	if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) return null;
	const text = Buffer.from(cursor, "base64url").toString("utf8");
	// Only the canonical encoding is accepted (no trailing bits or padding variants).
	if (encode(text) !== cursor || !text.startsWith(prefix)) return null;
	return text.slice(prefix.length);
}

/** The cursor after the event with this sequence. */
export function encodeEventsCursor(afterSequence: number): string {
	return encode(`${EVENTS_PREFIX}${afterSequence}`);
}

/** The sequence a `/ride/events` cursor continues after, or null when it is not one of ours. */
export function decodeEventsCursor(cursor: string): number | null {
	const body = decode(cursor, EVENTS_PREFIX);
	if (body === null || !/^(0|[1-9]\d{0,9})$/.test(body)) return null;
	const n = Number(body);
	return Number.isSafeInteger(n) && n <= 2_147_483_647 ? n : null;
}

export interface ActiveKey {
	/** `created_at` in UTC with microseconds, e.g. 2025-01-31T10:00:00.123456Z. */
	createdAt: string;
	id: string;
}

export function encodeActiveCursor(key: ActiveKey): string {
	return encode(`${ACTIVE_PREFIX}${key.createdAt}|${key.id}`);
}

export function decodeActiveCursor(cursor: string): ActiveKey | null {
	const body = decode(cursor, ACTIVE_PREFIX);
	if (body === null) return null;
	const bar = body.indexOf("|");
	if (bar < 0) return null;
	const createdAt = body.slice(0, bar);
	const id = body.slice(bar + 1);
	if (!MICRO_ISO.test(createdAt) || Number.isNaN(Date.parse(createdAt)) || !ORDER_ID.test(id)) return null;
	return { createdAt, id };
}
