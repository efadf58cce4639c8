import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TEST_NATS_URL } from "../../helpers/db";
import { freePort, PartnerApi } from "../../helpers/http";
import { processesFor, spawnRepl, startPlatform, type Platform, type ServiceProcess } from "../../helpers/processes";
import { rideRequest } from "../../helpers/rides";
import { waitFor } from "../../helpers/wait";
import { startPartnerEndpoint, type PartnerEndpoint } from "../../helpers/webhooks";

/**
 * `npm run repl` (bin/repl.ts) against a running cluster: `call` commands
 * piped into the Moleculer REPL, answers checked — the operator recipes of
 * docs/OPERATIONS.md: create a partner, list services and nodes, look up a
 * ride and its events, move a driver, replay a failed webhook. And, with no
 * TRANSPORTER, the REPL on the embedded all-in-one node.
 */
const PROMPT = "ride $ ";

/** The REPL process: command lines in, what each printed before the next prompt out. */
class Repl {
	private constructor(private readonly proc: ServiceProcess) {}

	static async start(env: Record<string, string>): Promise<Repl> {
		const proc = spawnRepl(env);
		try {
			await proc.waitFor(PROMPT, 90_000);
		} catch (err) {
			proc.child.kill("SIGKILL");
			throw err;
		}
		return new Repl(proc);
	}

	/** Sends one command line and returns what it printed before the next prompt. */
	async run(line: string, timeoutMs = 20_000): Promise<string> {
		const from = this.proc.output().length;
		this.proc.child.stdin!.write(`${line}\n`);
		await this.proc.waitFor(PROMPT, timeoutMs, from);
		const out = this.proc.output();
		return out.slice(from, out.indexOf(PROMPT, from));
	}

	/** Leaves with the `exit` command, or by ending the input; either way the node stops cleanly. */
	async close(how: "end of input" | "exit command" = "end of input"): Promise<number | null> {
		const { child, exited } = this.proc;
		if (child.exitCode !== null) return child.exitCode;
		if (how === "exit command") child.stdin!.write("exit\n");
		else child.stdin!.end();
		const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
		const code = await exited;
		clearTimeout(timer);
		return code;
	}
}

/** A string field of the REPL's (util.inspect) answer: `name: 'value'`. */
function field(answer: string, name: string): string {
	const m = new RegExp(`\\b${name}: '([^']+)'`).exec(answer);
	if (!m) throw new Error(`no ${name} in:\n${answer}`);
	return m[1];
}

describe("REPL against a running cluster", () => {
	let platform: Platform;
	let repl: Repl;
	let endpoint: PartnerEndpoint | undefined;
	const home = mkdtempSync(join(tmpdir(), "ride-repl-"));

	beforeAll(async () => {
		platform = await startPlatform({
			label: "repl",
			env: { FLEET_MODE: "live", WEBHOOK_RETRY_SCHEDULE_MS: "100,100", WEBHOOK_TIMEOUT_MS: "2000" },
			processes: processesFor({ pricing: 1, riders: 1, orders: 1, dispatch: 1, notifications: 1 }),
		});
		// The REPL joins the cluster like an operator's laptop would: same transporter and namespace.
		repl = await Repl.start({ TRANSPORTER: TEST_NATS_URL, NAMESPACE: platform.cluster.namespace, HOME: home, SERVICES: "" });
	}, 240_000);

	afterAll(async () => {
		await repl?.close();
		await platform?.stop();
		await endpoint?.close();
		rmSync(home, { recursive: true, force: true });
	}, 60_000);

	test("recipes: create a partner, services and nodes, a ride and its events, move a driver, replay a failed webhook", async () => {
		// Create a partner.
		const created = await repl.run('call partners.create --name "Repl Partner"');
		const partnerId = field(created, "partnerId");
		const apiKey = field(created, "apiKey");
		const webhookSecret = field(created, "webhookSecret");
		expect(partnerId).toMatch(/^ptn_/);
		expect(webhookSecret).toMatch(/^whsec_/);
		expect(await repl.run("call partners.list")).toContain("Repl Partner");

		// List services and nodes.
		const services = await repl.run("services");
		for (const name of ["gateway", "partners", "pricing", "riders", "orders", "dispatch", "notifications"]) expect(services).toContain(name);
		const nodes = await repl.run("nodes");
		for (const label of ["gateway", "orders", "dispatch", "notifications"]) expect(nodes).toContain(`${platform.cluster.namespace}-${label}`);

		// A ride booked by the new partner, whose endpoint refuses everything for now.
		endpoint = await startPartnerEndpoint(webhookSecret);
		endpoint.behave(() => ({ status: 500 }));
		const api = new PartnerApi(`http://127.0.0.1:${platform.gatewayPort}`, apiKey);
		const order = await api.post<{ orderId: string }>("/ride/create-order", rideRequest(`${endpoint.url}/hooks`, 1));
		expect(order.status).toBe(201);
		const { orderId } = order.body;
		expect((await api.post("/ride/cancel", { orderId })).status).toBe(200);

		// Look up the ride and its events.
		const ride = await repl.run(`call orders.get --orderId ${orderId}`);
		expect(field(ride, "status")).toBe("customer_cancelled");
		expect(field(ride, "partnerId")).toBe(partnerId);
		const failedEvents = await waitFor(
			"the webhook to fail for good",
			async () => {
				const answer = await repl.run(`call orders.events --orderId ${orderId} --#partnerId ${partnerId}`);
				return /state: 'failed'/.test(answer) ? answer : null;
			},
			30_000,
			300,
		);
		expect(failedEvents).toContain("status: 'customer_cancelled'");
		const eventId = field(failedEvents, "eventId");

		// Move a driver.
		const driver = await repl.run('call dispatch.register --name "Ravi K" --phone +919800012345 --vehicleNumber KA01AB1234 --serviceType cab');
		const driverId = field(driver, "driverId");
		await repl.run(`call dispatch.goOnline --driverId ${driverId} --location.lat 12.9716 --location.lng 77.5946`);
		const moved = await repl.run(`call dispatch.reportLocation --driverId ${driverId} --location.lat 12.9801 --location.lng 77.6012 --location.heading 90`);
		expect(moved).toMatch(/lat: 12\.9801/);
		expect(moved).toMatch(/lng: 77\.6012/);

		// Replay the failed webhook once the partner is back.
		endpoint.behave(() => ({ status: 200 }));
		const replay = await repl.run(`call notifications.replay --eventId ${eventId}`);
		expect(replay).toMatch(/replayed: true/);
		const delivered = await waitFor("the replayed webhook", () => endpoint!.delivered().find((h) => h.eventId === eventId), 20_000);
		expect(delivered.signatureValid).toBe(true);
		expect(delivered.status).toBe("customer_cancelled");
		await waitFor(
			"the event delivered",
			async () => /state: 'delivered'/.test(await repl.run(`call orders.events --orderId ${orderId} --#partnerId ${partnerId}`)),
			20_000,
			300,
		);

		// A partner-scoped call without the partner is refused, not answered.
		expect(await repl.run(`call orders.events --orderId ${orderId}`)).toMatch(/UNAUTHORIZED|Missing or invalid API key/);
	}, 120_000);

	test("end of input stops the REPL node cleanly", async () => {
		expect(await repl.close()).toBe(0);
	}, 40_000);
});

describe("REPL without TRANSPORTER: the embedded all-in-one node", () => {
	const dir = mkdtempSync(join(tmpdir(), "ride-repl-embedded-"));

	afterAll(() => rmSync(dir, { recursive: true, force: true }));

	const embeddedEnv = async () => ({
		TRANSPORTER: "",
		DATABASE_URL: "",
		SERVICES: "",
		NAMESPACE: "",
		DATA_DIR: join(dir, "data"),
		HOME: dir,
		PORT: String(await freePort()),
		METRICS_PORT: "0",
		HEALTH_PORT: "",
		FLEET_MODE: "live",
		LOGLEVEL: "warn",
	});

	test("starts every service on the embedded database, answers calls, and closes the database cleanly on exit", async () => {
		const first = await Repl.start(await embeddedEnv());
		let partnerId: string;
		try {
			partnerId = field(await first.run("call partners.create --name Embedded"), "partnerId");
			expect(partnerId).toMatch(/^ptn_/);
			const services = await first.run("services");
			for (const name of ["gateway", "orders", "dispatch", "notifications"]) expect(services).toContain(name);
		} finally {
			expect(await first.close("exit command")).toBe(0);
		}
		// The same data directory opens again with the partner in it.
		const second = await Repl.start(await embeddedEnv());
		try {
			expect(await second.run("call partners.list")).toContain(partnerId);
		} finally {
			expect(await second.close()).toBe(0);
		}
	}, 120_000);
});
