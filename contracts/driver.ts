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
} as const;
export interface CreateDriverTokenParams {
	name: string;
	phone: string;
	vehicleNumber: string;
	serviceType: ServiceType;
	mode?: DriverMode;
}
/** Shown once: only its hash is stored. */
export interface DriverTokenCreated {
	driverId: string;
	token: string;
	tokenId: string;
}

/** dispatch.revokeDriverTokens: every token of the driver. */
export const revokeDriverTokensParams = { driverId: driverIdRule } as const;
export interface RevokeDriverTokensParams {
	driverId: string;
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
	createdAt: string;
	revokedAt: string | null;
}

/**
 * dispatch.authenticateDriver (the gateway): a token's SHA-256 (hex) → its
 * driver, or null. Only the digest crosses the bus, never the token.
 */
export const authenticateDriverParams = { $$strict: true, tokenHash: { type: "string", length: 64, pattern: /^[0-9a-f]{64}$/ } } as const;
export interface AuthenticateDriverParams {
	tokenHash: string;
}
export interface AuthenticatedDriver {
	driverId: string;
}

export const DRIVER_TOKEN_EVENTS = {
	/** Broadcast after tokens of a driver were revoked: every dispatch instance drops them from its cache. */
	changed: "dispatch.driverTokensChanged",
} as const;
export interface DriverTokensChangedEvent {
	driverId: string;
}

/** Driver tokens look like `rdt_<43 base64url chars>`. */
export const DRIVER_TOKEN_PREFIX = "rdt_";
