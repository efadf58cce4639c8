import { randomBytes } from "node:crypto";
import { spawn, type ChildProcess } from "node:child_process";
import { resolve } from "node:path";
import { createTestDatabase, TEST_NATS_URL, type TestDatabase } from "./db";
import { PartnerApi, freePort } from "./http";
import { uniqueNamespace } from "./node";
import { startPartnerEndpoint, type PartnerEndpoint } from "./webhooks";
import { waitFor } from "./wait";

/**
 * Separate OS processes for the suites that test processes (crashes, SIGTERM,
 * the compiled build, the REPL): one node process with its output recorded, a
 * set of `bin/server.ts` processes on one NATS namespace that can be killed
 * and restarted like containers, and the whole platform set up that way.
 */

const ROOT = resolve(__dirname, "../..");
/** The TypeScript sources run as they are, the way `npm start` runs them. */
const TSX = ["--import", "tsx"];
// eslint-disable-next-line no-control-regex -- ANSI colour codes start with ESC
const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, "");

export interface ServiceProcess {
	name: string;
	child: ChildProcess;
	/** Everything the process printed so far (stdout + stderr, colours stripped). */
	output(): string;
	/** Resolves when the output after position `from` contains `text`; rejects after `timeoutMs` or if the process exits first. */
	waitFor(text: string | RegExp, timeoutMs?: number, from?: number): Promise<void>;
	/** Sends a signal and waits for the exit; returns the exit code (null when killed by a signal). */
	kill(signal?: NodeJS.Signals): Promise<number | null>;
	exited: Promise<number | null>;
}

/**
 * Spawns node (the Node 24 jest runs under) with `args` in the repository,
 * with the test's environment plus `env`, recording what it prints.
 */
export function spawnNode(name: string, args: string[], env: Record<string, string>, { stdin = false } = {}): ServiceProcess {
	const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: [stdin ? "pipe" : "ignore", "pipe", "pipe"] });
	let out = "";
	const waiters = new Set<() => void>();
	const onData = (chunk: Buffer) => {
		out += stripAnsi(chunk.toString());
		if (out.length > 2_000_000) out = out.slice(-1_000_000);
		for (const check of [...waiters]) check();
	};
	child.stdout!.on("data", onData);
	child.stderr!.on("data", onData);
	const exited = new Promise<number | null>((res) => child.on("exit", (code) => res(code)));

	return {
		name,
		child,
		exited,
		output: () => out,
		waitFor(text, timeoutMs = 30_000, from = 0) {
			const seen = () => (typeof text === "string" ? out.indexOf(text, from) >= 0 : text.test(out.slice(from)));
			if (seen()) return Promise.resolve();
			return new Promise<void>((res, rej) => {
				const settle = (err?: string) => {
					waiters.delete(check);
					clearTimeout(timer);
					if (err) rej(new Error(`${name}: ${err}. Output tail:\n${out.slice(-3000)}`));
					else res();
				};
				const check = () => seen() && settle();
				const timer = setTimeout(() => settle(`"${String(text)}" not seen within ${timeoutMs} ms`), timeoutMs);
				waiters.add(check);
				void exited.then(() => waiters.has(check) && settle(`exited before "${String(text)}"`));
			});
		},
		async kill(signal = "SIGTERM") {
			if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
			child.kill(signal);
			return exited;
		},
	};
}

/** Runs a node script to its end (a build step); resolves with its exit code and output. */
export async function runNodeScript(args: string[]): Promise<{ code: number | null; out: string }> {
	const proc = spawnNode(args.join(" "), args, {});
	const code = await proc.exited;
	return { code, out: proc.output() };
}

export interface ScriptRun {
	code: number | null;
	stdout: string;
	stderr: string;
}

/**
 * Runs a TypeScript entry point (`bin/partner.ts`, `bin/migrate.ts`) to its
 * end the way `npm run` does, alone (no transporter), with its stdout and
 * stderr apart: a command-line tool's answer is its stdout.
 */
export function runScript(script: string, args: string[], env: Record<string, string>): Promise<ScriptRun> {
	return new Promise((done, fail) => {
		const child = spawn(process.execPath, [...TSX, script, ...args], {
			cwd: ROOT,
			env: { ...process.env, TRANSPORTER: "", ...env },
			stdio: ["ignore", "pipe", "pipe"],
		});
		let stdout = "";
		let stderr = "";
		child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
		child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
		child.on("error", fail);
		child.on("exit", (code) => done({ code, stdout, stderr }));
	});
}

/**
 * Starts `bin/server.ts` as a separate OS process with the given environment,
 * the way a container would run it. Resolves once the broker reports it
 * started; a process that does not get there is killed (jest would not exit).
 */
export async function startServiceProcess(
	name: string,
	env: Record<string, string>,
	readyTimeoutMs = 60_000,
	/** Node arguments; e.g. ["dist/bin/server.js"] runs the compiled build (`npm run start:prod`). */
	args: string[] = [...TSX, "bin/server.ts"],
): Promise<ServiceProcess> {
	const proc = spawnNode(name, args, { METRICS_PORT: "0", LOGLEVEL: "info", ...env });
	try {
		await proc.waitFor("started successfully", readyTimeoutMs);
	} catch (err) {
		proc.child.kill("SIGKILL");
		throw err;
	}
	return proc;
}

/** Starts `bin/repl.ts` (`npm run repl`) with its input open for commands. */
export function spawnRepl(env: Record<string, string>): ServiceProcess {
	return spawnNode("repl", [...TSX, "bin/repl.ts"], env, { stdin: true });
}

export interface ProcessSpec {
	/** Unique label, e.g. "dispatch-2". */
	label: string;
	/** SERVICES of that process. */
	services: string;
	env?: Record<string, string>;
	/** Run the compiled code (`node dist/bin/server.js`, as the image does) instead of tsx. */
	compiled?: boolean;
}

/** One process per service, labelled by its name; or `n` of them, labelled `<service>-1` … `<service>-n`. */
export function processesFor(counts: Record<string, number>): ProcessSpec[] {
	return Object.entries(counts).flatMap(([services, n]) =>
		n === 1 ? [{ label: services, services }] : Array.from({ length: n }, (_, i) => ({ label: `${services}-${i + 1}`, services })),
	);
}

/**
 * Server processes on one NATS namespace and one test database, each with its
 * own SERVICES, that can be killed, restarted and stopped like containers.
 */
export class Cluster {
	readonly namespace: string;
	readonly procs = new Map<string, ServiceProcess>();
	private readonly specs = new Map<string, ProcessSpec>();
	private starts = 0;

	constructor(
		label: string,
		private readonly databaseUrl: string,
		/** Environment shared by every process (FLEET_MODE, SIM_SPEED, …). */
		private readonly baseEnv: Record<string, string> = {},
		/** Join this namespace (e.g. a test node's) instead of a new one. */
		namespace = uniqueNamespace(label),
	) {
		this.namespace = namespace;
	}

	private envFor(spec: ProcessSpec): Record<string, string> {
		return {
			NODE_ENV: "test",
			TRANSPORTER: TEST_NATS_URL,
			NAMESPACE: this.namespace,
			DATABASE_URL: this.databaseUrl,
			LOGLEVEL: process.env.TEST_LOGLEVEL || "info",
			METRICS_PORT: "0",
			HEALTH_PORT: "",
			PORT: "0",
			WEBHOOK_ALLOW_PRIVATE: "true",
			SHUTDOWN_DELAY_MS: "0",
			BOOTSTRAP_PARTNER_KEY: "",
			BOOTSTRAP_WEBHOOK_SECRET: "",
			// These suites drive load and poll statuses; they test processes, not the per-partner limiter.
			RATE_LIMIT_PER_MINUTE: "0",
			// Nor the failed-authentication throttle: they poll refused keys from one address (127.0.0.1).
			AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
			...this.baseEnv,
			...spec.env,
			SERVICES: spec.services,
		};
	}

	async start(spec: ProcessSpec): Promise<ServiceProcess> {
		this.specs.set(spec.label, spec);
		this.starts += 1;
		const env = { ...this.envFor(spec), NODE_ID: `${this.namespace}-${spec.label}-${this.starts}` };
		const proc = await startServiceProcess(spec.label, env, 90_000, spec.compiled ? ["dist/bin/server.js"] : undefined);
		this.procs.set(spec.label, proc);
		return proc;
	}

	startAll(specs: ProcessSpec[]): Promise<ServiceProcess[]> {
		return Promise.all(specs.map((s) => this.start(s)));
	}

	get(label: string): ServiceProcess {
		const p = this.procs.get(label);
		if (!p) throw new Error(`no process ${label}`);
		return p;
	}

	/** Sends `signal` and waits for the exit; returns the exit code (null when killed by a signal). */
	kill(label: string, signal: NodeJS.Signals = "SIGKILL"): Promise<number | null> {
		return this.get(label).kill(signal);
	}

	/** Starts the process again with the same settings (same port for the gateway). */
	restart(label: string): Promise<ServiceProcess> {
		const spec = this.specs.get(label);
		if (!spec) throw new Error(`no process ${label}`);
		return this.start(spec);
	}

	/** Output tails of every process, for a failing test's message. */
	tails(chars = 2500): string {
		return [...this.procs.values()].map((p) => `----- ${p.name} -----\n${p.output().slice(-chars)}`).join("\n");
	}

	/** SIGTERM to every process, then SIGKILL whatever is still running after `graceMs`. */
	async stopAll(graceMs = 30_000): Promise<void> {
		await Promise.all(
			[...this.procs.values()].map(async (p) => {
				const timer = setTimeout(() => p.child.kill("SIGKILL"), graceMs);
				await p.kill("SIGTERM");
				clearTimeout(timer);
			}),
		);
	}
}

/** The bootstrap partner the gateway+partners process ensures at start. */
export interface ClusterPartner {
	apiKey: string;
	webhookSecret: string;
}

export interface PlatformOptions {
	/** Names the test database and the NATS namespace. */
	label: string;
	/** Environment of every process. */
	env: Record<string, string>;
	/** More environment for the gateway+partners process (its PORT is chosen here). */
	gatewayEnv?: Record<string, string>;
	/** Every other process, started together once the gateway's partners service has ensured the partner. */
	processes: ProcessSpec[];
}

/** The platform as separate processes, with a partner and that partner's webhook endpoint. */
export interface Platform {
	db: TestDatabase;
	cluster: Cluster;
	partner: ClusterPartner;
	/** The partner's endpoint, verifying signatures with its secret. */
	endpoint: PartnerEndpoint;
	/** The partner API as that partner. */
	api: PartnerApi;
	gatewayPort: number;
	/** Stops every process (SIGTERM), the endpoint, and drops the database. */
	stop(): Promise<void>;
}

/**
 * A test database, the partner's endpoint, the gateway+partners process
 * (label "gateway") with a bootstrap partner, then `processes`; resolves once
 * the gateway is ready. A start that fails stops what it started.
 */
export async function startPlatform(opts: PlatformOptions): Promise<Platform> {
	const partner: ClusterPartner = {
		apiKey: `rk_test_${randomBytes(24).toString("base64url")}`,
		webhookSecret: `whsec_${randomBytes(24).toString("base64")}`,
	};
	const db = await createTestDatabase(opts.label);
	const cluster = new Cluster(opts.label, db.url, opts.env);
	let endpoint: PartnerEndpoint | undefined;
	const stop = async () => {
		await cluster.stopAll();
		await endpoint?.close();
		await db.drop();
	};
	try {
		endpoint = await startPartnerEndpoint(partner.webhookSecret);
		const gatewayPort = await freePort();
		await cluster.start({
			label: "gateway",
			services: "gateway,partners",
			env: { PORT: String(gatewayPort), BOOTSTRAP_PARTNER_KEY: partner.apiKey, BOOTSTRAP_WEBHOOK_SECRET: partner.webhookSecret, ...opts.gatewayEnv },
		});
		await cluster.startAll(opts.processes);
		const api = new PartnerApi(`http://127.0.0.1:${gatewayPort}`, partner.apiKey);
		// Ready = the gateway sees every service it needs, across NATS, and each answers.
		await waitFor("gateway ready", async () => (await api.get("/health/ready")).status === 200, 60_000, 200);
		return { db, cluster, partner, endpoint, api, gatewayPort, stop };
	} catch (err) {
		const tails = cluster.tails();
		await stop().catch(() => undefined);
		throw new Error(`${(err as Error).message}\n${tails}`);
	}
}
