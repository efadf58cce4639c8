import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "pg";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "../../../runtime/embedded-postgres";

/**
 * The embedded database (no DATABASE_URL) runs PGlite in its own thread: a
 * long statement must not stall the services' event loop, and the data must
 * survive a stop and a start on the same directory.
 */

const dir = mkdtempSync(join(tmpdir(), "ride-embedded-"));
let db: EmbeddedPostgres | undefined;

afterAll(async () => {
	await db?.stop();
	rmSync(dir, { recursive: true, force: true });
});

test("a long statement on the embedded database leaves this thread's event loop turning", async () => {
	db = await startEmbeddedPostgres(dir, 4);
	const client = new Client({ connectionString: db.url });
	await client.connect();
	try {
		// Timer turns that happen while the statement runs: none when PGlite shares this thread.
		let turns = 0;
		let running = true;
		const turn = () => {
			if (!running) return;
			turns++;
			setTimeout(turn, 5);
		};
		const statement = client.query("SELECT count(*)::int AS n FROM generate_series(1, 3000000) AS g(i) WHERE i % 7 = 0");
		setTimeout(turn, 5);
		const result = await statement;
		running = false;
		expect(result.rows[0].n).toBe(428571);
		expect(turns).toBeGreaterThanOrEqual(3);
		await client.query("CREATE TABLE kept (v text)");
		await client.query("INSERT INTO kept VALUES ('still here')");
	} finally {
		await client.end();
	}
	await db.stop();
	db = await startEmbeddedPostgres(dir, 4);
	const again = new Client({ connectionString: db.url });
	await again.connect();
	try {
		expect((await again.query("SELECT v FROM kept")).rows).toEqual([{ v: "still here" }]);
	} finally {
		await again.end();
	}
}, 120_000);
