/**
 * Numbers of the partner contract that no single service's contract owns:
 * what the gateway applies, and the defaults of settings other documents
 * state. The OpenAPI document and docs/API.md print these values, so prose
 * never types a number by hand. Plain data only.
 *
 * Webhook numbers live in contracts/notifications.ts, idempotency and
 * metadata limits in contracts/orders.ts.
 */

const SECOND = 1_000;

// ---- gateway ------------------------------------------------------------------------

/** Largest accepted request body by default (`BODY_LIMIT`). */
export const DEFAULT_BODY_LIMIT_BYTES = 64 * 1024;
/** Sustained requests per minute per partner by default (`RATE_LIMIT_PER_MINUTE`); the burst defaults to the same. */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 600;
/** `Retry-After` seconds the gateway sends with a 503 when the service behind it is unreachable (and on a 503 from `/health/ready`). */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;
/** `Retry-After` seconds of a 429 that does not say its own. */
export const RATE_LIMITED_RETRY_AFTER_SECONDS = 1;
/**
 * `Retry-After` seconds a service sends when it answers itself: a 409
 * CONFLICT or IDEMPOTENCY_KEY_IN_USE, or a 503 while it is starting.
 * (orders: ORDERS_RETRY_AFTER_SECONDS; pricing's "Pricing is starting".)
 */
export const SERVICE_RETRY_AFTER_SECONDS = 1;
/** Longest `X-Request-Id` the gateway keeps (longer ones are replaced). */
export const REQUEST_ID_MAX_LENGTH = 128;

// ---- pricing ------------------------------------------------------------------------

/** How long a quote is honoured by default (`QUOTE_TTL_SECONDS`). */
export const DEFAULT_QUOTE_TTL_SECONDS = 300;
/** A quote matches a booking whose pickup and drop are each within this distance of the quoted ones. */
export const QUOTE_MATCH_RADIUS_METRES = 200;

// ---- dispatch and the ride ----------------------------------------------------------

/** Drivers farther than this from the pickup are not offered the ride, nor counted in a quote's `eta` (`DISPATCH_SEARCH_RADIUS_M`). */
export const DEFAULT_SEARCH_RADIUS_METRES = 5_000;
/** A moving ride reports its driver's position this often by default (`LOCATION_INTERVAL_MS`). */
export const DEFAULT_LOCATION_INTERVAL_MS = 5 * SECOND;
/** Digits of the ride OTP the rider tells the driver. */
export const OTP_DIGITS = 4;

// ---- webhooks (beyond contracts/notifications.ts) -----------------------------------

/** Each retry of a webhook is moved by up to this fraction of its delay. */
export const WEBHOOK_RETRY_JITTER = 0.1;
