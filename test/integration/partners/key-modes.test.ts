import type { Client } from "pg";
import { callAction } from "../../helpers/broker";
import { PartnerApi } from "../../helpers/http";
import type { TestNode } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import type { CreatedKey, CreatedPartner } from "../../../contracts/partners";
import type { ServiceName } from "../../../services";
import { FIRST_API_VERSION } from "../../../contracts/versions";

/**
 * Test and live keys side by side in one deployment (issue 11): one partner
 * holds a test key and a live key; over real HTTP through the gateway, on the
 * real partners, riders, pricing and orders services and PostgreSQL, neither
 * key sees or touches the other's orders, quotes do not cross modes, sandbox
 * controls and the rider OTP helper are refused for live rides, a rider
 * may hold one active ride per mode, and a test booking never changes the
 * stored details of the live rider with the same phone.
 */

const SERVICES: ServiceName[] = ["partners", "riders", "pricing", "orders", "gateway"];
const PICKUP = { lat: 12.9716, lng: 77.5946 };
const DROP = { lat: 12.9352, lng: 77.6245 };

let bed: Testbed;
let node: TestNode;
let pg: Client;
let testApi: PartnerApi;
let liveApi: PartnerApi;
let partnerId: string;
let keys: { test: string; live: string };

function orderBody(phone: string, overrides: Record<string, unknown> = {}) {
	return {
		user: { name: "Asha Rao", phone },
		serviceType: "cab",
		pickup: PICKUP,
		drop: DROP,
		webhookURL: "https://partner.example.com/hooks/rides",
		...overrides,
	};
}

beforeAll(async () => {
	// FLEET_MODE=simulated: the rider OTP helper answers at all (for test rides); no fleet or dispatch runs here.
	bed = await startTestbed("keymodes", { services: SERVICES, env: { FLEET_MODE: "simulated" } });
	({ node, pg } = bed);
	const partner = await node.broker.call<CreatedPartner, { name: string }>("partners.create", { name: "Both modes" });
	const live = await node.broker.call<CreatedKey, { partnerId: string; label: string; mode: string }>("partners.createKey", {
		partnerId: partner.partnerId,
		label: "production",
		mode: "live",
	});
	expect(partner.apiKey).toMatch(/^ride_test_/);
	expect(live.apiKey).toMatch(/^ride_live_/);
	partnerId = partner.partnerId;
	keys = { test: partner.apiKey, live: live.apiKey };
	testApi = new PartnerApi(node.baseUrl!, partner.apiKey);
	liveApi = new PartnerApi(node.baseUrl!, live.apiKey);
});

afterAll(async () => {
	await bed?.stop();
});

it("partners.authenticate answers each key's mode; listKeys shows it", async () => {
	expect(await node.broker.call("partners.authenticate", { apiKey: keys.test })).toEqual({
		partnerId,
		name: "Both modes",
		mode: "test",
		apiVersion: FIRST_API_VERSION,
	});
	expect(await node.broker.call("partners.authenticate", { apiKey: keys.live })).toEqual({
		partnerId,
		name: "Both modes",
		mode: "live",
		apiVersion: FIRST_API_VERSION,
	});
	const listed = await node.broker.call<Array<{ label: string; mode: string }>, { partnerId: string }>("partners.listKeys", { partnerId });
	expect(listed.map((k) => [k.label, k.mode])).toEqual([
		["initial", "test"],
		["production", "live"],
	]);
});

it("the same rider holds one active test ride and one active live ride; a second one per mode answers that mode's ride", async () => {
	const phone = randomPhone("+9198");
	const t = await testApi.post<{ orderId: string }>("/ride/create-order", orderBody(phone));
	const l = await liveApi.post<{ orderId: string }>("/ride/create-order", orderBody(phone));
	expect([t.status, l.status]).toEqual([201, 201]);
	expect(l.body.orderId).not.toBe(t.body.orderId);

	const t2 = await testApi.post<{ orderId: string; code: string }>("/ride/create-order", orderBody(phone));
	const l2 = await liveApi.post<{ orderId: string; code: string }>("/ride/create-order", orderBody(phone));
	expect({ status: t2.status, code: t2.body.code, orderId: t2.body.orderId }).toEqual({
		status: 200,
		code: "USER_HAVE_ACTIVE_RIDE",
		orderId: t.body.orderId,
	});
	expect({ status: l2.status, code: l2.body.code, orderId: l2.body.orderId }).toEqual({
		status: 200,
		code: "USER_HAVE_ACTIVE_RIDE",
		orderId: l.body.orderId,
	});

	const { rows } = await pg.query<{ id: string; mode: string; rider_id: string }>("SELECT id, mode, rider_id FROM orders WHERE id = ANY($1) ORDER BY mode", [
		[t.body.orderId, l.body.orderId],
	]);
	expect(rows.map((r) => [r.id, r.mode])).toEqual([
		[l.body.orderId, "live"],
		[t.body.orderId, "test"],
	]);
	// One rider row per mode: the test booking did not reuse (or rewrite) the live rider.
	expect(rows[0].rider_id).not.toBe(rows[1].rider_id);
	// Services see the mode (dispatch matches test rides with simulated drivers, live rides with real ones).
	expect(await node.broker.call("orders.get", { orderId: l.body.orderId })).toMatchObject({ mode: "live", partnerId });
	expect(await node.broker.call("orders.get", { orderId: t.body.orderId })).toMatchObject({ mode: "test", partnerId });
});

it("a test booking with a live rider's phone never changes the live rider's stored name or email", async () => {
	const phone = randomPhone("+9198");
	const live = await liveApi.post<{ orderId: string }>("/ride/create-order", {
		...orderBody(phone),
		user: { name: "Asha Rao", phone, email: "asha@example.com" },
	});
	expect(live.status).toBe(201);
	const before = await pg.query("SELECT id, name, email, updated_at FROM riders WHERE partner_id = $1 AND phone = $2 AND mode = 'live'", [partnerId, phone]);
	expect(before.rows).toHaveLength(1);

	// A leaked test key (or a load test) books with the same phone and other details.
	const test = await testApi.post<{ orderId: string }>("/ride/create-order", {
		...orderBody(phone),
		user: { name: "Mallory", phone, email: "mallory@attacker.example" },
	});
	expect(test.status).toBe(201);

	const after = await pg.query("SELECT id, name, email, updated_at FROM riders WHERE partner_id = $1 AND phone = $2 AND mode = 'live'", [partnerId, phone]);
	expect(after.rows).toEqual(before.rows);
	expect(after.rows[0]).toMatchObject({ name: "Asha Rao", email: "asha@example.com" });
	const { rows } = await pg.query("SELECT o.mode, r.name FROM orders o JOIN riders r ON r.id = o.rider_id WHERE o.id = ANY($1) ORDER BY o.mode", [
		[live.body.orderId, test.body.orderId],
	]);
	expect(rows).toEqual([
		{ mode: "live", name: "Asha Rao" },
		{ mode: "test", name: "Mallory" },
	]);
});

it("neither key sees or touches the other's orders: status, events, cancel and feedback answer 404 ORDER_NOT_FOUND", async () => {
	const t = await testApi.post<{ orderId: string }>("/ride/create-order", orderBody(randomPhone("+9198")));
	const l = await liveApi.post<{ orderId: string }>("/ride/create-order", orderBody(randomPhone("+9198")));
	expect([t.status, l.status]).toEqual([201, 201]);
	const before = (await pg.query("SELECT id, status, version FROM orders WHERE id = ANY($1) ORDER BY id", [[t.body.orderId, l.body.orderId]])).rows;

	for (const [api, foreign] of [
		[testApi, l.body.orderId],
		[liveApi, t.body.orderId],
	] as const) {
		for (const [path, extra] of [
			["/ride/status", {}],
			["/ride/events", {}],
			["/ride/cancel", { reason: "wrong mode" }],
			["/ride/feedback", { rating: 5 }],
		] as const) {
			const res = await api.post<{ code: string }>(path, { orderId: foreign, ...extra });
			expect({ path, status: res.status, code: res.body.code }).toEqual({ path, status: 404, code: "ORDER_NOT_FOUND" });
		}
	}
	// Nothing moved.
	expect((await pg.query("SELECT id, status, version FROM orders WHERE id = ANY($1) ORDER BY id", [[t.body.orderId, l.body.orderId]])).rows).toEqual(before);

	// Each key still has its own.
	expect((await testApi.post("/ride/status", { orderId: t.body.orderId })).status).toBe(200);
	expect((await liveApi.post("/ride/status", { orderId: l.body.orderId })).status).toBe(200);
	const cancelled = await liveApi.post("/ride/cancel", { orderId: l.body.orderId });
	expect(cancelled).toMatchObject({ status: 200, body: { code: "RIDE_CANCELLED" } });
});

it("quotes do not cross modes: a test quote is QUOTE_INVALID for the live key and the reverse", async () => {
	const estimate = async (api: PartnerApi) => {
		const res = await api.post<{ quotes: Array<{ quoteId: string }> }>("/ride/fare-estimate", { pickup: PICKUP, drop: DROP, serviceType: "cab" });
		expect(res.status).toBe(200);
		return res.body.quotes[0].quoteId;
	};
	const testQuote = await estimate(testApi);
	const liveQuote = await estimate(liveApi);

	for (const [api, quoteId] of [
		[liveApi, testQuote],
		[testApi, liveQuote],
	] as const) {
		const res = await api.post<{ code: string; details: Array<{ field: string }> }>("/ride/create-order", orderBody(randomPhone("+9198"), { quoteId }));
		expect({ status: res.status, code: res.body.code, field: res.body.details?.[0]?.field }).toEqual({
			status: 422,
			code: "QUOTE_INVALID",
			field: "quoteId",
		});
	}
	// Each mode's own quote books.
	expect((await testApi.post("/ride/create-order", orderBody(randomPhone("+9198"), { quoteId: testQuote }))).status).toBe(201);
	expect((await liveApi.post("/ride/create-order", orderBody(randomPhone("+9198"), { quoteId: liveQuote }))).status).toBe(201);
});

it("sandbox controls are refused on a live key (400 VALIDATION_ERROR naming metadata.sandbox, nothing written) and accepted on a test key", async () => {
	const phone = randomPhone("+9198");
	const ordersBefore = (await pg.query("SELECT count(*)::int AS n FROM orders")).rows[0].n;
	for (const sandbox of [{ scenario: "no_driver_found" }, "fast"]) {
		const res = await liveApi.post<{ code: string; details: Array<{ field: string }> }>("/ride/create-order", orderBody(phone, { metadata: { sandbox } }));
		expect({ status: res.status, code: res.body.code, field: res.body.details?.[0]?.field }).toEqual({
			status: 400,
			code: "VALIDATION_ERROR",
			field: "metadata.sandbox",
		});
	}
	expect((await pg.query("SELECT count(*)::int AS n FROM orders")).rows[0].n).toBe(ordersBefore);
	expect((await pg.query("SELECT count(*)::int AS n FROM riders WHERE phone = $1", [phone])).rows[0].n).toBe(0);

	const onTest = await testApi.post("/ride/create-order", orderBody(phone, { metadata: { sandbox: { scenario: "fast" } } }));
	expect(onTest.status).toBe(201);
	// Other metadata is fine on a live key.
	expect((await liveApi.post("/ride/create-order", orderBody(phone, { metadata: { partnerRef: "b-1" } }))).status).toBe(201);
});

it("the rider OTP helper answers for a test ride and 403 FORBIDDEN for a live ride", async () => {
	const phone = randomPhone("+9198");
	const t = await testApi.post<{ orderId: string; otp: string }>("/ride/create-order", orderBody(phone));
	const l = await liveApi.post<{ orderId: string; otp: string }>("/ride/create-order", orderBody(phone));
	expect(await callAction(node.broker, "orders.riderOtp", { orderId: t.body.orderId })).toMatchObject({ status: 200, body: { otp: t.body.otp } });
	expect(await callAction(node.broker, "orders.riderOtp", { orderId: l.body.orderId })).toMatchObject({ status: 403, code: "FORBIDDEN" });
});

it("an Idempotency-Key of the test key never replays for the live key (nor the reverse)", async () => {
	const body = orderBody(randomPhone("+9198"));
	const headers = { "Idempotency-Key": "same-key-both-modes" };
	const t = await testApi.post<{ orderId: string }>("/ride/create-order", body, headers);
	const l = await liveApi.post<{ orderId: string }>("/ride/create-order", body, headers);
	expect([t.status, l.status]).toEqual([201, 201]);
	expect(l.body.orderId).not.toBe(t.body.orderId);
	// Replays stay within their mode.
	expect((await testApi.post<{ orderId: string }>("/ride/create-order", body, headers)).body.orderId).toBe(t.body.orderId);
	expect((await liveApi.post<{ orderId: string }>("/ride/create-order", body, headers)).body.orderId).toBe(l.body.orderId);
});
