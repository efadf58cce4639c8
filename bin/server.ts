import { startNode } from "../runtime/node";

/**
 * `npm start`: runs the services named by `SERVICES` (all by default) with
 * the settings of the operations contract. With no settings at all: every
 * service in this process, an embedded PostgreSQL in ./data, the simulated
 * fleet, the API on port 3000.
 */
async function main(): Promise<void> {
	const node = await startNode();
	let shuttingDown = false;
	const shutdown = (signal: string) => {
		if (shuttingDown) return;
		shuttingDown = true;
		node.broker.logger.info(`${signal} received, shutting down`);
		node.stop().then(
			() => process.exit(0),
			(err: unknown) => {
				node.broker.logger.error("Shutdown failed", err);
				process.exit(1);
			},
		);
	};
	process.on("SIGTERM", () => shutdown("SIGTERM"));
	process.on("SIGINT", () => shutdown("SIGINT"));
}

main().catch((err: unknown) => {
	console.error("Start-up failed:", err instanceof Error ? err.message : err);
	process.exit(1);
});
