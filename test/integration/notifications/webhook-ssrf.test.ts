import { lookup } from "node:dns/promises";
import { hostname } from "node:os";
import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { PartnerApi } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { waitFor } from "../../helpers/wait";
import { createPartner, createRide, move, startPartnerEndpoint, type PartnerEndpoint } from "../../helpers/webhooks";
import { createWebhookClient } from "../../../services/notifications/webhook-client";
import type { ResolveAll } from "../../../lib/ssrf";
import { assertWebhookUrlAllowed } from "../../../lib/webhook-url";
import type { DeliveryStatesResult } from "../../../contracts/notifications";

/**
 * The SSRF guard at both checkpoints with WEBHOOK_ALLOW_PRIVATE=false:
 * create-order (through the gateway and orders) refuses hostile URLs with
 * 400 INVALID_WEBHOOK_URL, and notifications refuses to connect to them
 * (BLOCKED_ADDRESS) even when they got into a ride, including a host name
 * whose DNS answer is loopback and an answer that changes after the check.
 */

let db: TestDatabase;
let pg: Client;
let endpoint: PartnerEndpoint;
let gatewayNode: TestNode;
let ordersNode: TestNode;
let notificationsNode: TestNode;
let hostileUrls: string[];

beforeAll(async () => {
	db = await createTestDatabase("ssrf");
	pg = await connect(db.url);
	endpoint = await startPartnerEndpoint("whsec_" + Buffer.alloc(24, 7).toString("base64"));
	const p = endpoint.port;
	hostileUrls = [
		`http://127.0.0.1:${p}/a`,
		`http://localhost:${p}/b`,
		`http://2130706433:${p}/c`,
		`http://0x7f.1:${p}/d`,
		`http://0177.0.0.1:${p}/e`,
		`http://127.1:${p}/f`,
		`http://[::ffff:127.0.0.1]:${p}/g`,
		`http://[::ffff:7f00:1]:${p}/h`,
		`http://[::1]:${p}/i`,
	];
	// A plain host name whose DNS answer (here /etc/hosts) is loopback or private: refused by its answer, not its name.
	const own = hostname();
	const answer = await lookup(own).catch(() => undefined);
	if (answer && /^(127\.|10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.)/.test(answer.address)) hostileUrls.push(`http://${own}:${p}/k`);
});

afterAll(async () => {
	await notificationsNode?.stop();
	await ordersNode?.stop();
	await gatewayNode?.stop();
	await endpoint?.close();
	await pg?.end();
	await db?.drop();
});

describe("create-order checkpoint (gateway → orders), private targets refused", () => {
	let api: PartnerApi;

	beforeAll(async () => {
		gatewayNode = await startTestNode({
			databaseUrl: db.url,
			services: ["partners", "riders", "pricing", "orders", "gateway"],
			env: { WEBHOOK_ALLOW_PRIVATE: "false", NODE_ID: `ssrf-gw-${process.pid}` },
		});
		api = new PartnerApi(gatewayNode.baseUrl!, (await createPartner(gatewayNode.broker)).apiKey);
	});

	const extra = [
		"http://0.0.0.0/hook",
		"http://[::]/hook",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://100.100.100.200/latest/meta-data/",
		"http://10.0.0.8/hook",
		"http://192.168.1.20/hook",
		"http://172.16.5.4/hook",
		"http://100.64.0.9/hook",
		"http://[fe80::1]/hook",
		"http://[fc00::5]/hook",
		"http://224.0.0.251/hook",
		"http://printer.local/hook",
		"gopher://example.com/",
		"file:///etc/passwd",
	];

	it("refuses every hostile URL with 400 INVALID_WEBHOOK_URL and writes nothing", async () => {
		const urls = [...hostileUrls, ...extra];
		for (const webhookURL of urls) {
			const res = await api.post<any>("/ride/create-order", {
				user: { name: "Mallory", phone: "+919811111111" },
				serviceType: "cab",
				pickup: { lat: 12.9716, lng: 77.5946 },
				drop: { lat: 12.9352, lng: 77.6245 },
				webhookURL,
			});
			expect({ webhookURL, status: res.status, code: res.body?.code }).toEqual({ webhookURL, status: 400, code: "INVALID_WEBHOOK_URL" });
			expect(res.body.retryable).toBe(false);
			expect(JSON.stringify(res.body)).not.toContain("127.0.0.1");
		}
		expect((await pg.query("SELECT count(*)::int AS n FROM orders")).rows[0].n).toBe(0);
		expect((await pg.query("SELECT count(*)::int AS n FROM riders")).rows[0].n).toBe(0);
	});

	afterAll(async () => {
		await gatewayNode.stop();
	});
});

describe("connect-time checkpoint (notifications), private targets refused", () => {
	it("never connects to a hostile address that got into a ride; every try is recorded as BLOCKED_ADDRESS", async () => {
		const namespace = uniqueNamespace("ssrf");
		// Orders accepts loopback (dev mode) so the hostile URLs reach the outbox; notifications runs in production mode.
		ordersNode = await startTestNode({
			databaseUrl: db.url,
			services: ["partners", "riders", "pricing", "orders"],
			nats: { namespace },
			env: { WEBHOOK_ALLOW_PRIVATE: "true", NODE_ID: `ssrf-orders-${process.pid}` },
		});
		notificationsNode = await startTestNode({
			databaseUrl: db.url,
			services: ["notifications"],
			nats: { namespace },
			env: { WEBHOOK_ALLOW_PRIVATE: "false", WEBHOOK_RETRY_SCHEDULE_MS: "50,100", NODE_ID: `ssrf-notifications-${process.pid}` },
		});
		const partner = await createPartner(ordersNode.broker);
		const rides = [];
		for (const url of hostileUrls) {
			const ride = await createRide(ordersNode.broker, partner, url);
			await move(ordersNode.broker, ride, "accepted");
			rides.push(ride);
		}
		const ids = (await pg.query("SELECT id FROM ride_events WHERE order_id = ANY($1)", [rides.map((r) => r.orderId)])).rows.map((r) => r.id as string);
		expect(ids).toHaveLength(hostileUrls.length);

		const states = await waitFor(
			"every hostile event to fail",
			async () => {
				const s = await notificationsNode.broker.call<DeliveryStatesResult, { eventIds: string[] }>("notifications.deliveryStates", { eventIds: ids });
				return Object.values(s).every((v) => v.state === "failed") ? s : undefined;
			},
			20_000,
		);
		for (const v of Object.values(states!)) expect(v).toMatchObject({ state: "failed", attempts: 3, lastStatus: null, lastError: "BLOCKED_ADDRESS" });
		const outcomes = (await pg.query("SELECT DISTINCT outcome FROM webhook_attempts WHERE event_id = ANY($1)", [ids])).rows.map((r) => r.outcome);
		expect(outcomes).toEqual(["BLOCKED_ADDRESS"]);
		expect(endpoint.received).toEqual([]);
	});
});

describe("connect-time checkpoint against DNS rebinding (the webhook client with a scripted resolver)", () => {
	it("checks the address it actually connects to, not the one seen at create-order", async () => {
		let calls = 0;
		// First answer public (what create-order saw), every later answer loopback (the rebinding).
		const rebinding: ResolveAll = async () => [{ address: calls++ === 0 ? "93.184.216.34" : "127.0.0.1", family: 4 }];
		const url = `http://rebind.example.com:${endpoint.port}/rebind`;
		await expect(assertWebhookUrlAllowed(url, { allowPrivate: false, resolveAll: rebinding })).resolves.toBeInstanceOf(URL);

		const strict = createWebhookClient({ allowPrivate: false, timeoutMs: 2_000, resolveAll: rebinding });
		const refused = await strict.send(url, { "webhook-id": "evt_rebind" }, Buffer.from("{}"));
		strict.close();
		expect(refused.outcome).toBe("BLOCKED_ADDRESS");
		expect(endpoint.received.filter((h) => h.path === "/rebind")).toEqual([]);

		// Control: the same resolver with private targets allowed does reach the endpoint, so the refusal above was the guard.
		const lax = createWebhookClient({ allowPrivate: true, timeoutMs: 2_000, resolveAll: rebinding });
		const reached = await lax.send(url, { "webhook-id": "evt_rebind" }, Buffer.from("{}"));
		lax.close();
		expect(reached).toMatchObject({ outcome: "delivered", status: 200 });
		expect(endpoint.received.filter((h) => h.path === "/rebind")).toHaveLength(1);
	});

	it("does not follow a redirect to a private address", async () => {
		const client = createWebhookClient({ allowPrivate: true, timeoutMs: 2_000 });
		endpoint.behave((hook) => (hook.path === "/redirect" ? { status: 307, headers: { location: "http://169.254.169.254/latest/meta-data/" } } : undefined));
		const result = await client.send(`http://127.0.0.1:${endpoint.port}/redirect`, { "webhook-id": "evt_redirect" }, Buffer.from("{}"));
		client.close();
		expect(result).toMatchObject({ outcome: "HTTP_3XX", status: 307 });
		endpoint.behave(() => undefined);
	});
});
