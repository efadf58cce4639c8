import os from "node:os";
import type { REPLServer } from "node:repl";
import { ServiceBroker } from "moleculer";
import { buildBrokerConfig } from "../moleculer.config";
import { readSettings } from "../lib/settings";
import { startNode, type RunningNode } from "../runtime/node";

/**
 * `npm run repl`: the Moleculer REPL (moleculer-repl) for developers and
 * operators. Recipes: docs/OPERATIONS.md.
 *
 * - With `TRANSPORTER` set, it joins that running cluster (same `NAMESPACE`)
 *   as a node without services of its own: `call`, `services`, `nodes`,
 *   `actions`, `events`, `metrics` reach every node over NATS.
 * - Without, it starts the embedded all-in-one node (every service, the
 *   embedded database in ./data, the API on `PORT`) and opens the REPL on it.
 *   Stop `npm start` first: one process per data directory.
 *
 * Exit with `quit` or Ctrl-D (or end of piped input); the node stops cleanly.
 */
async function main(): Promise<void> {
	const env = process.env;
	const settings = readSettings(env);
	let node: RunningNode;
	if (settings.transporter) {
		// A pure client: no services, no metrics port, quiet logs, its own node id.
		const replEnv = {
			...env,
			METRICS_PORT: "0",
			LOGLEVEL: env.REPL_LOGLEVEL || "warn",
			// Never NODE_ID: inside a pod or container that is the running server's own id.
			NODE_ID: env.REPL_NODE_ID || `repl-${os.hostname()}-${process.pid}`,
		};
		const broker = new ServiceBroker(buildBrokerConfig(replEnv));
		await broker.start();
		node = { broker, services: [], stop: () => broker.stop() };
		// Discovery: wait (at most 3 s) until another node has announced itself, so
		// `services` and `call` see the cluster from the first command.
		for (let waited = 0; waited < 3_000 && broker.registry.nodes.toArray().length < 2; waited += 100) {
			await new Promise((resolve) => setTimeout(resolve, 100));
		}
	} else {
		node = await startNode();
	}

	const { broker } = node;
	broker.options.replOptions = { ...broker.options.replOptions, delimiter: "ride $" };
	// moleculer-repl's `exit` command and end of input both call broker.stop() and then
	// exit the process: close the rest of the node (health server, embedded database)
	// from the broker's own `stopped` hook so it happens on every way out.
	let closed: Promise<void> | undefined;
	broker.options.stopped = () => {
		closed ??= (async () => {
			await node.health?.close().catch(() => undefined);
			await node.embedded?.stop().catch(() => undefined);
		})();
		return closed;
	};
	const replServer = broker.repl() as unknown as REPLServer | undefined;
	if (!replServer) throw new Error("moleculer-repl is not installed");
	replServer.removeAllListeners("exit");
	replServer.on("exit", () => {
		broker.stop().then(
			() => process.exit(0),
			() => process.exit(1),
		);
	});
}

main().catch((err: unknown) => {
	console.error("REPL start-up failed:", err instanceof Error ? err.message : err);
	process.exit(1);
});
