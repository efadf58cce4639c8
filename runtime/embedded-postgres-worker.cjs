"use strict";
/**
 * The embedded PostgreSQL's own thread (started by embedded-postgres.ts).
 * PGlite executes every statement synchronously in WebAssembly: on the
 * services' thread each query would stall their event loop for as long as it
 * runs. Here it only stalls this thread, and the services reach it over a
 * loopback port like any server.
 *
 * Plain CommonJS so that every runner loads it as it is: tsx, jest and the
 * compiled build (scripts/copy-build-assets.mjs copies it to dist/).
 *
 * Messages: posts { port } once listening (or { error }); on "stop" it closes
 * the socket server and the database, then posts "stopped".
 */
const { mkdirSync } = require("node:fs");
const { resolve } = require("node:path");
const { parentPort, workerData } = require("node:worker_threads");

async function main() {
	const { dataDir, maxConnections } = workerData;
	const { PGlite } = require("@electric-sql/pglite");
	const { PGLiteSocketServer } = require("@electric-sql/pglite-socket");
	const dir = resolve(dataDir, "pg");
	mkdirSync(dir, { recursive: true });
	const db = await PGlite.create(dir);
	const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections });
	await server.start();
	// getServerConn() answers "host:port" once listening.
	const port = Number(server.getServerConn().split(":").pop());
	parentPort.on("message", (message) => {
		if (message !== "stop") return;
		(async () => {
			await server.stop().catch(() => undefined);
			await db.close().catch(() => undefined);
			parentPort.postMessage("stopped");
		})();
	});
	parentPort.postMessage({ port });
}

main().catch((err) => {
	parentPort.postMessage({ error: (err && err.message) || String(err) });
});
