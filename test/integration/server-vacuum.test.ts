import type { Client } from "pg";
import { SERVER_VACUUM_LOCK_KEY, databaseVacuum, startServerVacuum, type ServerVacuum } from "../../runtime/server-vacuum";
import { ANALYZE_EVERY } from "../../runtime/embedded-vacuum";
import { connect, createTestDatabase, type TestDatabase } from "../helpers/db";

/**
 * The stand-in for autovacuum (runtime/server-vacuum.ts), on the server
 * PostgreSQL: it starts only when the server says autovacuum is off, a pass
 * vacuums away dead row versions and analyses on the first and every tenth
 * pass, and only the process holding the advisory lock runs one.
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
	n_dead_tup: number;
	vacuum_count: number;
	analyze_count: number;
}

async function statsOf(table: string): Promise<TableStats> {
	// Statistics reach the shared view when a backend flushes them (at most about a second later).
	await client.query("SELECT pg_stat_clear_snapshot()");
	const { rows } = await client.query<TableStats>("SELECT n_dead_tup::int, vacuum_count::int, analyze_count::int FROM pg_stat_user_tables WHERE relname = $1", [table]);
	return rows[0];
}

async function until(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
	const end = Date.now() + ms;
	while (!(await check())) {
		if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
		await new Promise((r) => setTimeout(r, 100));
	}
}

test("starts only when the server has autovacuum off, and then says so", async () => {
	const { rows } = await client.query<{ autovacuum: string }>("SHOW autovacuum");
	const off = rows[0].autovacuum !== "on";
	const warnings: string[] = [];
	const vacuum = await startServerVacuum(db.url, { SERVER_VACUUM_MS: "0" }, { warn: (m) => warnings.push(m) });
	running.push(vacuum);
	expect(vacuum.autovacuum).toBe(!off);
	if (off) {
		expect(warnings).toEqual([expect.stringContaining("autovacuum is off")]);
		expect(warnings[0]).toContain("SERVER_VACUUM_MS is 0");
	} else {
		expect(warnings).toEqual([]);
		expect(await vacuum.runOnce()).toBe("off");
	}
});

test("a pass vacuums away dead row versions, analyses on the first and every tenth pass", async () => {
	await client.query("CREATE TABLE churn (id int PRIMARY KEY, v int NOT NULL)");
	await client.query("INSERT INTO churn SELECT i, 0 FROM generate_series(1, 1000) AS g(i)");
	for (let i = 1; i <= 5; i++) await client.query(`UPDATE churn SET v = ${i}`);
	await until("the dead row versions to show", async () => (await statsOf("churn")).n_dead_tup >= 1000);

	const warnings: string[] = [];
	const vacuum = databaseVacuum(db.url, 0, { warn: (m) => warnings.push(m) });
	running.push(vacuum);
	expect(await vacuum.runOnce()).toBe("analysed");
	await until("the vacuum and the analyse to count", async () => {
		const s = await statsOf("churn");
		return s.vacuum_count >= 1 && s.analyze_count >= 1;
	});
	expect((await statsOf("churn")).n_dead_tup).toBe(0);

	const passes: string[] = [];
	for (let i = 2; i <= ANALYZE_EVERY + 1; i++) passes.push(await vacuum.runOnce());
	expect(passes.slice(0, -1).every((p) => p === "vacuumed")).toBe(true);
	expect(passes[passes.length - 1]).toBe("analysed");
	expect(warnings).toEqual([]);
}, 60_000);

test("only the process holding the lock vacuums: another one skips its pass", async () => {
	const holder = await connect(db.url);
	try {
		await holder.query("SELECT pg_advisory_lock($1)", [SERVER_VACUUM_LOCK_KEY]);
		const vacuum = databaseVacuum(db.url, 0, { warn: () => undefined });
		running.push(vacuum);
		expect(await vacuum.runOnce()).toBe("busy");
		await holder.query("SELECT pg_advisory_unlock($1)", [SERVER_VACUUM_LOCK_KEY]);
		expect(await vacuum.runOnce()).toBe("analysed");
	} finally {
		await holder.end();
	}
});

test("runs on its timer", async () => {
	await client.query("UPDATE churn SET v = v + 1");
	const before = (await statsOf("churn")).vacuum_count;
	const warnings: string[] = [];
	const vacuum = databaseVacuum(db.url, 200, { warn: (m) => warnings.push(m) });
	running.push(vacuum);
	await until("a timed vacuum", async () => (await statsOf("churn")).vacuum_count > before);
	await vacuum.stop();
	expect(warnings).toEqual([]);
}, 30_000);
