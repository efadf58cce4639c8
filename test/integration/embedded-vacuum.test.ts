import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { QueryTypes, type Sequelize } from "sequelize";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "../../runtime/embedded-postgres";
import { startEmbeddedVacuum, type EmbeddedVacuum } from "../../runtime/embedded-vacuum";
import { acquireSequelize, releaseSequelize } from "../../mixins/db.mixin";
import { waitFor } from "../helpers/wait";

/**
 * PGlite has no autovacuum (runtime/embedded-vacuum.ts): the embedded
 * runtime vacuums and analyses on a timer, through the process's pool, the
 * tables autovacuum's thresholds say are due. The test reads the
 * statistics of the same session.
 */

const dir = mkdtempSync(join(tmpdir(), "ride-vacuum-"));
const env = { DB_POOL_MAX: "1", DB_PREPARED_STATEMENTS: "off" };
let db: EmbeddedPostgres | undefined;
let pool: Sequelize | undefined;
let vacuum: EmbeddedVacuum | undefined;

afterAll(async () => {
	await vacuum?.stop();
	if (pool) await releaseSequelize(pool);
	await db?.stop();
	rmSync(dir, { recursive: true, force: true });
});

interface TableStats {
	n_live_tup: number;
	n_dead_tup: number;
	n_mod_since_analyze: number;
	vacuum_count: number;
	analyze_count: number;
}

async function statsOf(table: string): Promise<TableStats> {
	const rows = await pool!.query<TableStats>(
		"SELECT n_live_tup::int, n_dead_tup::int, n_mod_since_analyze::int, vacuum_count::int, analyze_count::int FROM pg_stat_user_tables WHERE relname = $1",
		{ bind: [table], type: QueryTypes.SELECT },
	);
	return rows[0];
}

test("vacuums and analyses the tables past autovacuum's thresholds, leaves the others, and runs on its timer", async () => {
	db = await startEmbeddedPostgres(dir, 4);
	pool = acquireSequelize(db.url, env);
	await pool.query("CREATE TABLE churn (id int PRIMARY KEY, v int NOT NULL)");
	await pool.query("INSERT INTO churn SELECT i, 0 FROM generate_series(1, 1000) AS g(i)");
	await pool.query("CREATE TABLE calm (id int PRIMARY KEY, v int NOT NULL)");
	await pool.query("INSERT INTO calm SELECT i, 0 FROM generate_series(1, 1000) AS g(i)");
	// Statistics reach the view when the session flushes them, up to a second later: the inserts must count before the analyse.
	await waitFor("the inserts to count", async () => (await statsOf("calm")).n_live_tup === 1000);
	await pool.query("VACUUM (ANALYZE) calm");
	await waitFor("the analyse to count", async () => (await statsOf("calm")).analyze_count === 1);
	for (let i = 1; i <= 5; i++) await pool.query(`UPDATE churn SET v = ${i}`);
	// 40 dead rows in a 1,000-row table: under 50 + 20% (vacuum) and 50 + 10% (analyse).
	await pool.query("UPDATE calm SET v = 1 WHERE id <= 40");
	await waitFor("the changes to count", async () => (await statsOf("churn")).n_dead_tup >= 1000 && (await statsOf("calm")).n_mod_since_analyze >= 40);
	const calmBefore = await statsOf("calm");

	vacuum = startEmbeddedVacuum(db.url, { ...env, EMBEDDED_VACUUM_MS: "0" }, (m) => {
		throw new Error(m);
	});
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
	await pool.query("UPDATE churn SET v = v + 1 WHERE id <= 160");
	await waitFor("the changes to count", async () => (await statsOf("churn")).n_mod_since_analyze >= 160);
	expect(await vacuum.runOnce()).toEqual({ vacuumed: [], analysed: ["public.churn"] });
	await vacuum.stop();

	// On its own timer.
	await pool.query("UPDATE churn SET v = v + 1");
	await waitFor("the changes to count", async () => (await statsOf("churn")).n_dead_tup >= 1000);
	const before = (await statsOf("churn")).vacuum_count;
	const warnings: string[] = [];
	vacuum = startEmbeddedVacuum(db.url, { ...env, EMBEDDED_VACUUM_MS: "200" }, (m) => warnings.push(m));
	await waitFor("a timed vacuum", async () => (await statsOf("churn")).vacuum_count > before);
	await vacuum.stop();
	expect(warnings).toEqual([]);
}, 120_000);
