import { Client } from "pg";
import { envInt, type Env } from "../lib/settings";
import { periodicPass, type PeriodicPass } from "./periodic-pass";

/**
 * The tables of this database that autovacuum would vacuum or analyse now,
 * by its own thresholds as the server has them set (they are read even when
 * autovacuum is off). A table never analysed has reltuples -1: counted as 0,
 * so its first 50 changes make it due, as autovacuum would. `name` is quoted.
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

/** One process at a time vacuums a database (session advisory lock); "vacu" in ASCII. */
export const SERVER_VACUUM_LOCK_KEY = 0x76616375;

/** What one pass did: the tables it vacuumed and analysed, or "busy" when another process held the lock. */
export type VacuumPass = { vacuumed: string[]; analysed: string[] } | "busy";

/** The running stand-in: one pass now (tests, and what the timer runs), and stop. */
export type ServerVacuum = PeriodicPass<VacuumPass>;

export interface ServerVacuumLog {
	warn(message: string): void;
}

/**
 * Stand-in for autovacuum on a PostgreSQL server that has it turned off.
 *
 * The platform updates a few small tables all the time (a driver's row on
 * every position, a ride's dispatch row and webhook delivery rows on every
 * step). Without vacuum their dead row versions pile up and every statement
 * on them reads those too: in a 10-minute soak on a server with autovacuum
 * off (this repository's CI machine has it off), the webhook recording
 * statement went from 1.8 to 17 ms and 340 to 2,400 buffers per call, and
 * the services' event-loop delay rose all along; the same soak with
 * autovacuum on stayed flat (docs/BENCHMARKS.md, "The seventh session's
 * run"). Without autoanalyze the planner also keeps the statistics of the
 * empty tables it first saw and scans them sequentially.
 *
 * At start every process that uses the database asks `SHOW autovacuum`.
 * When it is on (any normal server) this does nothing. When it is off, the
 * process says so once (turning it on is the fix, docs/OPERATIONS.md) and
 * does autovacuum's job every `SERVER_VACUUM_MS` (60 s, autovacuum's own
 * naptime) by autovacuum's own rules, read from the server's settings: a
 * table is vacuumed when its dead rows exceed `autovacuum_vacuum_threshold` +
 * `autovacuum_vacuum_scale_factor` × its rows (or its inserts since the last
 * vacuum the insert threshold and scale), and analysed when its changes since
 * the last analyse exceed `autovacuum_analyze_threshold` +
 * `autovacuum_analyze_scale_factor` × its rows. So a pass costs one look
 * at the statistics plus work in proportion to what changed, never a sweep
 * of everything. Several processes share one
 * database: a pass runs only in the process that takes the advisory lock, on
 * its own connection (VACUUM cannot run inside a transaction, so not through
 * the pool), with SKIP_LOCKED. Turning autovacuum on later takes effect for
 * this at the next restart (until then both run, by the same thresholds).
 * `SERVER_VACUUM_MS=0` turns all of it off, the check and the warning too.
 * Resolves to the running stand-in, or undefined when none runs (autovacuum
 * on, or turned off).
 */
export async function startServerVacuum(url: string, env: Env, log: ServerVacuumLog): Promise<ServerVacuum | undefined> {
	const everyMs = envInt(env, "SERVER_VACUUM_MS", 60_000, 0);
	// 0: the operator has opted out (or a test database that lives for one test file).
	if (everyMs === 0) return undefined;
	const probe = new Client({ connectionString: url });
	await probe.connect();
	let autovacuum: boolean;
	try {
		autovacuum = (await probe.query<{ autovacuum: string }>("SHOW autovacuum")).rows[0]?.autovacuum === "on";
	} finally {
		await probe.end().catch(() => undefined);
	}
	if (autovacuum) return undefined;
	log.warn(
		"autovacuum is off on this PostgreSQL server: the platform's busiest tables bloat and every statement on them slows down over hours. " +
			`Until it is on, one process at a time vacuums and analyses its tables by autovacuum's thresholds every ${everyMs} ms (SERVER_VACUUM_MS; 0 = never, and no warning). Turn autovacuum on (docs/OPERATIONS.md).`,
	);
	return databaseVacuum(url, everyMs, log);
}

/**
 * The stand-in's passes (startServerVacuum decides whether it runs): every
 * `everyMs` (0 = only when asked), in whichever process holds the lock.
 */
export function databaseVacuum(url: string, everyMs: number, log: ServerVacuumLog): ServerVacuum {
	return periodicPass(
		async (): Promise<VacuumPass> => {
			const client = new Client({ connectionString: url, application_name: "ride-platform vacuum" });
			client.on("error", () => undefined);
			await client.connect();
			try {
				const { rows } = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1) AS locked", [SERVER_VACUUM_LOCK_KEY]);
				if (!rows[0]?.locked) return "busy";
				const due = await client.query<{ name: string; vacuum_due: boolean; analyze_due: boolean }>(DUE_TABLES_SQL);
				for (const table of due.rows) {
					// One statement per table: a table another session holds is skipped, not waited for.
					await client.query(table.vacuum_due ? `VACUUM (SKIP_LOCKED${table.analyze_due ? ", ANALYZE" : ""}) ${table.name}` : `ANALYZE (SKIP_LOCKED) ${table.name}`);
				}
				return { vacuumed: due.rows.filter((t) => t.vacuum_due).map((t) => t.name), analysed: due.rows.filter((t) => t.analyze_due).map((t) => t.name) };
			} finally {
				// Ending the session releases the advisory lock too.
				await client.end().catch(() => undefined);
			}
		},
		everyMs,
		(err) => log.warn(`Database vacuum failed: ${(err as Error)?.message ?? err}`),
	);
}
