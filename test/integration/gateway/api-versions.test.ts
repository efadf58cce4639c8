import { API_VERSIONS, FIRST_API_VERSION, type ApiVersionTable, type JsonObject } from "../../../contracts/versions";
import type { AuditPage } from "../../../contracts/audit";
import type { PartnerSummary } from "../../../contracts/partners";
import { rejection } from "../../helpers/broker";
import { connect, createTestDatabase, TEST_NATS_URL, type TestDatabase } from "../../helpers/db";
import { PartnerApi, type HttpAnswer } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { runScript } from "../../helpers/processes";
import { randomPhone } from "../../helpers/rides";
import { waitFor } from "../../helpers/wait";
import { createPartner, move, startPartnerEndpoint, type PartnerEndpoint, type ReceivedWebhook, type TestPartner, type TestRide } from "../../helpers/webhooks";
import type { Client } from "pg";

/**
 * API versions end to end: the services on the server PostgreSQL, two
 * gateways (in two brokers) on the real NATS, real HTTP, and real
 * webhook receivers that verify every signature. A synthetic newer version,
 * 2099-01-01, is registered in this test only (handed to every service
 * through startTestNode's `apiVersions`): it renames fare-estimate's
 * `quotes` (→ `fareQuotes`), create-order's `webhookURL` (→ `callbackUrl`)
 * and the webhook's `metadata` (→ `partnerData`), shipped as translations
 * above the services' shape. A partner pinned to 2026-12-01 keeps the old
 * shape in answers and in signed webhooks; a 2099 partner gets the new one;
 * the header switches it per request; a re-pin reaches every gateway and
 * the next webhook at once; unknown versions are refused with nothing booked.
 */

const V2099 = "2099-01-01";

const rename =
	(from: string, to: string) =>
	(body: JsonObject): JsonObject => {
		if (!(from in body)) return body;
		const { [from]: value, ...rest } = body;
		return { ...rest, [to]: value };
	};

const TABLE: ApiVersionTable = {
	core: API_VERSIONS.core,
	versions: [
		...API_VERSIONS.versions,
		{
			version: V2099,
			summary: "Synthetic: quotes → fareQuotes, webhookURL → callbackUrl, webhook metadata → partnerData.",
			requests: { "/create-order": { down: rename("callbackUrl", "webhookURL") } },
			answers: { "/fare-estimate": { up: rename("quotes", "fareQuotes") } },
			webhooks: { up: rename("metadata", "partnerData") },
		},
	],
};

const TRIP = { pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } };

let db: TestDatabase;
let pg: Client;
let namespace: string;
let core: TestNode;
const gateways: TestNode[] = [];
/** Pinned to 2026-12-01 by an operator. */
let pinned: TestPartner;
/** Pinned to the newest version (2099) when made. */
let fresh: TestPartner;
const receivers: Record<"pinned" | "fresh", PartnerEndpoint> = {} as never;

const api = (partner: TestPartner, gateway = 0) => new PartnerApi(gateways[gateway].baseUrl!, partner.apiKey);
const version = (answer: HttpAnswer<unknown>) => answer.headers.get("ride-version");

beforeAll(async () => {
	db = await createTestDatabase("apiversions");
	namespace = uniqueNamespace("apiv");
	const common = { databaseUrl: db.url, nats: { namespace }, apiVersions: TABLE };
	// One gateway beside the services, another in a node of its own: a re-pin must reach both over NATS.
	core = await startTestNode({
		...common,
		services: ["partners", "riders", "pricing", "orders", "notifications", "gateway"],
		env: { WEBHOOK_ALLOW_PRIVATE: "true", NODE_ID: `${namespace}-core` },
	});
	const edge = await startTestNode({ ...common, services: ["gateway"], env: { NODE_ID: `${namespace}-edge` } });
	gateways.push(core, edge);
	await edge.broker.waitForServices(["partners", "pricing", "riders", "orders"], 15_000);
	// And the core has registered the edge's gateway (its INFO can come a moment after the edge started):
	// only then does a partners.changed broadcast reach it, which the re-pin test is about.
	await waitFor("the core registering the edge's gateway", () =>
		core.broker.registry.getServiceList({ onlyLocal: false }).some((s) => s.name === "gateway" && s.nodeID === edge.broker.nodeID),
	);
	pg = await connect(db.url);
	pinned = await createPartner(core.broker, "Pinned partner");
	fresh = await createPartner(core.broker, "Fresh partner");
	await core.broker.call("partners.setApiVersion", { partnerId: pinned.partnerId, apiVersion: FIRST_API_VERSION });
	receivers.pinned = await startPartnerEndpoint(pinned.webhookSecret);
	receivers.fresh = await startPartnerEndpoint(fresh.webhookSecret);
}, 60_000);

afterAll(async () => {
	for (const r of Object.values(receivers)) await r?.close();
	await pg?.end().catch(() => undefined);
	await gateways[1]?.stop();
	await core?.stop();
	await db?.drop();
});

const orderCount = async (): Promise<number> => Number((await pg.query("SELECT count(*) AS n FROM orders")).rows[0].n);

function book(partner: TestPartner, urlField: "webhookURL" | "callbackUrl", url: string, headers: Record<string, string> = {}) {
	return api(partner).post<TestRide & Record<string, unknown>>(
		"/ride/create-order",
		{ user: { name: "Asha Rao", phone: randomPhone() }, serviceType: "cab", ...TRIP, [urlField]: url, metadata: { ref: "r-1" } },
		headers,
	);
}

/** The first webhook of `status` for the ride at the receiver, signature checked by the receiver. */
async function hookOf(receiver: PartnerEndpoint, ride: TestRide, status: string): Promise<ReceivedWebhook> {
	const hook = await waitFor(
		`the ${status} webhook of ${ride.orderId}`,
		() => receiver.received.find((h) => h.orderId === ride.orderId && h.status === status),
		10_000,
	);
	expect(hook.signatureValid).toBe(true);
	return hook;
}

it("pins a new partner to the newest version; partners.list shows each partner's pin", async () => {
	const list = await core.broker.call<PartnerSummary[]>("partners.list");
	const pins = Object.fromEntries(list.map((p) => [p.partnerId, p.apiVersion]));
	expect(pins[fresh.partnerId]).toBe(V2099);
	expect(pins[pinned.partnerId]).toBe(FIRST_API_VERSION);
});

it("answers fare-estimate in the partner's pinned version, switched per request by Ride-Version", async () => {
	const old = await api(pinned).post("/ride/fare-estimate", TRIP);
	expect({ status: old.status, version: version(old) }).toEqual({ status: 200, version: FIRST_API_VERSION });
	expect(old.body).toHaveProperty("quotes");
	expect(old.body).not.toHaveProperty("fareQuotes");

	const neu = await api(fresh).post("/ride/fare-estimate", TRIP);
	expect({ status: neu.status, version: version(neu) }).toEqual({ status: 200, version: V2099 });
	expect(neu.body).toHaveProperty("fareQuotes");
	expect(neu.body).not.toHaveProperty("quotes");
	expect(neu.body.fareQuotes).toHaveLength((old.body.quotes as unknown[]).length);

	// The header wins over the pin, both ways.
	const oldAsNew = await api(pinned).post("/ride/fare-estimate", TRIP, { "Ride-Version": V2099 });
	expect({ version: version(oldAsNew), keys: Object.keys(oldAsNew.body) }).toEqual({ version: V2099, keys: expect.arrayContaining(["fareQuotes"]) });
	const newAsOld = await api(fresh).post("/ride/fare-estimate", TRIP, { "Ride-Version": FIRST_API_VERSION });
	expect({ version: version(newAsOld), quotes: Array.isArray(newAsOld.body.quotes) }).toEqual({ version: FIRST_API_VERSION, quotes: true });
});

it("takes create-order in each version's shape, and signs each partner's webhooks in its own version", async () => {
	// 2026-12-01 knows `webhookURL` only: `callbackUrl` is an unknown field there (the error names the version too).
	const refused = await book(pinned, "callbackUrl", receivers.pinned.url);
	expect({ status: refused.status, code: refused.body.code, version: version(refused) }).toEqual({
		status: 400,
		code: "VALIDATION_ERROR",
		version: FIRST_API_VERSION,
	});
	const oldRide = await book(pinned, "webhookURL", receivers.pinned.url);
	expect({ status: oldRide.status, version: version(oldRide) }).toEqual({ status: 201, version: FIRST_API_VERSION });
	// 2099 books with `callbackUrl`, and the ride's webhooks go there.
	const newRide = await book(fresh, "callbackUrl", receivers.fresh.url);
	expect({ status: newRide.status, version: version(newRide) }).toEqual({ status: 201, version: V2099 });

	await move(core.broker, oldRide.body, "accepted");
	await move(core.broker, newRide.body, "accepted");
	const oldHook = await hookOf(receivers.pinned, oldRide.body, "accepted");
	const newHook = await hookOf(receivers.fresh, newRide.body, "accepted");
	expect({ apiVersion: oldHook.body.apiVersion, metadata: oldHook.body.metadata, partnerData: oldHook.body.partnerData }).toEqual({
		apiVersion: FIRST_API_VERSION,
		metadata: { ref: "r-1" },
		partnerData: undefined,
	});
	expect({ apiVersion: newHook.body.apiVersion, metadata: newHook.body.metadata, partnerData: newHook.body.partnerData }).toEqual({
		apiVersion: V2099,
		metadata: undefined,
		partnerData: { ref: "r-1" },
	});
	// Not a trace of the newer shape in any of the pinned partner's deliveries.
	expect(receivers.pinned.received.filter((h) => h.orderId === oldRide.body.orderId && h.raw.includes("partnerData"))).toEqual([]);

	// /ride/events payloads in the request's version.
	const events = (answer: HttpAnswer) => (answer.body.events as Array<{ payload: JsonObject }>).map((e) => Object.keys(e.payload));
	const asPinned = await api(pinned).post("/ride/events", { orderId: oldRide.body.orderId });
	expect(events(asPinned).every((keys) => keys.includes("metadata") && !keys.includes("partnerData"))).toBe(true);
	// The payload is the webhook body as the partner got it, version included.
	const accepted = (asPinned.body.events as Array<{ status: string; payload: JsonObject }>).find((e) => e.status === "accepted");
	expect(accepted?.payload).toEqual(oldHook.body);
	const as2099 = await api(pinned).post("/ride/events", { orderId: oldRide.body.orderId }, { "Ride-Version": V2099 });
	expect({ version: version(as2099), ok: events(as2099).every((keys) => keys.includes("partnerData") && !keys.includes("metadata")) }).toEqual({
		version: V2099,
		ok: true,
	});
});

it("refuses an unknown Ride-Version with the known ones, before anything is booked", async () => {
	const before = await orderCount();
	for (const header of ["2030-01-01", "latest", ""]) {
		const answer = await book(fresh, "callbackUrl", receivers.fresh.url, { "Ride-Version": header, "Idempotency-Key": `k-${header}` });
		expect({ status: answer.status, code: answer.body.code, retryable: answer.body.retryable }).toEqual({
			status: 400,
			code: "UNKNOWN_API_VERSION",
			retryable: false,
		});
		expect(answer.body.details).toEqual([{ field: "Ride-Version", message: `Ride-Version must be one of: ${FIRST_API_VERSION}, ${V2099}` }]);
		expect(version(answer)).toBeNull();
	}
	expect(await orderCount()).toBe(before);
	// An operator cannot pin a partner to an unknown version either.
	await rejection(core.broker.call("partners.setApiVersion", { partnerId: fresh.partnerId, apiVersion: "2030-01-01" }), "UNKNOWN_API_VERSION", 400);
});

it("an operator's re-pin reaches every gateway and the next webhook at once (action and npm run partner -- set-version), audited", async () => {
	const ride = (await book(pinned, "webhookURL", receivers.pinned.url)).body;
	await move(core.broker, ride, "accepted");
	expect((await hookOf(receivers.pinned, ride, "accepted")).body.apiVersion).toBe(FIRST_API_VERSION);
	// Both gateways have the partner (and its pin) cached.
	for (const g of [0, 1]) expect(version(await api(pinned, g).post("/ride/status", { orderId: ride.orderId }))).toBe(FIRST_API_VERSION);

	await core.broker.call("partners.setApiVersion", { partnerId: pinned.partnerId, apiVersion: V2099 });
	// Well within the gateways' own cache time (5 s): only partners.changed explains the switch.
	for (const g of [0, 1]) {
		await waitFor(
			`gateway ${g} serving the new pin`,
			async () => version(await api(pinned, g).post("/ride/status", { orderId: ride.orderId })) === V2099,
			2_000,
		);
	}
	await move(core.broker, ride, "arrived");
	const arrived = await hookOf(receivers.pinned, ride, "arrived");
	expect({ version: arrived.body.apiVersion, partnerData: arrived.body.partnerData }).toEqual({ version: V2099, partnerData: { ref: "r-1" } });

	// The operator command (its own process, this release's versions) moves it back and announces it on the bus.
	const cli = await runScript("bin/partner.ts", ["set-version", "--partner", pinned.partnerId, "--version", FIRST_API_VERSION, "--operator", "ops-test"], {
		DATABASE_URL: db.url,
		TRANSPORTER: TEST_NATS_URL,
		NAMESPACE: namespace,
	});
	expect({ code: cli.code, answer: JSON.parse(cli.stdout) }).toEqual({
		code: 0,
		answer: { partnerId: pinned.partnerId, apiVersion: FIRST_API_VERSION, previousApiVersion: V2099 },
	});
	for (const g of [0, 1]) {
		await waitFor(
			`gateway ${g} serving the operator's pin`,
			async () => {
				return version(await api(pinned, g).post("/ride/status", { orderId: ride.orderId })) === FIRST_API_VERSION;
			},
			2_000,
		);
	}
	await move(core.broker, ride, "started");
	const started = await hookOf(receivers.pinned, ride, "started");
	expect({ version: started.body.apiVersion, metadata: started.body.metadata }).toEqual({ version: FIRST_API_VERSION, metadata: { ref: "r-1" } });

	const audit = await core.broker.call<AuditPage, unknown>("partners.audit", { partnerId: pinned.partnerId });
	const pins = audit.entries.filter((e) => e.action === "partners.setApiVersion").map((e) => [e.operator, e.detail]);
	expect(pins.slice(0, 2)).toEqual([
		["ops-test", { from: V2099, to: FIRST_API_VERSION }],
		[expect.any(String), { from: FIRST_API_VERSION, to: V2099 }],
	]);
});
