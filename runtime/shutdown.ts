import type { Server } from "node:http";
import type { RunningNode } from "./node";

/**
 * Graceful shutdown of one process (SIGTERM from Kubernetes, compose, or a
 * developer's Ctrl-C), in the order that loses nothing:
 *
 *  1. Readiness fails first: the process's own `/health/ready` and, when the
 *     gateway runs here, the gateway's (`gateway.drain`), so load balancers
 *     stop sending new work. Responses from now on carry `Connection: close`.
 *  2. Optionally wait `SHUTDOWN_DELAY_MS` for load balancers to notice (on
 *     Kubernetes the preStop hook's sleep does this instead).
 *  3. The gateway stops first: it stops accepting connections and waits for
 *     the HTTP requests in flight to be answered, while every service they
 *     call still runs.
 *  4. The broker stops: it tells its peers it has no services any more, keeps
 *     serving calls already on their way (registry.stopDelay), waits for
 *     running calls and event handlers (context tracking), then stops every
 *     service — notifications lets its webhook attempts finish and releases
 *     its claims, the DB pools close.
 *  5. The health server and the embedded database close.
 *
 * All of it is bounded: `SHUTDOWN_TIMEOUT_MS` (lib/shutdown-settings.ts, below
 * the usual 30 s grace period) after the signal the process exits anyway. Nothing
 * acknowledged depends on finishing: every accepted change is committed in
 * PostgreSQL before it is acknowledged, and a webhook claim left behind
 * expires and is taken over by another instance.
 */
export interface ShutdownOptions {
	/** Pause between failing readiness and stopping (load balancers catch up). */
	delayMs?: number;
	/** Progress messages. */
	log?: (message: string) => void;
}

import type { ShutdownSettings } from "../lib/shutdown-settings";
export { readShutdownSettings as shutdownSettingsFrom, type ShutdownSettings } from "../lib/shutdown-settings";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The gateway's HTTP server, when this process runs the gateway (moleculer-web keeps it as `server`). */
function gatewayServer(node: RunningNode): Server | undefined {
	const gateway = node.broker.getLocalService("gateway") as unknown as { server?: Server } | undefined;
	return gateway?.server && typeof gateway.server.close === "function" ? gateway.server : undefined;
}

export async function gracefulShutdown(node: RunningNode, opts: ShutdownOptions = {}): Promise<void> {
	const { broker } = node;
	const log = opts.log ?? ((m: string) => broker.logger.info(m));

	// 1. Readiness fails first.
	node.health?.setDraining();
	const gateway = broker.getLocalService("gateway");
	const server = gatewayServer(node);
	if (gateway) {
		try {
			await broker.call("gateway.drain", {}, { nodeID: broker.nodeID, timeout: 5_000 });
		} catch (err) {
			log(`gateway.drain failed (${(err as Error).message}); stopping the gateway anyway`);
		}
	}
	if (server) {
		// Clients stop reusing connections, so none is idle-but-reused when the server closes.
		server.on("request", (_req, res) => {
			try {
				if (!res.headersSent) res.setHeader("Connection", "close");
			} catch {
				/* headers already on their way */
			}
		});
	}

	// 2. Let load balancers notice.
	if (opts.delayMs && opts.delayMs > 0) {
		log(`Draining: not ready, stopping in ${opts.delayMs} ms`);
		await sleep(opts.delayMs);
	}

	// 3. The gateway: no new connections; requests in flight are answered.
	if (gateway) {
		log("Stopping the gateway: waiting for HTTP requests in flight");
		// A keep-alive connection whose answer went out is idle: close it so the server can finish closing.
		const reaper = server ? setInterval(() => server.closeIdleConnections(), 100) : undefined;
		try {
			await broker.destroyService(gateway);
		} finally {
			if (reaper) clearInterval(reaper);
		}
	}

	// 4 + 5. The broker (running calls and handlers finish, services stop), health, embedded database.
	log("Stopping the broker");
	await node.stop();
}

/**
 * Wires SIGTERM/SIGINT to `gracefulShutdown` with a hard deadline; a second
 * Ctrl-C exits at once. Returns the function (for tests and the REPL).
 */
export function handleShutdownSignals(node: RunningNode, settings: ShutdownSettings, exit: (code: number) => void = process.exit): (signal: string) => void {
	let shuttingDown = false;
	const shutdown = (signal: string) => {
		if (shuttingDown) {
			// Wrappers (npm, tsx, process managers) often relay one SIGTERM twice: keep going.
			// A second Ctrl-C is a person who wants out now.
			if (signal !== "SIGINT") return;
			node.broker.logger.warn("SIGINT received again, exiting now");
			exit(1);
			return;
		}
		shuttingDown = true;
		node.broker.logger.info(`${signal} received, shutting down gracefully (at most ${settings.timeoutMs} ms)`);
		const deadline = setTimeout(() => {
			node.broker.logger.error(`Graceful shutdown did not finish within ${settings.timeoutMs} ms, exiting`);
			exit(1);
		}, settings.timeoutMs);
		deadline.unref();
		gracefulShutdown(node, { delayMs: settings.delayMs }).then(
			() => {
				clearTimeout(deadline);
				exit(0);
			},
			(err: unknown) => {
				node.broker.logger.error("Shutdown failed", err);
				exit(1);
			},
		);
	};
	process.on("SIGTERM", () => shutdown("SIGTERM"));
	process.on("SIGINT", () => shutdown("SIGINT"));
	return shutdown;
}
