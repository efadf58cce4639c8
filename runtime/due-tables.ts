/**
 * The tables of this database that autovacuum would vacuum or analyse now,
 * by its own thresholds as the server has them set (they are read even when
 * autovacuum is off, and PGlite has them too). A table never analysed has
 * reltuples -1: counted as 0, so its first 50 changes make it due, as
 * autovacuum would. `name` is quoted.
 */
const DUE_TABLES_SQL = `
WITH t AS (
  SELECT format('%I.%I', s.schemaname, s.relname) AS name, GREATEST(c.reltuples, 0) AS n,
         s.n_dead_tup, s.n_ins_since_vacuum, s.n_mod_since_analyze
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
  WHERE pg_has_role(c.relowner, 'USAGE')
)
SELECT name, vacuum_due, analyze_due FROM (
  SELECT name,
         n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8 + current_setting('autovacuum_vacuum_scale_factor')::float8 * n
           OR (current_setting('autovacuum_vacuum_insert_threshold')::float8 >= 0
               AND n_ins_since_vacuum > current_setting('autovacuum_vacuum_insert_threshold')::float8 + current_setting('autovacuum_vacuum_insert_scale_factor')::float8 * n) AS vacuum_due,
         n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8 + current_setting('autovacuum_analyze_scale_factor')::float8 * n AS analyze_due
  FROM t
) due WHERE vacuum_due OR analyze_due ORDER BY name`;

/** What one pass did: the tables it vacuumed and the ones it analysed (quoted names). */
export interface VacuumReport {
	vacuumed: string[];
	analysed: string[];
}

/** Runs one statement outside any transaction and answers its rows (VACUUM cannot run inside one). */
export type RunStatement = (sql: string) => Promise<unknown[]>;

/**
 * One autovacuum-style pass, the work of both stand-ins (server-vacuum.ts for
 * a server with autovacuum off, embedded-vacuum.ts for PGlite, which has no
 * autovacuum): one look at the statistics, then VACUUM and/or ANALYZE of
 * only the tables that are due, so a pass costs in proportion to what
 * changed since the last one, never a sweep of everything.
 */
export async function vacuumDueTables(run: RunStatement): Promise<VacuumReport> {
	const due = (await run(DUE_TABLES_SQL)) as Array<{ name: string; vacuum_due: boolean; analyze_due: boolean }>;
	for (const table of due) {
		// One statement per table: a table another session holds is skipped, not waited for.
		await run(table.vacuum_due ? `VACUUM (SKIP_LOCKED${table.analyze_due ? ", ANALYZE" : ""}) ${table.name}` : `ANALYZE (SKIP_LOCKED) ${table.name}`);
	}
	return { vacuumed: due.filter((t) => t.vacuum_due).map((t) => t.name), analysed: due.filter((t) => t.analyze_due).map((t) => t.name) };
}
