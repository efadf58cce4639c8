import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
// Types only: PGlite (≈ 10 MB of WebAssembly) is loaded when the embedded
// database is actually started, never by a process that has DATABASE_URL.
import type * as PGliteModule from "@electric-sql/pglite";
import type * as PGliteSocketModule from "@electric-sql/pglite-socket";

export interface EmbeddedPostgres {
	url: string;
	stop(): Promise<void>;
}

/**
 * The zero-configuration database: a real PostgreSQL (PGlite) kept in
 * `dataDir`, served on a free loopback port so that `pg` and Sequelize reach
 * it exactly as they reach a server. One process per data directory.
 */
export async function startEmbeddedPostgres(dataDir: string, maxConnections = 64): Promise<EmbeddedPostgres> {
	/* eslint-disable @typescript-eslint/no-require-imports */
	const { PGlite } = require("@electric-sql/pglite") as typeof PGliteModule;
	const { PGLiteSocketServer } = require("@electric-sql/pglite-socket") as typeof PGliteSocketModule;
	/* eslint-enable @typescript-eslint/no-require-imports */
	const dir = resolve(dataDir, "pg");
	mkdirSync(dir, { recursive: true });
	const db = await PGlite.create(dir);
	const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections });
	await server.start();
	// getServerConn() answers "host:port" once listening.
	const conn = server.getServerConn();
	const port = Number(conn.split(":").pop());
	return {
		url: `postgres://postgres@127.0.0.1:${port}/postgres`,
		async stop() {
			await server.stop();
			await db.close();
		},
	};
}
