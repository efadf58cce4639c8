import { startNode } from "../runtime/node";
import { installCrashLogging } from "../runtime/crash-logging";
import { handleShutdownSignals, shutdownSettingsFrom } from "../runtime/shutdown";

/**
 * `npm start`: runs the services named by `SERVICES` (all by default) with
 * the settings of the operations contract. With no settings at all: every
 * service in this process, an embedded PostgreSQL in ./data, the simulated
 * fleet, the API on port 3000. `npm run start:prod` runs the same file
 * compiled (dist/bin/server.js), as the container image does.
 *
 * SIGTERM/SIGINT: graceful shutdown (runtime/shutdown.ts) — readiness fails
 * first, requests in flight finish, then the broker stops, all bounded by
 * SHUTDOWN_TIMEOUT_MS.
 */
async function main(): Promise<void> {
	// With NODE_ENV=production a crash is one JSON line without a stack.
	installCrashLogging(process.env.NODE_ENV === "production");
	const settings = shutdownSettingsFrom(process.env);
	const node = await startNode();
	handleShutdownSignals(node, settings);
}

main().catch((err: unknown) => {
	// The message only, never the stack.
	console.error("Start-up failed:", err instanceof Error ? err.message : err);
	process.exit(1);
});
