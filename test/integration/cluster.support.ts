import { randomBytes, randomInt } from "node:crypto";
import { createServer } from "node:net";
import { startServiceProcess, type ServiceProcess } from "../helpers/processes";
import { TEST_NATS_URL } from "../helpers/db";
import { uniqueNamespace } from "../helpers/node";

/**
 * Support for the multi-process suites (multiprocess, cluster, shutdown, repl):
 * a set of `bin/server.ts` OS processes on one NATS namespace and one test
 * database, each with its own SERVICES, that can be killed, restarted and
 * stopped like containers; plus a small HTTP client for the partner API.
 */

export async function freePort(): Promise<number> {
	return new Promise((resolve, reject) => {
		const srv = createServer();
		srv.once("error", reject);
		srv.listen(0, "127.0.0.1", () => {
			const port = (srv.address() as { port: number }).port;
			srv.close(() => resolve(port));
		});
	});
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

/** A bootstrap partner the gateway+partners process ensures at start. */
export interface ClusterPartner {
	apiKey: string;
	webhookSecret: string;
}

export function newPartnerSecrets(): ClusterPartner {
	return {
		apiKey: `rk_test_${randomBytes(24).toString("base64url")}`,
		webhookSecret: `whsec_${randomBytes(24).toString("base64")}`,
	};
}

export class Cluster {
	readonly namespace: string;
	readonly procs = new Map<string, ServiceProcess>();
	private readonly specs = new Map<string, ProcessSpec & { env: Record<string, string> }>();
	private restarts = 0;

	constructor(
		label: string,
		private readonly databaseUrl: string,
		/** Environment shared by every process (FLEET_MODE, SIM_SPEED, …). */
		private readonly baseEnv: Record<string, string> = {},
	) {
		this.namespace = uniqueNamespace(label);
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
			...this.baseEnv,
			...spec.env,
			SERVICES: spec.services,
		};
	}

	async start(spec: ProcessSpec): Promise<ServiceProcess> {
		const env = this.envFor(spec);
		this.specs.set(spec.label, { ...spec, env });
		this.restarts += 1;
		const proc = await startServiceProcess(spec.label, { ...env, NODE_ID: `${this.namespace}-${spec.label}-${this.restarts}` }, 90_000, spec.compiled ? ["dist/bin/server.js"] : undefined);
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
	async kill(label: string, signal: NodeJS.Signals = "SIGKILL"): Promise<number | null> {
		return this.get(label).kill(signal);
	}

	/** Starts the process again with the same settings (same port for the gateway). */
	async restart(label: string): Promise<ServiceProcess> {
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
				if (p.child.exitCode !== null || p.child.signalCode !== null) return;
				const timer = setTimeout(() => p.child.kill("SIGKILL"), graceMs);
				await p.kill("SIGTERM");
				clearTimeout(timer);
			}),
		);
	}
}

export interface ApiAnswer<T = Record<string, unknown>> {
	status: number;
	body: T;
	headers: Headers;
}

/** The partner API over real HTTP. */
export class PartnerApi {
	constructor(
		public baseUrl: string,
		private readonly apiKey: string,
	) {}

	async post<T = Record<string, unknown>>(path: string, body: unknown, headers: Record<string, string> = {}): Promise<ApiAnswer<T>> {
		const res = await fetch(`${this.baseUrl}${path}`, {
			method: "POST",
			headers: { "Content-Type": "application/json", Authorization: `Bearer ${this.apiKey}`, ...headers },
			body: JSON.stringify(body),
		});
		const text = await res.text();
		let parsed: unknown = text;
		try {
			parsed = JSON.parse(text);
		} catch {
			/* keep the text */
		}
		return { status: res.status, body: parsed as T, headers: res.headers };
	}

	async get(path: string): Promise<ApiAnswer> {
		const res = await fetch(`${this.baseUrl}${path}`);
		const text = await res.text();
		let parsed: unknown = text;
		try {
			parsed = JSON.parse(text);
		} catch {
			/* keep the text */
		}
		return { status: res.status, body: parsed as Record<string, unknown>, headers: res.headers };
	}
}

/** A rider in Bengaluru with a short trip (about 2 km), so simulated rides finish quickly. */
export function rideRequest(webhookURL: string, n: number): Record<string, unknown> {
	const jitter = () => (randomInt(0, 2000) - 1000) / 100_000;
	return {
		user: { name: `Rider ${n}`, phone: `+9198${String(randomInt(0, 100_000_000)).padStart(8, "0")}` },
		serviceType: n % 2 === 0 ? "cab" : "scooty",
		pickup: { lat: 12.9716 + jitter(), lng: 77.5946 + jitter(), address: `Pickup ${n}` },
		drop: { lat: 12.9616 + jitter(), lng: 77.6046 + jitter() },
		webhookURL,
		metadata: { partnerRef: `cluster-${n}` },
	};
}
