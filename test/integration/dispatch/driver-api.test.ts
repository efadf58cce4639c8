import { randomPhone } from "../../helpers/rides";
import { TELEPORTING_DRIVERS } from "../../helpers/node";
import { httpRequest, type HttpAnswer } from "../../helpers/http";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { orderViolations, startPartnerEndpoint, waitFor, type PartnerEndpoint } from "../../helpers/webhooks";
import { destinationPoint } from "../../../lib/geo";
import type { DriverTokenCreated } from "../../../contracts/driver";
import type { DriverJob } from "../../../contracts/dispatch";
import { DRIVER_ROUTES } from "../../../contracts/gateway";
import { buildOpenApiDocument } from "../../../services/gateway/openapi";
import { driverRequestSchemaName } from "../../../services/gateway/openapi/driver-paths";
import { constraintsOf, paramsToJsonSchema } from "../../../services/gateway/openapi/json-schema";
import { CONVERT } from "../../../services/gateway/openapi/requests";
import { readGatewaySettings } from "../../../services/gateway/gateway.settings";

/**
 * The driver API over real HTTP (gateway `/driver/*` → dispatch, PostgreSQL,
 * notifications to a signature-verifying endpoint), with FLEET_MODE=live so
 * no simulated driver competes: a scripted driver takes a partner's ride from
 * searching to dropped; another driver cannot touch it; a wrong OTP is
 * refused; a driver cancel puts the ride back to searching; a revoked token
 * is refused.
 */

const PICKUP = { lat: 12.9716, lng: 77.5946 };
const DROP = { lat: 12.9352, lng: 77.6245 };

let bed: Testbed;
let base: string;
let partner: { partnerId: string; apiKey: string; webhookSecret: string; mode?: "test" | "live" };
let endpoint: PartnerEndpoint;
let driverA: DriverTokenCreated;
let driverB: DriverTokenCreated;

beforeAll(async () => {
	bed = await startTestbed("driver-api", {
		services: ["gateway", "partners", "riders", "pricing", "orders", "dispatch", "notifications"],
		env: { ...TELEPORTING_DRIVERS, FLEET_MODE: "live", WEBHOOK_ALLOW_PRIVATE: "true", RATE_LIMIT_PER_MINUTE: "0", AUTH_FAILURE_LIMIT_PER_MINUTE: "0" },
	});
	base = bed.node.baseUrl!;
	// A live key where keys have modes (a test key everywhere else): only real drivers drive its rides.
	partner = await bed.node.broker.call("partners.create", { name: "Driver API partner", mode: "live" });
	endpoint = await startPartnerEndpoint(partner.webhookSecret);
	// The drivers take rides of the key's mode: live drivers for the live key (test where keys have no mode).
	const mode = partner.mode ?? (/^(ride|rk)_live_/.test(partner.apiKey) ? "live" : "test");
	const create = (name: string) =>
		bed.node.broker.call<DriverTokenCreated, unknown>("dispatch.createDriverToken", {
			name,
			phone: randomPhone("+9196"),
			vehicleNumber: "KA01AB1234",
			serviceType: "cab",
			mode,
		});
	driverA = await create("Driver A");
	driverB = await create("Driver B");
});

afterAll(async () => {
	await endpoint?.close();
	await bed?.stop();
});

function driver<T = Record<string, unknown>>(d: DriverTokenCreated | string, path: string, body?: unknown, method = "POST"): Promise<HttpAnswer<T>> {
	const token = typeof d === "string" ? d : d.token;
	return httpRequest<T>(`${base}/driver${path}`, { method, headers: { Authorization: `Bearer ${token}` }, body });
}

async function book(): Promise<{ orderId: string; otp: string; status: string }> {
	const res = await httpRequest<{ orderId: string; otp: string; status: string }>(`${base}/ride/create-order`, {
		headers: { Authorization: `Bearer ${partner.apiKey}` },
		body: { user: { name: "Asha Rao", phone: randomPhone() }, serviceType: "cab", pickup: PICKUP, drop: DROP, webhookURL: `${endpoint.url}/hooks` },
	});
	expect(res.status).toBe(201);
	return res.body;
}

it("a scripted driver takes a ride searching → accepted → arrived → started → dropped; every webhook signed and in order", async () => {
	const near = destinationPoint(PICKUP, 90, 300);
	const online = await driver(driverA, "/online", { location: { lat: near.lat, lng: near.lng, heading: 270 } });
	expect(online.status).toBe(200);
	expect(online.body).toMatchObject({ driverId: driverA.driverId, status: "available" });

	const ride = await book();
	expect(ride.status).toBe("searching");

	// Long-poll: answers as soon as the offer is there.
	const offers = await driver<DriverJob>(driverA, "/offers", { waitSeconds: 20 });
	expect(offers.status).toBe(200);
	expect(offers.body.offer?.orderId).toBe(ride.orderId);

	// Another driver cannot take, move or read this ride: it reads as unknown.
	const stolen = await driver(driverB, "/accept", { orderId: ride.orderId });
	expect(stolen.status).toBe(404);
	expect(stolen.body).toMatchObject({ code: "ORDER_NOT_FOUND" });

	const accepted = await driver<DriverJob>(driverA, "/accept", { orderId: ride.orderId });
	expect(accepted.status).toBe(200);
	expect(accepted.body.ride).toMatchObject({ orderId: ride.orderId, status: "accepted" });

	// GET /driver/offers answers the current ride at once.
	const current = await driver<DriverJob>(driverA, "/offers", undefined, "GET");
	expect(current.status).toBe(200);
	expect(current.body.ride?.orderId).toBe(ride.orderId);

	// A batch of locations: the newest fix wins, whatever its place in the batch.
	const at = (s: number) => new Date(Date.now() - s * 1000).toISOString();
	const loc = await driver(driverA, "/location", {
		locations: [
			{ lat: 12.9721, lng: 77.5951, at: at(1) },
			{ lat: 12.98, lng: 77.6, at: at(30) },
		],
	});
	expect(loc.status).toBe(200);
	expect(loc.body).toMatchObject({ location: { lat: 12.9721, lng: 77.5951 } });

	expect((await driver(driverB, "/arrived", { orderId: ride.orderId })).status).toBe(404);
	expect((await driver(driverA, "/arrived", { orderId: ride.orderId })).body).toMatchObject({ ride: { status: "arrived" } });

	const wrong = ride.otp === "0000" ? "1111" : "0000";
	const bad = await driver(driverA, "/start", { orderId: ride.orderId, otp: wrong });
	expect(bad.status).toBe(422);
	expect(bad.body).toMatchObject({ code: "INVALID_OTP" });
	// Naming the other driver in the body changes nothing: the token is the identity.
	const impostor = await driver(driverB, "/start", { orderId: ride.orderId, otp: ride.otp, driverId: driverA.driverId });
	expect(impostor.status).toBe(404);

	// The rider tells the driver the OTP (the partner got it at booking).
	const started = await driver(driverA, "/start", { orderId: ride.orderId, otp: ride.otp });
	expect(started.status).toBe(200);
	expect(started.body).toMatchObject({ ride: { status: "started" } });
	const dropped = await driver(driverA, "/drop", { orderId: ride.orderId });
	expect(dropped.status).toBe(200);
	expect(dropped.body).toMatchObject({ ride: { status: "dropped" }, driver: { status: "available" } });

	const statuses = () => endpoint.delivered().filter((h) => h.orderId === ride.orderId && h.status !== "location_updated");
	await waitFor("the four status webhooks", () => statuses().length === 4);
	expect(statuses().map((h) => h.status)).toEqual(["accepted", "arrived", "started", "dropped"]);
	expect(statuses().map((h) => h.sequence)).toEqual([...statuses().map((h) => h.sequence)].sort((a, b) => a - b));
	expect(endpoint.received.filter((h) => h.orderId === ride.orderId).every((h) => h.signatureValid)).toBe(true);
	expect(orderViolations(endpoint.received)).toEqual([]);
	expect(statuses()[0].body).toMatchObject({ driver: { name: "Driver A" } });
});

it("a driver cancel puts the ride back to searching, and the driver is not offered it again", async () => {
	const ride = await book();
	const offers = await driver<DriverJob>(driverA, "/offers", { waitSeconds: 20 });
	expect(offers.body.offer?.orderId).toBe(ride.orderId);
	expect((await driver(driverA, "/accept", { orderId: ride.orderId })).status).toBe(200);
	expect((await driver(driverB, "/cancel", { orderId: ride.orderId, reason: "not mine" })).status).toBe(404);
	const cancelled = await driver(driverA, "/cancel", { orderId: ride.orderId, reason: "flat tyre" });
	expect(cancelled.status).toBe(200);
	expect(cancelled.body).toMatchObject({ status: "available", orderId: null });
	const status = await httpRequest<{ status: string }>(`${base}/ride/status`, {
		headers: { Authorization: `Bearer ${partner.apiKey}` },
		body: { orderId: ride.orderId },
	});
	expect(status.body.status).toBe("searching");
	// Nothing for this driver now (it dropped out of the only searching ride).
	const none = await driver<DriverJob>(driverA, "/offers", { waitSeconds: 0 });
	expect(none.body).toMatchObject({ offer: null, ride: null });
	await httpRequest(`${base}/ride/cancel`, { headers: { Authorization: `Bearer ${partner.apiKey}` }, body: { orderId: ride.orderId, reason: "test over" } });
});

it("refuses what is not a driver's well-formed call: no or wrong token, bad params, a partner key", async () => {
	expect((await httpRequest(`${base}/driver/offline`, { body: {} })).status).toBe(401);
	expect((await driver("rdt_not-a-token-at-all", "/offline", {})).body).toMatchObject({ code: "UNAUTHORIZED" });
	expect((await driver(partner.apiKey, "/offline", {})).status).toBe(401);
	// A driver token is no API key.
	expect((await httpRequest(`${base}/ride/status`, { headers: { Authorization: `Bearer ${driverA.token}` }, body: { orderId: "ord_x" } })).status).toBe(401);

	const outOfRange = await driver(driverA, "/online", { location: { lat: 100, lng: 77 } });
	expect(outOfRange.status).toBe(400);
	expect(outOfRange.body).toMatchObject({ code: "VALIDATION_ERROR" });
	expect((await driver(driverA, "/location", { locations: [] })).status).toBe(400);
	expect((await driver(driverA, "/accept", { orderId: "ord_x", extra: 1 })).status).toBe(400);
	expect((await driver(driverA, "/accept", { orderId: "ord_unknown" })).body).toMatchObject({ code: "ORDER_NOT_FOUND" });
	expect((await driver(driverA, "/nope", {})).status).toBe(404);
});

it("the gateway asks dispatch with the token's digest: the token never crosses the bus", async () => {
	// Every call the gateway makes goes through its context's broker: record what authenticateDriver is given.
	const seen: unknown[] = [];
	const call = bed.node.broker.call.bind(bed.node.broker);
	const spy = jest.spyOn(bed.node.broker, "call").mockImplementation(((action: string, params: unknown, opts: unknown) => {
		if (action === "dispatch.authenticateDriver") seen.push(params);
		return call(action as never, params as never, opts as never);
	}) as never);
	try {
		expect((await driver(driverA, "/offers", { waitSeconds: 0 })).status).toBe(200);
	} finally {
		spy.mockRestore();
	}
	expect(seen.length).toBeGreaterThan(0);
	for (const params of seen) {
		expect(JSON.stringify(params)).not.toContain(driverA.token);
		expect(params).toEqual({ tokenHash: expect.stringMatching(/^[0-9a-f]{64}$/) });
	}
	// And dispatch refuses a raw token outright (strict params).
	await expect(bed.node.broker.call("dispatch.authenticateDriver", { token: driverA.token })).rejects.toMatchObject({ name: "ValidationError" });
});

it("a revoked token is refused at once", async () => {
	expect((await driver(driverB, "/offline", {})).status).toBe(200);
	const revoked = await bed.node.broker.call<{ revoked: number }, unknown>("dispatch.revokeDriverTokens", { driverId: driverB.driverId });
	expect(revoked.revoked).toBe(1);
	const after = await driver(driverB, "/offline", {});
	expect(after.status).toBe(401);
	expect(after.body).toMatchObject({ code: "UNAUTHORIZED" });
	// Only the token's hash is stored.
	const rows = await bed.pg.query("SELECT token_hash FROM driver_tokens WHERE driver_id = $1", [driverB.driverId]);
	expect(rows.rows[0].token_hash).not.toContain(driverB.token);
	expect(rows.rows[0].token_hash).toMatch(/^[0-9a-f]{64}$/);
});

it("documents every /driver route with the running action's params, in /openapi.json and /docs", async () => {
	const doc = buildOpenApiDocument(readGatewaySettings({}));
	const dispatch = bed.node.broker.getLocalService("dispatch") as unknown as { schema: { actions: Record<string, { params?: Record<string, unknown> }> } };
	for (const route of DRIVER_ROUTES) {
		const running = dispatch.schema.actions[route.action.split(".")[1]]?.params;
		expect(running).toBeDefined();
		expect(constraintsOf(doc.components.schemas[driverRequestSchemaName(route)])).toEqual(constraintsOf(paramsToJsonSchema(running!, CONVERT)));
	}
	const served = await httpRequest<{ paths: Record<string, Record<string, unknown>> }>(`${base}/openapi.json`);
	for (const route of DRIVER_ROUTES) expect(served.body.paths[`/driver${route.path}`]?.[route.method.toLowerCase()]).toBeDefined();
	const page = await httpRequest(`${base}/docs`);
	expect(page.text).toContain("/driver/start");
});
