import { join } from "node:path";
import { Worker } from "node:worker_threads";

export interface EmbeddedPostgres {
	url: string;
	stop(): Promise<void>;
}

/** How long a stop waits for the database to close its files before the thread is ended. */
const STOP_WAIT_MS = 10_000;

/**
 * The zero-configuration database: a real PostgreSQL (PGlite) kept in
 * `dataDir`, served on a free loopback port so that `pg` and Sequelize reach
 * it exactly as they reach a server. One process per data directory.
 *
 * PGlite (≈ 10 MB of WebAssembly, loaded only here, never by a process that
 * has DATABASE_URL) runs in a worker thread (embedded-postgres-worker.cjs):
 * it executes statements synchronously, and on the services' thread every
 * query would add its run time to their event-loop delay.
 */
export async function startEmbeddedPostgres(dataDir: string, maxConnections = 64): Promise<EmbeddedPostgres> {
	// Plain CommonJS beside this file, in the sources and in dist/ alike.
	const script = join(__dirname, "embedded-postgres-worker.cjs");
	const worker = new Worker(script, { workerData: { dataDir, maxConnections } });
	const port = await new Promise<number>((resolvePort, reject) => {
		const onMessage = (message: { port?: number; error?: string }) => {
			worker.off("error", reject);
			if (typeof message?.port === "number") resolvePort(message.port);
			else reject(new Error(`Embedded PostgreSQL did not start: ${message?.error ?? "no answer"}`));
		};
		worker.once("message", onMessage);
		worker.once("error", reject);
	}).catch(async (err: unknown) => {
		await worker.terminate();
		throw err;
	});
	return {
		url: `postgres://postgres@127.0.0.1:${port}/postgres`,
		async stop() {
			const stopped = new Promise<void>((done) => {
				worker.once("message", (m) => m === "stopped" && done());
				worker.once("exit", () => done());
			});
			worker.postMessage("stop");
			await Promise.race([stopped, new Promise((r) => setTimeout(r, STOP_WAIT_MS).unref())]);
			await worker.terminate();
		},
	};
}
