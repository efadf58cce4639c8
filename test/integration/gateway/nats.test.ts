import { connect as connectNats } from "nats";
import { createTestDatabase, TEST_NATS_URL, type TestDatabase } from "../../helpers/db";
import { PartnerApi } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { waitFor } from "../../helpers/wait";

/**
 * The gateway alone in its broker, the services in another, joined over the
 * real NATS (as in production): errors raised on the other node keep their
 * envelope after crossing the wire, and when that node leaves, partners get
 * 503 SERVICE_UNAVAILABLE and the gateway stops being ready.
 */

let db: TestDatabase;
let services: TestNode | undefined;
let front: TestNode;
/** The partner API as Acme, and as a caller with a key nobody issued. */
let acme: PartnerApi;
let stranger: PartnerApi;
let namespace: string;

const FARE_ESTIMATE = { pickup: { lat: 12.97, lng: 77.59 }, drop: { lat: 12.93, lng: 77.62 } };

beforeAll(async () => {
	db = await createTestDatabase("gatewaynats");
	namespace = uniqueNamespace("gw");
	// Two brokers in one process: each needs its own node id on the shared namespace.
	services = await startTestNode({
		databaseUrl: db.url,
		services: ["partners", "pricing", "riders", "orders"],
		nats: { namespace },
		env: { NODE_ID: `${namespace}-services` },
	});
	front = await startTestNode({ databaseUrl: db.url, services: ["gateway"], nats: { namespace }, env: { NODE_ID: `${namespace}-gateway` } });
	const { apiKey } = await services.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Acme" });
	acme = new PartnerApi(front.baseUrl!, apiKey);
	stranger = new PartnerApi(front.baseUrl!, "rk_unknown-key-0123456789012345678901");
	await waitFor("the gateway to see every service over NATS", async () => (await acme.get("/health/ready")).status === 200, 30_000, 200);
});

afterAll(async () => {
	await front?.stop();
	await services?.stop();
	await db?.drop();
});

it("authenticates through the partners service on the other node", async () => {
	expect((await stranger.post("/ride/status", { orderId: "ord_x" })).status).toBe(401);
	const known = await acme.post("/ride/status", { orderId: "ord_doesnotexist000000000" });
	expect([known.status, known.body.code]).toEqual([404, "ORDER_NOT_FOUND"]);
	expect(known.body).toEqual({ code: "ORDER_NOT_FOUND", message: expect.any(String), retryable: false });
});

it("hands each node its settings without writing this process's environment or publishing them on the bus", async () => {
	expect(process.env.NAMESPACE).not.toBe(namespace);
	expect(process.env.DATABASE_URL).not.toBe(db.url);
	// What the gateway's node learnt about the other node's services: their public settings only.
	const remote = front.broker.registry.getServiceList({ onlyLocal: false, withActions: false, withEvents: false });
	const orders = remote.find((s) => s.name === "orders" && s.nodeID === `${namespace}-services`);
	expect(orders).toBeDefined();
	expect(JSON.stringify(remote)).not.toContain(db.url);
	expect(orders!.settings).not.toHaveProperty("$env");
});

it("sends the caller's identity over the bus as meta.partnerId and meta.mode only, not the partner object", async () => {
	const nc = await connectNats({ servers: TEST_NATS_URL });
	const packets: Array<{ action?: string; meta?: Record<string, unknown> }> = [];
	nc.subscribe(`MOL-${namespace}.REQ.>`, { callback: (_err, m) => packets.push(JSON.parse(new TextDecoder().decode(m.data)) as (typeof packets)[number]) });
	await nc.flush();
	try {
		expect((await acme.post("/ride/fare-estimate", FARE_ESTIMATE)).status).toBe(200);
		await nc.flush();
		const estimate = packets.find((p) => p.action === "pricing.estimate");
		expect(estimate?.meta).toMatchObject({ partnerId: expect.stringMatching(/^ptn_/), mode: "test" });
		// moleculer-web would put the authenticated partner (with its name) in meta.user and send it both ways.
		expect(estimate?.meta?.user ?? null).toBeNull();
		expect(JSON.stringify(estimate)).not.toContain("Acme");
	} finally {
		await nc.close();
	}
});

it("keeps validation details when the ValidationError crossed NATS", async () => {
	const r = await acme.post("/ride/fare-estimate", { ...FARE_ESTIMATE, pickup: { lat: 12.97, lng: 200 } });
	expect(r.status).toBe(400);
	expect(r.body).toEqual({
		code: "VALIDATION_ERROR",
		message: "pickup.lng must be less than or equal to 180",
		details: [{ field: "pickup.lng", message: "pickup.lng must be less than or equal to 180" }],
		retryable: false,
	});
});

it("answers 503 SERVICE_UNAVAILABLE and is not ready once the services' node is gone", async () => {
	await services!.stop();
	services = undefined;
	const r = await waitFor(
		"the node to leave",
		async () => {
			const answer = await acme.post("/ride/fare-estimate", FARE_ESTIMATE);
			return answer.status !== 200 && answer.status !== 401 && answer;
		},
		30_000,
		200,
	);
	// Authentication itself needs partners: with it gone the whole request is unavailable, not unauthorized.
	expect(r.status).toBe(503);
	expect(r.body).toMatchObject({ code: "SERVICE_UNAVAILABLE", retryable: true });
	expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
	expect((await acme.get("/health/ready")).status).toBe(503);
});
