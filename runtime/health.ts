import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ServiceBroker } from "moleculer";
import { Pool } from "pg";

/**
 * Health endpoints of one process, on `HEALTH_PORT`, for orchestrators
 * (Kubernetes probes, compose healthchecks). Every process has them, whichever
 * services it runs; the gateway additionally answers `/health/*` on the API
 * port with its own view (the services it needs).
 *
 *   GET /health/live   200 while the process runs (restart it when this fails)
 *   GET /health/ready  200 once the broker started, the transporter is
 *                      connected and the database answers, and until the
 *                      process starts draining on SIGTERM; 503 otherwise
 */
export interface HealthServer {
	port: number;
	/** Readiness answers 503 from now on (graceful shutdown). */
	setDraining(): void;
	readonly draining: boolean;
	/** The readiness verdict, as the endpoint gives it. */
	check(): Promise<ReadinessReport>;
	close(): Promise<void>;
}

export interface ReadinessReport {
	ready: boolean;
	status: "ready" | "starting" | "draining" | "transporter disconnected" | "database unavailable";
}

export interface HealthOptions {
	port: number;
	host?: string;
	/** Checked with `SELECT 1` when set (processes whose services use the database). */
	databaseUrl?: string;
}

export async function startHealthServer(broker: ServiceBroker, opts: HealthOptions): Promise<HealthServer> {
	let draining = false;
	const pool = opts.databaseUrl
		? new Pool({ connectionString: opts.databaseUrl, max: 1, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 2_000, application_name: "health" })
		: undefined;
	// An idle pooled client whose server went away errors here; the next check reconnects.
	pool?.on("error", () => undefined);

	async function databaseAnswers(): Promise<boolean> {
		if (!pool) return true;
		try {
			await Promise.race([pool.query("SELECT 1"), new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), 2_000).unref())]);
			return true;
		} catch {
			return false;
		}
	}

	async function check(): Promise<ReadinessReport> {
		if (draining) return { ready: false, status: "draining" };
		if (!broker.started) return { ready: false, status: "starting" };
		const transit = (broker as unknown as { transit?: { connected: boolean } }).transit;
		if (transit && !transit.connected) return { ready: false, status: "transporter disconnected" };
		if (!(await databaseAnswers())) return { ready: false, status: "database unavailable" };
		return { ready: true, status: "ready" };
	}

	function send(res: ServerResponse, status: number, body: unknown): void {
		const text = JSON.stringify(body);
		res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), "Cache-Control": "no-store" });
		res.end(text);
	}

	const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
		const path = (req.url ?? "/").split("?")[0];
		if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, { status: "method not allowed" });
		if (path === "/health/live") return send(res, 200, { status: "ok", nodeID: broker.nodeID });
		if (path === "/health/ready") {
			void check().then(
				(report) => send(res, report.ready ? 200 : 503, { status: report.status, nodeID: broker.nodeID }),
				() => send(res, 503, { status: "error", nodeID: broker.nodeID }),
			);
			return;
		}
		send(res, 404, { status: "not found" });
	});
	// Probes are short requests; never let an idle probe connection hold up shutdown.
	server.keepAliveTimeout = 1_000;

	await new Promise<void>((resolve, reject) => {
		server.once("error", reject);
		server.listen(opts.port, opts.host ?? "0.0.0.0", () => {
			server.off("error", reject);
			resolve();
		});
	});
	const port = (server.address() as AddressInfo).port;

	return {
		port,
		setDraining() {
			draining = true;
		},
		get draining() {
			return draining;
		},
		check,
		async close() {
			await new Promise<void>((resolve) => {
				server.close(() => resolve());
				server.closeAllConnections();
			});
			await pool?.end().catch(() => undefined);
		},
	};
}
