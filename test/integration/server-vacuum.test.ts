import type { Client } from "pg";
import { SERVER_VACUUM_LOCK_KEY, databaseVacuum, startServerVacuum, type ServerVacuum } from "../../runtime/server-vacuum";
import { connect, createTestDatabase, type TestDatabase } from "../helpers/db";
import { startTestNode } from "../helpers/node";
import { waitFor } from "../helpers/wait";

/**
 * The stand-in for autovacuum (runtime/server-vacuum.ts), on the server
 * PostgreSQL: it starts only when the server says autovacuum is off; a pass
 * vacuums and analyses the tables autovacuum's thresholds name, and only
 * those; only the process holding the advisory lock runs one.
 */

let db: TestDatabase;
let client: Client;
const running: Array<Pick<ServerVacuum, "stop">> = [];

beforeAll(async () => {
	db = await createTestDatabase("vacuum");
	client = await connect(db.url);
});

afterAll(async () => {
	for (const v of running) await v.stop();
	await client?.end();
	await db?.drop();
});

interface TableStats {
	n_live_tup: number;
	n_dead_tup: number;
	n_mod_since_analyze: number;
	vacuum_count: number;
	analyze_count: number;
}

async function statsOf(table: string): Promise<TableStats> {
	// A fresh read of the statistics (a transaction's reads are cached).
	await client.query("SELECT pg_stat_clear_snapshot()");
	const { rows } = await client.query<TableStats>("SELECT n_live_tup::int, n_dead_tup::int, n_mod_since_analyze::int, vacuum_count::int, analyze_count::int FROM pg_stat_user_tables WHERE relname = $1", [table]);
	return rows[0];
}

const quiet = { warn: (m: string) => expect(m).toBeUndefined() };

test("a node starts it only when the server has autovacuum off, and then says so; SERVER_VACUUM_MS=0 turns it all off", async () => {
	const { rows } = await client.query<{ autovacuum: string }>("SHOW autovacuum");
	const off = rows[0].autovacuum !== "on";
	const warned = (spy: jest.SpyInstance) => spy.mock.calls.map((args) => args.join(" ")).filter((line) => line.includes("autovacuum is off"));
	// Caught, not printed: the warning is what the test reads.
	const spy = jest.spyOn(console, "warn").mockImplementation(() => undefined);
	try {
		// As production starts it (runtime/node.ts), with the default SERVER_VACUUM_MS.
		const node = await startTestNode({ databaseUrl: db.url, services: ["riders"], env: { SERVER_VACUUM_MS: "60000" } });
		await node.stop();
		expect(warned(spy)).toHaveLength(off ? 1 : 0);
		spy.mockClear();

		const vacuum = await startServerVacuum(db.url, { SERVER_VACUUM_MS: "60000" }, { warn: (m) => console.warn(m) });
		if (vacuum) running.push(vacuum);
		expect(vacuum !== undefined).toBe(off);
		expect(warned(spy)).toHaveLength(off ? 1 : 0);
		spy.mockClear();

		expect(await startServerVacuum(db.url, { SERVER_VACUUM_MS: "0" }, { warn: (m) => console.warn(m) })).toBeUndefined();
		expect(warned(spy)).toHaveLength(0);
	} finally {
		spy.mockRestore();
	}
});

test("a pass vacuums and analyses the tables past autovacuum's thresholds, and leaves the others", async () => {
	await client.query("CREATE TABLE churn (id int PRIMARY KEY, v int NOT NULL)");
	await client.query("INSERT INTO churn SELECT i, 0 FROM generate_series(1, 1000) AS g(i)");
	await client.query("CREATE TABLE calm (id int PRIMARY KEY, v int NOT NULL)");
	await client.query("INSERT INTO calm SELECT i, 0 FROM generate_series(1, 1000) AS g(i)");
	// Statistics reach the shared view when a backend flushes them, up to a second later: the inserts must count before the analyse.
	await waitFor("the inserts to count", async () => (await statsOf("calm")).n_live_tup === 1000);
	await client.query("VACUUM (ANALYZE) calm");
	await waitFor("the analyse to count", async () => (await statsOf("calm")).analyze_count === 1);
	for (let i = 1; i <= 5; i++) await client.query(`UPDATE churn SET v = ${i}`);
	// 40 dead rows in a 1,000-row table: under 50 + 20% (vacuum) and 50 + 10% (analyse).
	await client.query("UPDATE calm SET v = 1 WHERE id <= 40");
	await waitFor("the changes to count", async () => (await statsOf("churn")).n_mod_since_analyze >= 6000 && (await statsOf("calm")).n_mod_since_analyze >= 40);
	const calmBefore = await statsOf("calm");

	const vacuum = databaseVacuum(db.url, 0, quiet);
	running.push(vacuum);
	expect(await vacuum.runOnce()).toEqual({ vacuumed: ["public.churn"], analysed: ["public.churn"] });
	await waitFor("the vacuum and the analyse to count", async () => {
		const s = await statsOf("churn");
		return s.vacuum_count >= 1 && s.analyze_count >= 1;
	});
	expect((await statsOf("churn")).n_dead_tup).toBe(0);
	expect(await statsOf("calm")).toEqual(calmBefore);

	// Nothing changed since: nothing to do.
	expect(await vacuum.runOnce()).toEqual({ vacuumed: [], analysed: [] });

	// 160 changed rows of 1,000: past the analyse threshold (50 + 10%), not the vacuum one (50 + 20%).
	await client.query("UPDATE churn SET v = v + 1 WHERE id <= 160");
	await waitFor("the changes to count", async () => (await statsOf("churn")).n_mod_since_analyze >= 160);
	expect(await vacuum.runOnce()).toEqual({ vacuumed: [], analysed: ["public.churn"] });
}, 60_000);

test("only the process holding the lock vacuums: another one skips its pass", async () => {
	const holder = await connect(db.url);
	try {
		await holder.query("SELECT pg_advisory_lock($1)", [SERVER_VACUUM_LOCK_KEY]);
		const vacuum = databaseVacuum(db.url, 0, quiet);
		running.push(vacuum);
		expect(await vacuum.runOnce()).toBe("busy");
		await holder.query("SELECT pg_advisory_unlock($1)", [SERVER_VACUUM_LOCK_KEY]);
		expect(await vacuum.runOnce()).not.toBe("busy");
	} finally {
		await holder.end();
	}
});

test("runs on its timer", async () => {
	for (let i = 0; i < 3; i++) await client.query("UPDATE churn SET v = v + 1");
	await waitFor("the changes to count", async () => (await statsOf("churn")).n_mod_since_analyze >= 3000);
	const before = (await statsOf("churn")).analyze_count;
	const vacuum = databaseVacuum(db.url, 200, quiet);
	running.push(vacuum);
	await waitFor("a timed pass", async () => (await statsOf("churn")).analyze_count > before);
	await vacuum.stop();
}, 30_000);
