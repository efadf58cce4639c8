/**
 * Dated API versions (API.md, "Versions"): the list of versions, oldest
 * first, and per version the translations between it and the version before
 * it. The services read and write one shape, the `core` version's; the
 * gateway translates each `/ride/*` request into it and each answer out of
 * it, and notifications renders each webhook body out of it, walking the
 * entries between the core and the partner's version (lib/api-versions.ts).
 *
 * Shipping a change that is not additive (API.md, "Compatibility policy"):
 * add an entry dated the day it ships, with the translations of every
 * request, answer and webhook body it changes. Usually the services move to
 * the new shape with it (`core` becomes the new version, and the entry
 * translates requests `up` from the previous version and answers and webhook
 * bodies `down` to it). A version may also ship as translations only, above
 * the core: then requests go `down` to the previous version and answers and
 * webhook bodies `up` from it. The table is checked when a service starts
 * (lib/api-versions.ts, `checkVersionTable`).
 *
 * Plain data and pure functions only.
 */

/** A JSON object: a request body, an answer or a webhook body. */
export type JsonObject = Record<string, unknown>;

/**
 * One direction of a translation. Pure: returns a new object, never changes the one it is given. A request
 * is translated before it is validated, so it must accept any object (leave what it does not expect alone).
 */
export type Translate = (body: JsonObject) => JsonObject;

/** Between an entry's version and the one before it: `up` from the older shape to the newer, `down` back. */
export interface Translation {
	up?: Translate;
	down?: Translate;
}

export interface ApiVersionEntry {
	/** `YYYY-MM-DD`: the day it shipped. */
	version: string;
	/** What changed from the previous version, for partners. */
	summary: string;
	/** Request bodies, by route path below `/ride` (`/create-order`). */
	requests?: Readonly<Record<string, Translation>>;
	/** Success answers, by route path below `/ride`. Error envelopes never change shape. */
	answers?: Readonly<Record<string, Translation>>;
	/** Webhook bodies; `/ride/events` payloads are rendered with the same translations. */
	webhooks?: Translation;
}

export interface ApiVersionTable {
	/** Oldest first; the first entry has no translations (nothing is before it). */
	versions: readonly ApiVersionEntry[];
	/** The version whose shape the services read and write. */
	core: string;
}

/** The request and answer header naming the version (API.md, "Versions"). */
export const API_VERSION_HEADER = "Ride-Version";

/** The first dated version: the contract as it was first published. */
export const FIRST_API_VERSION = "2026-12-01";

/** The versions of this release. A new partner is pinned to the last one. */
export const API_VERSIONS: ApiVersionTable = {
	versions: [{ version: FIRST_API_VERSION, summary: "The first dated version." }],
	core: FIRST_API_VERSION,
};

/**
 * Bytes the gateway adds to each `/ride/events` payload (`,"apiVersion":"YYYY-MM-DD"`): orders counts them when
 * it cuts a page, so the answer stays within EVENTS_PAGE_MAX_BYTES (contracts/orders.ts). A version whose webhook
 * translations make bodies larger must raise it (a unit test checks it against every version of the table).
 */
export const EVENT_PAYLOAD_VERSION_BYTES = 26;

/**
 * Answers that carry webhook bodies, by route path: they are rendered with
 * the webhook translations too (`/ride/events`: each event's `payload`).
 */
export const ANSWERS_WITH_WEBHOOK_BODIES: Readonly<Record<string, (answer: JsonObject, render: Translate) => JsonObject>> = {
	"/events": (answer, render) =>
		Array.isArray(answer.events)
			? {
					...answer,
					events: answer.events.map((event: JsonObject) =>
						event && typeof event.payload === "object" && event.payload !== null
							? { ...event, payload: render(event.payload as JsonObject) }
							: event,
					),
				}
			: answer,
};
