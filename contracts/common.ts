/**
 * Building blocks shared by every service's contract: the fastest-validator
 * rules for coordinates, places, service types and ids, and the plain types
 * they validate into. Type-only plus plain data: no service code, no I/O.
 * Each schema is written once here; services and the OpenAPI generator read
 * the same objects.
 */

/** The ride products a partner can book, in the order quotes list them. */
export const SERVICE_TYPES = ["scooty", "cab"] as const;
export type ServiceType = (typeof SERVICE_TYPES)[number];

export interface Point {
	lat: number;
	lng: number;
}
export interface Place extends Point {
	address?: string;
}
export interface DriverLocation extends Point {
	heading?: number;
}

export const latitudeRule = { type: "number", min: -90, max: 90, finite: true } as const;
export const longitudeRule = { type: "number", min: -180, max: 180, finite: true } as const;

/**
 * How deep params may nest (objects and arrays, the body itself being level
 * 0): deeper input is refused before it reaches a serialiser or a database.
 */
export const PARAMS_MAX_DEPTH = 32;

/** A pickup or drop as partners send it; unknown keys are refused. */
export const placeRule = {
	type: "object",
	strict: true,
	props: { lat: latitudeRule, lng: longitudeRule, address: { type: "string", max: 500, optional: true } },
} as const;

/** ISO 8601 date and time with seconds and an explicit offset (`Z` or `±hh:mm`): how `pickupAt` is written. */
export const PICKUP_AT_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** A scheduled ride's pickup time (create-order, fare-estimate); the window is checked by the services (lib/schedule.ts). */
export const pickupAtRule = {
	type: "string",
	max: 40,
	pattern: PICKUP_AT_PATTERN,
	optional: true,
	messages: { stringPattern: "pickupAt must be an ISO 8601 date and time with an offset, e.g. 2026-12-24T18:30:00+05:30" },
} as const;

/** A bare coordinate (internal calls). */
export const pointRule = {
	type: "object",
	strict: "remove",
	props: { lat: latitudeRule, lng: longitudeRule },
} as const;

/** A driver's position with an optional compass heading. */
export const locationRule = {
	type: "object",
	props: { lat: latitudeRule, lng: longitudeRule, heading: { type: "number", min: 0, max: 360, optional: true } },
} as const;

export const serviceTypeRule = { type: "enum", values: [...SERVICE_TYPES] } as const;

/** Order ids are opaque to partners (`ord_…` today); only their length is checked. */
export const orderIdRule = { type: "string", min: 1, max: 100 } as const;

export const driverIdRule = { type: "string", pattern: /^drv_[a-z0-9]{1,64}$/ } as const;

/** Seconds until the driver arrives (or reaches the drop); null when unknown. */
export const etaRule = { type: "number", integer: true, min: 0, optional: true, nullable: true } as const;
