import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceBroker } from "moleculer";
import { connect as natsConnect } from "nats";
import { buildBrokerConfig } from "../../../moleculer.config";
import { ALL_BUS_USERS } from "../../../contracts/bus";
import { renderAuthorization, renderTls } from "../../../lib/bus-permissions";
import { uniqueNamespace } from "../../helpers/node";
import { hasNatsServer, startNatsServer, type OwnNatsServer } from "../../helpers/nats-server";
import { waitFor } from "../../helpers/wait";

/**
 * NATS over TLS as shipped (the tls block of k8s/infra/nats-server.conf, the
 * CA given to every client as NATS_TLS_CA): a real nats-server with a
 * certificate made here by openssl (a CA and a server certificate for
 * 127.0.0.1), brokers with the production configuration that verify it
 * against the CA and call each other over it, and clients refused when they
 * do not trust the CA or do not speak TLS.
 */

const hasOpenssl = spawnSync("openssl", ["version"], { encoding: "utf8" }).status === 0;
if (!hasOpenssl) console.warn("nats-tls.test.ts skipped: openssl is not installed (it makes the test certificates)");

const passwords: Record<string, string> = Object.fromEntries(ALL_BUS_USERS.map((u) => [u, `pw-${u}-${randomBytes(9).toString("hex")}`]));
const namespace = uniqueNamespace("bustls");
let dir: string;
let nats: OwnNatsServer | undefined;
let port: number;
const brokers: ServiceBroker[] = [];

function openssl(args: string[]): void {
	const r = spawnSync("openssl", args, { cwd: dir, encoding: "utf8" });
	if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
}

/** A CA, and a server certificate for 127.0.0.1 signed by it, as tls.crt/tls.key (the names of the `nats-tls` Secret's keys). */
function makeCertificates(): void {
	openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=ride test CA"]);
	openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr", "-subj", "/CN=nats"]);
	writeFileSync(join(dir, "san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
	openssl(["x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "tls.crt", "-days", "1", "-extfile", "san.ext"]);
}

beforeAll(async () => {
	if (!hasOpenssl || !hasNatsServer) return;
	dir = mkdtempSync(join(tmpdir(), "ride-nats-tls-"));
	makeCertificates();
	const conf = join(dir, "nats.conf");
	// The shipped TLS block, pointed at this directory, and the generated users.
	writeFileSync(conf, `${renderTls(dir)}\n${renderAuthorization()}`);
	nats = await startNatsServer(conf, passwords);
	port = nats.port;
	expect(nats.output()).toMatch(/TLS required for client connections/);
}, 60_000);

afterAll(async () => {
	for (const b of brokers) await b.stop().catch(() => undefined);
	await nats?.stop();
	if (dir) rmSync(dir, { recursive: true, force: true });
});

(hasOpenssl && hasNatsServer ? describe : describe.skip)("NATS over TLS (real nats-server, openssl certificates)", () => {
	test("brokers that verify the server against NATS_TLS_CA connect and call each other", async () => {
		const env = (user: string, name: string) => ({
			TRANSPORTER: `nats://127.0.0.1:${port}`,
			NAMESPACE: namespace,
			NATS_USER: user,
			NATS_PASSWORD: passwords[user],
			NATS_TLS_CA: join(dir, "ca.crt"),
			NODE_ID: name,
			METRICS_PORT: "0",
			LOGLEVEL: "warn",
		});
		const riders = new ServiceBroker(buildBrokerConfig(env("riders", "pod-1")));
		const operator = new ServiceBroker(buildBrokerConfig(env("operator", "repl-1")));
		brokers.push(riders, operator);
		await Promise.all([riders.start(), operator.start()]);
		await waitFor("riders.pod-1 in the operator's registry", () => operator.registry.nodes.get("riders.pod-1")?.available === true, 15_000);
		const health = await operator.call<{ cpu?: unknown }, Record<string, never>>("$node.health", {}, { nodeID: "riders.pod-1" });
		expect(health.cpu).toBeDefined();
	}, 60_000);

	test("a client that does not trust the CA, or does not speak TLS, is refused", async () => {
		const base = { servers: `127.0.0.1:${port}`, user: "operator", pass: passwords.operator, maxReconnectAttempts: 0, timeout: 5_000 };
		// TLS with the system's CAs only: the self-signed chain is not trusted.
		await expect(natsConnect({ ...base, tls: {} })).rejects.toThrow(/certificate|self.signed|verify/i);
		// No TLS at all: the server requires it.
		await expect(natsConnect({ ...base, tls: null })).rejects.toThrow();
	}, 30_000);
});
