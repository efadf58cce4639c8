import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ServiceBroker } from "moleculer";
import { buildBrokerConfig } from "../../../moleculer.config";
import { ALL_BUS_USERS } from "../../../contracts/bus";
import { uniqueNamespace } from "../../helpers/node";
import { spawnNode, startServiceProcess, type ServiceProcess } from "../../helpers/processes";
import { hasNatsServer, startNatsServer, type OwnNatsServer } from "../../helpers/nats-server";
import { waitFor } from "../../helpers/wait";

/**
 * The bus is a trust boundary: a real nats-server, started here with the
 * users Compose runs it with (k8s/infra/nats-compose.conf, each password read
 * from its environment), and real server processes. A gateway node with its
 * credentials (password from a mounted file, as a Secret gives it) joins and
 * answers the operator's call; nodes with a wrong password or none are
 * refused by the server and never start. No process prints the password, and
 * the broker options any bus member can read (`$node.options`) do not hold it.
 * (Each user's permissions: nats-permissions.test.ts; TLS: nats-tls.test.ts.)
 */

const TSX = ["--import", "tsx"];

let dir: string;
let nats: OwnNatsServer | undefined;
let natsUrl: string;
const passwords: Record<string, string> = Object.fromEntries(ALL_BUS_USERS.map((u) => [u, `pw-${u}-${randomBytes(12).toString("hex")}`]));
const password = passwords.gateway;
const namespace = uniqueNamespace("natsauth");
const started: ServiceProcess[] = [];

async function startComposeNats(): Promise<void> {
	// The configuration compose mounts: every password comes from the server's environment.
	nats = await startNatsServer(resolve(__dirname, "../../../k8s/infra/nats-compose.conf"), passwords);
	natsUrl = nats.url;
}

/** A gateway process (it needs no database of its own) on the secured NATS. */
function nodeEnv(nodeId: string, extra: Record<string, string>): Record<string, string> {
	return {
		SERVICES: "gateway",
		PORT: "0",
		HEALTH_PORT: "0",
		METRICS_PORT: "0",
		NODE_ID: nodeId,
		NAMESPACE: namespace,
		TRANSPORTER: natsUrl,
		// Never connected to: the gateway reaches the database only through other services.
		DATABASE_URL: "postgres://unused@127.0.0.1:1/unused",
		...extra,
	};
}

beforeAll(async () => {
	dir = mkdtempSync(join(tmpdir(), "ride-nats-auth-"));
	if (hasNatsServer) await startComposeNats();
}, 20_000);

afterAll(async () => {
	for (const p of started) await p.kill("SIGKILL");
	await nats?.stop();
	rmSync(dir, { recursive: true, force: true });
});

(hasNatsServer ? describe : describe.skip)("NATS with authentication (real nats-server)", () => {
	test("a node with the credentials joins and answers another broker's call; nodes without them, or with a wrong password, are refused", async () => {
		const passwordFile = join(dir, "nats-password");
		writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });

		// Started together: the refused ones have the time the good one takes to start.
		const good = startServiceProcess("with-credentials", nodeEnv("node-good", { NATS_USER: "gateway", NATS_PASSWORD_FILE: passwordFile }));
		const wrong = spawnNode(
			"wrong-password",
			[...TSX, "bin/server.ts"],
			nodeEnv("node-wrong", { NATS_USER: "gateway", NATS_PASSWORD: "not-the-password" }),
		);
		const none = spawnNode("no-credentials", [...TSX, "bin/server.ts"], nodeEnv("node-none", {}));
		started.push(wrong, none);
		started.push(await good);

		// The nats-server refuses the others: the transporter reports it and the broker never starts.
		await wrong.waitFor(/Authorization Violation/i, 30_000);
		await none.waitFor(/Authorization Violation/i, 30_000);

		// A second broker with the credentials calls across the bus.
		const broker = new ServiceBroker(
			buildBrokerConfig({
				TRANSPORTER: natsUrl,
				NAMESPACE: namespace,
				NATS_USER: "operator",
				NATS_PASSWORD: passwords.operator,
				NODE_ID: "caller",
				METRICS_PORT: "0",
				LOGLEVEL: "warn",
			}),
		);
		await broker.start();
		try {
			await waitFor("gateway.node-good in the registry", () => broker.registry.nodes.get("gateway.node-good")?.available === true);
			const health = await broker.call<{ cpu?: unknown }, Record<string, never>>("$node.health", {}, { nodeID: "gateway.node-good" });
			expect(health.cpu).toBeDefined();
			// What any bus member can read of a node's options holds no password.
			const options = await broker.call<unknown, Record<string, never>>("$node.options", {}, { nodeID: "gateway.node-good" });
			expect(JSON.stringify(options)).not.toContain(password);
			// The refused nodes never joined.
			expect(broker.registry.nodes.get("gateway.node-wrong")).toBeUndefined();
			expect(broker.registry.nodes.get("node-none")).toBeUndefined();
		} finally {
			await broker.stop();
		}
		expect(wrong.output()).not.toMatch(/started successfully/);
		expect(none.output()).not.toMatch(/started successfully/);
		for (const p of started) expect([p.name, p.output().includes(password)]).toEqual([p.name, false]);
	}, 90_000);
});
