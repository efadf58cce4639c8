import { API_VERSIONS, EVENT_PAYLOAD_VERSION_BYTES, FIRST_API_VERSION, type ApiVersionTable, type JsonObject } from "../../../contracts/versions";
import {
	answerFromCore,
	ApiVersionTableError,
	apiVersionsOf,
	checkVersionTable,
	knownVersions,
	latestVersion,
	requestToCore,
	servedVersion,
	webhookFromCore,
} from "../../../lib/api-versions";
import { ApiError } from "../../../lib/errors";

/**
 * The version walker (lib/api-versions.ts) on a synthetic table of three
 * versions: the first, a middle one the services speak (the core: requests
 * go up to it, answers and webhooks down from it) and a newer one shipped as
 * translations only (requests down to the core, answers and webhooks up).
 */

const rename =
	(from: string, to: string) =>
	(body: JsonObject): JsonObject => {
		if (!(from in body)) return body;
		const { [from]: value, ...rest } = body;
		return { ...rest, [to]: value };
	};

/** v1 `webhookURL` ↔ core `callbackUrl` ↔ v3 `notifyUrl`; answers of fare-estimate: v1 `quotes` ↔ core `offers` ↔ v3 `fareOffers`. */
const TABLE: ApiVersionTable = {
	core: "2027-06-01",
	versions: [
		{ version: "2026-12-01", summary: "first" },
		{
			version: "2027-06-01",
			summary: "core",
			requests: { "/create-order": { up: rename("webhookURL", "callbackUrl") } },
			answers: { "/fare-estimate": { down: rename("offers", "quotes") } },
			webhooks: { down: rename("meta", "metadata") },
		},
		{
			version: "2099-01-01",
			summary: "translation only",
			requests: { "/create-order": { down: rename("notifyUrl", "callbackUrl") } },
			answers: { "/fare-estimate": { up: rename("offers", "fareOffers") } },
			webhooks: { up: rename("meta", "partnerData") },
		},
	],
};

describe("API versions: the chain", () => {
	it("translates requests up to the core from older versions and down to it from newer ones", () => {
		expect(requestToCore(TABLE, "2026-12-01", "/create-order", { webhookURL: "u", x: 1 })).toEqual({ callbackUrl: "u", x: 1 });
		expect(requestToCore(TABLE, "2027-06-01", "/create-order", { callbackUrl: "u" })).toEqual({ callbackUrl: "u" });
		expect(requestToCore(TABLE, "2099-01-01", "/create-order", { notifyUrl: "u" })).toEqual({ callbackUrl: "u" });
		// Another route has no translation: unchanged (the same object).
		const body = { orderId: "ord_1" };
		expect(requestToCore(TABLE, "2026-12-01", "/status", body)).toBe(body);
	});

	it("renders answers down to older versions and up to newer ones", () => {
		const core = { offers: [1], currency: "INR" };
		expect(answerFromCore(TABLE, "2026-12-01", "/fare-estimate", core)).toEqual({ quotes: [1], currency: "INR" });
		expect(answerFromCore(TABLE, "2027-06-01", "/fare-estimate", core)).toBe(core);
		expect(answerFromCore(TABLE, "2099-01-01", "/fare-estimate", core)).toEqual({ fareOffers: [1], currency: "INR" });
		// Non-object answers pass untouched.
		expect(answerFromCore(TABLE, "2026-12-01", "/fare-estimate", null)).toBeNull();
	});

	it("walks every step in order, each applied once", () => {
		const seen: string[] = [];
		const step =
			(name: string) =>
			(body: JsonObject): JsonObject => {
				seen.push(name);
				return { ...body, trail: [...((body.trail as string[]) ?? []), name] };
			};
		const table: ApiVersionTable = {
			core: "2027-03-01",
			versions: [
				{ version: "2026-12-01", summary: "a" },
				{ version: "2027-01-01", summary: "b", requests: { "/status": { up: step("b-up") } }, answers: { "/status": { down: step("b-down") } } },
				{ version: "2027-03-01", summary: "c", requests: { "/status": { up: step("c-up") } }, answers: { "/status": { down: step("c-down") } } },
			],
		};
		expect(requestToCore(table, "2026-12-01", "/status", {}).trail).toEqual(["b-up", "c-up"]);
		expect(answerFromCore(table, "2026-12-01", "/status", {})).toEqual({ trail: ["c-down", "b-down"] });
		expect((answerFromCore(table, "2027-01-01", "/status", {}) as JsonObject).trail).toEqual(["c-down"]);
		expect(seen).toEqual(["b-up", "c-up", "c-down", "b-down", "c-down"]);
	});

	it("renders webhook bodies, and /ride/events payloads with the same translations", () => {
		const payload = { eventId: "evt_1", meta: { ref: "x" } };
		expect(webhookFromCore(TABLE, "2026-12-01", payload)).toEqual({ eventId: "evt_1", metadata: { ref: "x" } });
		expect(webhookFromCore(TABLE, "2099-01-01", payload)).toEqual({ eventId: "evt_1", partnerData: { ref: "x" } });
		const page = { events: [{ eventId: "evt_1", payload }], nextCursor: null };
		expect(answerFromCore(TABLE, "2026-12-01", "/events", page)).toEqual({
			events: [{ eventId: "evt_1", payload: { eventId: "evt_1", metadata: { ref: "x" }, apiVersion: "2026-12-01" } }],
			nextCursor: null,
		});
		// What the gateway adds to a payload in this release's versions is within what orders reserves when it cuts a page.
		for (const v of knownVersions(API_VERSIONS)) {
			const rendered = (answerFromCore(API_VERSIONS, v, "/events", { events: [{ payload }] }) as { events: Array<{ payload: JsonObject }> }).events[0]
				.payload;
			expect(Buffer.byteLength(JSON.stringify(rendered)) - Buffer.byteLength(JSON.stringify(payload))).toBeLessThanOrEqual(EVENT_PAYLOAD_VERSION_BYTES);
		}
		// The input is never changed.
		expect(page.events[0].payload).toBe(payload);
		expect(payload).toEqual({ eventId: "evt_1", meta: { ref: "x" } });
	});
});

describe("API versions: which version serves", () => {
	it("takes the header over the pin, and refuses an unknown header with the known list", () => {
		expect(servedVersion(TABLE, "2099-01-01", "2026-12-01")).toBe("2099-01-01");
		expect(servedVersion(TABLE, undefined, "2027-06-01")).toBe("2027-06-01");
		let err: unknown;
		try {
			servedVersion(TABLE, "2030-01-01", "2026-12-01");
		} catch (e) {
			err = e;
		}
		expect(err).toBeInstanceOf(ApiError);
		expect(err).toMatchObject({
			type: "UNKNOWN_API_VERSION",
			code: 400,
			data: { details: [{ field: "Ride-Version", message: "Ride-Version must be one of: 2026-12-01, 2027-06-01, 2099-01-01" }] },
		});
		expect(() => servedVersion(TABLE, "", "2026-12-01")).toThrow(ApiError);
		expect(() => servedVersion(TABLE, ["2026-12-01", "2099-01-01"], undefined)).toThrow(ApiError);
	});

	it("serves a partner with no pin in the first version, and a pin this table does not know in the newest before it", () => {
		expect(servedVersion(TABLE, undefined, undefined)).toBe("2026-12-01");
		expect(servedVersion(TABLE, undefined, "2050-01-01")).toBe("2027-06-01");
		expect(servedVersion(TABLE, undefined, "2020-01-01")).toBe("2026-12-01");
	});

	it("lists the versions and the newest (new partners are pinned to it)", () => {
		expect(knownVersions(TABLE)).toEqual(["2026-12-01", "2027-06-01", "2099-01-01"]);
		expect(latestVersion(TABLE)).toBe("2099-01-01");
		expect(knownVersions(API_VERSIONS)).toEqual([FIRST_API_VERSION]);
		expect(latestVersion(API_VERSIONS)).toBe(API_VERSIONS.core);
	});

	it("uses the table a service was handed, else this release's, checked either way", () => {
		expect(apiVersionsOf({ settings: {} })).toBe(API_VERSIONS);
		expect(apiVersionsOf({ settings: { $apiVersions: TABLE } })).toBe(TABLE);
		expect(() => apiVersionsOf({ settings: { $apiVersions: { core: "x", versions: [] } } })).toThrow(ApiVersionTableError);
	});
});

describe("API versions: invalid tables are refused", () => {
	const bad = (table: ApiVersionTable, message: RegExp) => expect(() => checkVersionTable(table)).toThrow(message);
	const first = { version: "2026-12-01", summary: "first" };

	it("accepts this release's table and the synthetic one", () => {
		expect(checkVersionTable(API_VERSIONS)).toBe(API_VERSIONS);
		expect(checkVersionTable(TABLE)).toBe(TABLE);
	});

	it("needs versions that are real dates in ascending order, and a known core", () => {
		bad({ core: "2026-12-01", versions: [] }, /no versions/);
		bad({ core: "2026-12-01", versions: [{ version: "2026-13-01", summary: "" }] }, /not a date/);
		bad({ core: "2026-12-01", versions: [{ version: "2026-02-30", summary: "" }] }, /not a date/);
		bad({ core: "2026-12-01", versions: [{ version: "20261201", summary: "" }] }, /not a date/);
		bad({ core: "2026-12-01", versions: [first, { version: "2026-06-01", summary: "" }] }, /ascending/);
		bad({ core: "2026-12-01", versions: [first, { ...first }] }, /ascending/);
		bad({ core: "2027-01-01", versions: [first] }, /core version 2027-01-01 is not in the list/);
	});

	it("refuses translations on the first version and for unknown routes", () => {
		bad({ core: "2026-12-01", versions: [{ ...first, webhooks: { down: (b) => b } }] }, /first version 2026-12-01 cannot have translations/);
		bad({ core: "2027-01-01", versions: [first, { version: "2027-01-01", summary: "", requests: { "/book": { up: (b) => b } } }] }, /unknown route \/book/);
	});

	it("needs each translation in the direction its place needs", () => {
		const id = (b: JsonObject) => b;
		// At or below the core: requests up, answers and webhooks down.
		bad({ core: "2027-01-01", versions: [first, { version: "2027-01-01", summary: "", requests: { "/status": { down: id } } }] }, /needs a "up"/);
		bad({ core: "2027-01-01", versions: [first, { version: "2027-01-01", summary: "", answers: { "/status": { up: id } } }] }, /needs a "down"/);
		bad({ core: "2027-01-01", versions: [first, { version: "2027-01-01", summary: "", webhooks: {} }] }, /webhook bodies: needs a "down"/);
		// Above the core: the other way round.
		bad({ core: "2026-12-01", versions: [first, { version: "2099-01-01", summary: "", requests: { "/status": { up: id } } }] }, /needs a "down"/);
		bad({ core: "2026-12-01", versions: [first, { version: "2099-01-01", summary: "", webhooks: { down: id } }] }, /needs a "up"/);
	});
});
