import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { QueryTypes, type Sequelize } from "sequelize";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "../../../runtime/embedded-postgres";
import { ANALYZE_EVERY, startEmbeddedVacuum, type EmbeddedVacuum } from "../../../runtime/embedded-vacuum";
import { acquireSequelize, releaseSequelize } from "../../../mixins/db.mixin";
import { waitFor } from "../../helpers/wait";

/**
 * PGlite has no autovacuum (runtime/embedded-vacuum.ts): the embedded
 * runtime vacuums on a timer, through the process's pool, and analyses
 * every tenth pass. The test reads the statistics of the same session.
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
	n_dead_tup: number;
	vacuum_count: number;
	analyze_count: number;
}

async function statsOf(table: string): Promise<TableStats> {
	const rows = await pool!.query<TableStats>("SELECT n_dead_tup::int, vacuum_count::int, analyze_count::int FROM pg_stat_user_tables WHERE relname = $1", {
		bind: [table],
		type: QueryTypes.SELECT,
	});
	return rows[0];
}

test("vacuums away dead row versions, analyses every tenth pass, and runs on its timer", async () => {
	db = await startEmbeddedPostgres(dir, 4);
	pool = acquireSequelize(db.url, env);
	await pool.query("CREATE TABLE churn (id int PRIMARY KEY, v int NOT NULL)");
	await pool.query("INSERT INTO churn SELECT i, 0 FROM generate_series(1, 1000) AS g(i)");
	for (let i = 1; i <= 5; i++) await pool.query(`UPDATE churn SET v = ${i}`);
	await waitFor("the dead row versions to show", async () => (await statsOf("churn")).n_dead_tup >= 1000);

	vacuum = startEmbeddedVacuum(db.url, { ...env, EMBEDDED_VACUUM_MS: "0" }, (m) => {
		throw new Error(m);
	});
	expect(await vacuum.runOnce()).toBe(false);
	await waitFor("the vacuum to count", async () => (await statsOf("churn")).vacuum_count >= 1);
	expect((await statsOf("churn")).n_dead_tup).toBe(0);
	expect((await statsOf("churn")).analyze_count).toBe(0);

	const analysed: boolean[] = [];
	for (let i = 2; i <= ANALYZE_EVERY; i++) analysed.push(await vacuum.runOnce());
	expect(analysed.filter(Boolean)).toHaveLength(1);
	expect(analysed[analysed.length - 1]).toBe(true);
	await waitFor("the analyse to count", async () => (await statsOf("churn")).analyze_count >= 1);
	await vacuum.stop();

	// On its own timer.
	const before = (await statsOf("churn")).vacuum_count;
	const warnings: string[] = [];
	vacuum = startEmbeddedVacuum(db.url, { ...env, EMBEDDED_VACUUM_MS: "200" }, (m) => warnings.push(m));
	await waitFor("a timed vacuum", async () => (await statsOf("churn")).vacuum_count > before);
	await vacuum.stop();
	expect(warnings).toEqual([]);
}, 120_000);
