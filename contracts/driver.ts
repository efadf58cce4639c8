/**
 * The driver API's contract (`/driver/*` on the gateway, for driver apps):
 * the params of the driver-facing dispatch actions (`access: "driver"`), the
 * operator's token actions and the broker event that drops cached tokens.
 * The driver is always `ctx.meta.driverId` (from its token), never a param:
 * every params object here is strict, so a body naming a driver is refused.
 * Type-only plus plain data: no service code, no I/O.
 */
import { latitudeRule, longitudeRule, orderIdRule, serviceTypeRule, driverIdRule, type DriverLocation, type ServiceType } from "./common";
import { driverModeRule, type DriverMode } from "./dispatch";
import { auditPageParams, type AuditPageParams } from "./audit";

/** A position a driver app reports; unknown keys are refused like any other field. */
export const driverAppLocationRule = {
	type: "object",
	strict: true,
	props: {
		lat: latitudeRule,
		lng: longitudeRule,
		heading: { type: "number", min: 0, max: 360, optional: true },
		/** When the fix was taken (ISO 8601); in a batch the newest wins. */
		at: { type: "string", max: 40, optional: true },
	},
} as const;

export interface DriverAppLocation extends DriverLocation {
	at?: string;
}

/** The most locations one `/driver/location` call may carry. */
export const DRIVER_LOCATION_BATCH_MAX = 100;
/** The longest a `/driver/offers` long-poll waits, in seconds (below the gateway's 30 s request timeout). */
export const DRIVER_OFFERS_MAX_WAIT_S = 25;
export const DRIVER_OFFERS_DEFAULT_WAIT_S = 20;

// ---- driver-facing actions (access "driver") -------------------------------------

/** POST /driver/online → dispatch.driverGoOnline */
export const driverOnlineParams = { $$strict: true, location: driverAppLocationRule } as const;
export interface DriverOnlineParams {
	location: DriverAppLocation;
}

/** POST /driver/offline → dispatch.driverGoOffline */
export const driverOfflineParams = { $$strict: true } as const;

/** POST /driver/location → dispatch.driverReportLocations: a batch, the newest fix (by `at`, else the last one) wins. */
export const driverLocationsParams = {
	$$strict: true,
	locations: { type: "array", min: 1, max: DRIVER_LOCATION_BATCH_MAX, items: driverAppLocationRule },
} as const;
export interface DriverLocationsParams {
	locations: DriverAppLocation[];
}

/** GET or POST /driver/offers → dispatch.driverOffers: long-poll for an offer (or the current ride). */
export const driverOffersParams = {
	$$strict: true,
	waitSeconds: { type: "number", integer: true, min: 0, max: DRIVER_OFFERS_MAX_WAIT_S, optional: true, convert: true },
} as const;
export interface DriverOffersParams {
	waitSeconds?: number;
}

/** /driver/accept, /driver/decline, /driver/arrived, /driver/drop */
export const driverOrderParams = { $$strict: true, orderId: orderIdRule } as const;
export interface DriverOrderParams {
	orderId: string;
}

/** /driver/arrived: only near the pickup; `location`, when sent, is recorded first (as /driver/location would record it). */
export const driverArrivedParams = { $$strict: true, orderId: orderIdRule, location: { ...driverAppLocationRule, optional: true } } as const;
export interface DriverArrivedParams extends DriverOrderParams {
	location?: DriverAppLocation;
}

/** /driver/start: only with the rider's OTP. */
export const driverStartParams = { $$strict: true, orderId: orderIdRule, otp: { type: "string", min: 1, max: 16 } } as const;
export interface DriverStartParams extends DriverOrderParams {
	otp: string;
}

/** /driver/cancel: the driver gives the ride up before it started; it goes back to searching. */
export const driverCancelParams = { $$strict: true, orderId: orderIdRule, reason: { type: "string", min: 1, max: 200 } } as const;
export interface DriverCancelParams extends DriverOrderParams {
	reason: string;
}

// ---- operator and gateway actions (internal) -----------------------------------------

/**
 * dispatch.createDriverToken: registers the driver (idempotent by phone) and
 * issues a new token. `mode` live (default) takes live rides; test takes
 * test-key rides (a driver app's developer against the sandbox).
 */
export const createDriverTokenParams = {
	name: { type: "string", min: 1, max: 200, trim: true, convert: true },
	phone: { type: "string", pattern: /^\+[1-9][0-9]{6,14}$/ },
	vehicleNumber: { type: "string", min: 1, max: 32, trim: true, convert: true },
	serviceType: serviceTypeRule,
	mode: { ...driverModeRule, optional: true },
	/** The token's lifetime (`30d`, `12h`, `90m`, `45s`; at most DRIVER_TOKEN_LIFETIME_MAX_S); without it the token lasts until revoked. */
	expiresIn: { type: "string", optional: true, convert: true, max: 8, pattern: /^[1-9][0-9]{0,6}[smhd]$/ },
} as const;
export interface CreateDriverTokenParams {
	name: string;
	phone: string;
	vehicleNumber: string;
	serviceType: ServiceType;
	mode?: DriverMode;
	expiresIn?: string;
}
/** Shown once: only its hash is stored. */
export interface DriverTokenCreated {
	driverId: string;
	token: string;
	tokenId: string;
	/** The token's first DRIVER_TOKEN_SHOWN_CHARS characters: how lists show it and `revokeDriverToken { prefix }` names it. */
	tokenPrefix: string;
	/** When it stops working (ISO 8601), or null: until revoked. */
	expiresAt: string | null;
}

/** The longest lifetime a driver token may be given: 365 days. */
export const DRIVER_TOKEN_LIFETIME_MAX_S = 365 * 86_400;
const LIFETIME_UNIT_S = { s: 1, m: 60, h: 3_600, d: 86_400 } as const;

/** `30d` → seconds; undefined when it is not a lifetime (`<n><s|m|h|d>`, n ≥ 1) or exceeds DRIVER_TOKEN_LIFETIME_MAX_S. */
export function lifetimeSeconds(text: string): number | undefined {
	const m = /^([1-9][0-9]{0,6})([smhd])$/.exec(text);
	if (!m) return undefined;
	const seconds = Number(m[1]) * LIFETIME_UNIT_S[m[2] as keyof typeof LIFETIME_UNIT_S];
	return seconds <= DRIVER_TOKEN_LIFETIME_MAX_S ? seconds : undefined;
}

/** dispatch.revokeDriverTokens: every token of the driver. */
export const revokeDriverTokensParams = { driverId: driverIdRule } as const;
export interface RevokeDriverTokensParams {
	driverId: string;
}

/** How many leading characters of a token are kept and shown (`rdt_` + 8: 48 of its 256 random bits). */
export const DRIVER_TOKEN_SHOWN_CHARS = 12;

/** dispatch.revokeDriverToken: one token, by `tokenId` (`dtk_…`) or by its `prefix` (the `tokenPrefix` lists show): exactly one of them. */
export const revokeDriverTokenParams = {
	$$strict: true,
	tokenId: { type: "string", optional: true, pattern: /^dtk_[0-9a-z]{1,40}$/ },
	prefix: { type: "string", optional: true, length: DRIVER_TOKEN_SHOWN_CHARS, pattern: /^rdt_[A-Za-z0-9_-]+$/ },
} as const;
export interface RevokeDriverTokenParams {
	tokenId?: string;
	prefix?: string;
}
export interface RevokedDriverToken {
	tokenId: string;
	driverId: string;
	/** False when the token already was revoked. */
	revoked: boolean;
	/** The driver's tokens still working; at 0 the driver was taken offline, as by revokeDriverTokens. */
	remainingTokens: number;
}

/** `dispatch.audit`: the operator audit trail (contracts/audit.ts), newest first, overall or of one driver. */
export const driverAuditParams = { driverId: { ...driverIdRule, optional: true }, ...auditPageParams } as const;
export interface DriverAuditParams extends AuditPageParams {
	driverId?: string;
}

/** dispatch.listDriverTokens */
export interface DriverTokenView {
	tokenId: string;
	driverId: string;
	driverName: string;
	/** Null for tokens issued before prefixes were kept. */
	tokenPrefix: string | null;
	createdAt: string;
	/** Null: until revoked. */
	expiresAt: string | null;
	revokedAt: string | null;
	/** `revoked` wins over `expired`. */
	status: DriverTokenStatus;
}
export type DriverTokenStatus = "active" | "expired" | "revoked";

/**
 * dispatch.authenticateDriver (the gateway): a token's SHA-256 (hex) → its
 * driver, or null. Only the digest crosses the bus, never the token.
 */
export const authenticateDriverParams = {
	$$strict: true,
	tokenHash: { type: "string", length: 64, pattern: /^[0-9a-f]{64}$/ },
	onlyKnown: { type: "boolean", optional: true },
} as const;
export interface AuthenticateDriverParams {
	tokenHash: string;
	/**
	 * The gateway's throttle holds the caller's address: answer null without
	 * a database lookup when no live token has this digest's prefix
	 * (lib/known-credentials.ts); otherwise look it up as usual.
	 */
	onlyKnown?: boolean;
}
export interface AuthenticatedDriver {
	driverId: string;
}

export const DRIVER_TOKEN_EVENTS = {
	/** Broadcast after tokens of a driver were revoked (all or one): every dispatch instance drops them from its cache. */
	changed: "dispatch.driverTokensChanged",
	/** Broadcast after a token was created: every dispatch instance reads the new tokens into its known set. */
	created: "dispatch.driverTokenCreated",
} as const;
export interface DriverTokensChangedEvent {
	driverId: string;
}

/** Driver tokens look like `rdt_<43 base64url chars>`. */
export const DRIVER_TOKEN_PREFIX = "rdt_";
