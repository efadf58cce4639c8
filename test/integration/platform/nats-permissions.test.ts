import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceBroker } from "moleculer";
import { connect as natsConnect, type NatsConnection } from "nats";
import { buildBrokerConfig } from "../../../moleculer.config";
import { ALL_BUS_USERS } from "../../../contracts/bus";
import { renderAuthorization } from "../../../lib/bus-permissions";
import { CoalescingNatsTransporter } from "../../../lib/coalescing-nats-transporter";
import { readNatsOptions } from "../../../lib/nats-settings";
import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { hasNatsServer, startNatsServer, type OwnNatsServer } from "../../helpers/nats-server";
import { waitFor } from "../../helpers/wait";

/**
 * The bus boundary on a real nats-server started with the generated
 * permissions (lib/bus-permissions.ts, the authorization block of
 * k8s/infra/nats-server.conf), real partners and orders services on a test
 * database, and brokers with the production configuration logged in as
 * each service's user:
 *   - an allowed call works (notifications → partners.signingSecret), and the
 *     operator calls internal actions (partners.create);
 *   - a forbidden call fails at once with BUS_PERMISSION_DENIED (gateway →
 *     partners.signingSecret / partners.createKey, notifications →
 *     orders.transition), and the server itself refuses the publish of a
 *     client that skips that check;
 *   - nobody registers a node in another service's name: not with its own
 *     broker, not by publishing a forged INFO.
 */

const passwords: Record<string, string> = Object.fromEntries(ALL_BUS_USERS.map((u) => [u, `pw-${u}-${randomBytes(9).toString("hex")}`]));
const namespace = uniqueNamespace("buspm");
const prefix = `MOL-${namespace}`;

let dir: string;
let nats: OwnNatsServer | undefined;
let natsUrl: string;
let db: TestDatabase;
const nodes: TestNode[] = [];
const brokers: ServiceBroker[] = [];
const raw: NatsConnection[] = [];

async function startPermissionedNats(): Promise<void> {
	const conf = join(dir, "nats.conf");
	writeFileSync(conf, renderAuthorization());
	nats = await startNatsServer(conf, passwords);
	natsUrl = nats.url;
}

function busEnv(user: string, name: string): Record<string, string> {
	return { TRANSPORTER: natsUrl, NAMESPACE: namespace, NATS_USER: user, NATS_PASSWORD: passwords[user], NODE_ID: name, METRICS_PORT: "0", LOGLEVEL: "warn" };
}

/** A broker with the production configuration logged in as `user`, running no service: a caller. */
async function caller(user: string, name: string): Promise<ServiceBroker> {
	const broker = new ServiceBroker(buildBrokerConfig(busEnv(user, name)));
	brokers.push(broker);
	await broker.start();
	await broker.waitForServices(["partners", "orders"], 15_000);
	return broker;
}

async function rawClient(user: string): Promise<NatsConnection> {
	const nc = await natsConnect({ servers: natsUrl.replace("nats://", ""), user, pass: passwords[user], maxReconnectAttempts: 0 });
	raw.push(nc);
	return nc;
}

/** The next permissions error the server reports to this connection (bounded). */
function nextPermissionError(nc: NatsConnection, timeoutMs = 10_000): Promise<string> {
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error("no permissions error reported")), timeoutMs);
		void (async () => {
			for await (const s of nc.status()) {
				if (s.type === "error" && /permission/i.test(String(s.data))) {
					clearTimeout(timer);
					const ctx = (s as { permissionContext?: { operation: string; subject: string } }).permissionContext;
					resolve(ctx ? `${ctx.operation} ${ctx.subject}` : String(s.data));
					return;
				}
			}
		})();
	});
}

beforeAll(async () => {
	if (!hasNatsServer) return;
	dir = mkdtempSync(join(tmpdir(), "ride-bus-perms-"));
	await startPermissionedNats();
	db = await createTestDatabase("buspm");
	// The gateway pod's partners service and the orders service, each logged in as its own user.
	nodes.push(await startTestNode({ databaseUrl: db.url, services: ["partners"], env: busEnv("gateway", "pod-a") }));
	nodes.push(await startTestNode({ databaseUrl: db.url, services: ["orders"], env: busEnv("orders", "pod-a") }));
}, 60_000);

afterAll(async () => {
	for (const nc of raw) await nc.close().catch(() => undefined);
	for (const b of brokers) await b.stop().catch(() => undefined);
	for (const n of nodes) await n.stop().catch(() => undefined);
	await db?.drop();
	await nats?.stop();
	if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

(hasNatsServer ? describe : describe.skip)("NATS permissions per service (real nats-server, generated permissions)", () => {
	test("node ids carry the user: the services' nodes are gateway.pod-a and orders.pod-a", () => {
		expect(nodes.map((n) => n.broker.nodeID)).toEqual(["gateway.pod-a", "orders.pod-a"]);
	});

	test("the operator calls internal actions; notifications gets a partner's signing secret; the gateway may not", async () => {
		const operator = await caller("operator", "repl-1");
		const created = await operator.call<{ partnerId: string }, { name: string }>("partners.create", { name: "Bus Test" });
		expect(created.partnerId).toMatch(/^ptn_/);
		// Any node's built-in actions too.
		expect(await operator.call("$node.health", {}, { nodeID: "orders.pod-a" })).toHaveProperty("cpu");

		const notifications = await caller("notifications", "pod-a");
		const secrets = await notifications.call<{ partnerId: string; webhookSecrets: unknown }, { partnerId: string }>("partners.signingSecret", {
			partnerId: created.partnerId,
		});
		expect(secrets.partnerId).toBe(created.partnerId);

		const gateway = await caller("gateway", "pod-b");
		for (const [action, params] of [
			["partners.signingSecret", { partnerId: created.partnerId }],
			["partners.createKey", { partnerId: created.partnerId, label: "stolen" }],
			["orders.transition", { orderId: "ord_x", to: "cancelled" }],
		] as const) {
			await expect(gateway.call(action, params)).rejects.toMatchObject({ type: "BUS_PERMISSION_DENIED", message: expect.stringContaining(action) });
		}
		// Its own calls still work: partners.authenticate on the other gateway pod (a key that does not exist: null).
		await expect(gateway.call("partners.authenticate", { apiKey: `rk_test_${"0".repeat(40)}` }, { nodeID: "gateway.pod-a" })).resolves.toBeNull();
	}, 60_000);

	test("notifications may not move an order: refused at once with BUS_PERMISSION_DENIED", async () => {
		const notifications = await caller("notifications", "pod-c");
		await expect(notifications.call("orders.transition", { orderId: "ord_x", to: "cancelled" })).rejects.toMatchObject({
			name: "BusPermissionError",
			type: "BUS_PERMISSION_DENIED",
		});
	}, 60_000);

	test("the server refuses a forbidden publish even from a client that skips the local check", async () => {
		// The platform's transporter without its local check: only the server stands in the way.
		const broker = new ServiceBroker({
			...buildBrokerConfig(busEnv("gateway", "pod-raw")),
			transporter: new CoalescingNatsTransporter({ url: natsUrl, ...readNatsOptions(busEnv("gateway", "pod-raw")) }, { user: "gateway" }),
		});
		brokers.push(broker);
		await broker.start();
		await broker.waitForServices(["partners"], 15_000);
		const refused = nextPermissionError((broker.transit!.tx as unknown as { client: NatsConnection }).client);
		const call = broker.call("partners.createKey", { partnerId: "ptn_x", label: "stolen" }, { nodeID: "gateway.pod-a", timeout: 3_000 });
		expect(await refused).toBe("publish " + `${prefix}.REQ.gateway.pod-a.partners.createKey`);
		// Never delivered: the call gets no answer.
		await expect(call).rejects.toMatchObject({ name: "RequestTimeoutError" });

		// The same for a raw client: the server names the subject it refused.
		const nc = await rawClient("notifications");
		const refusedRaw = nextPermissionError(nc);
		nc.publish(`${prefix}.REQ.orders.pod-a.orders.transition`, new TextEncoder().encode("{}"));
		expect(await refusedRaw).toBe(`publish ${prefix}.REQ.orders.pod-a.orders.transition`);
	}, 60_000);

	test("nobody registers a node in another service's name", async () => {
		// The platform's transporter refuses to start under another user's name (the broker stops at creation).
		const transporter = new CoalescingNatsTransporter({ url: natsUrl }, { user: "gateway" });
		const transit = { nodeID: "orders.rogue", broker: { namespace, options: {}, getLogger: () => console } };
		expect(() =>
			transporter.init(
				transit as never,
				() => undefined,
				() => undefined,
			),
		).toThrow(/NATS_USER=gateway the node id must be "gateway.<name>"/);

		// A raw client as gateway: the server refuses an INFO in orders' name, and to listen to orders' requests.
		const nc = await rawClient("gateway");
		const info = (sender: string) =>
			new TextEncoder().encode(
				JSON.stringify({
					ver: "5",
					sender,
					services: [
						{
							name: "orders",
							fullName: "orders",
							settings: {},
							metadata: {},
							actions: { "orders.transition": { name: "orders.transition" } },
							events: {},
						},
					],
					ipList: [],
					hostname: "rogue",
					client: { type: "nodejs", version: "0.15.2", langVersion: process.version },
					config: {},
					instanceID: "rogue",
					metadata: {},
					seq: 1,
				}),
			);
		const refusedInfo = nextPermissionError(nc);
		nc.publish(`${prefix}.INFOB.orders.rogue`, info("orders.rogue"));
		expect(await refusedInfo).toBe(`publish ${prefix}.INFOB.orders.rogue`);
		const refusedSub = nextPermissionError(nc);
		nc.subscribe(`${prefix}.REQ.orders.*.>`);
		expect(await refusedSub).toBe(`subscription ${prefix}.REQ.orders.*.>`);

		// An INFO it may publish (in its own name) but whose body claims orders' name is dropped by every node.
		const observer = nodes[1].broker;
		const dropped = jest.spyOn(observer.transit!.tx.logger, "warn");
		try {
			nc.publish(`${prefix}.INFOB.gateway.rogue`, info("orders.rogue"));
			await nc.flush();
			await waitFor("the forged INFO dropped", () => dropped.mock.calls.some((c) => /claiming another sender/.test(String(c[0]))), 10_000);
		} finally {
			dropped.mockRestore();
		}
		expect(observer.registry.nodes.get("orders.rogue")).toBeUndefined();
	}, 60_000);
});
