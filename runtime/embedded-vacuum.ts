import { QueryTypes, type Sequelize } from "sequelize";
import { acquireSequelize, releaseSequelize } from "../mixins/db.mixin";
import { envInt, type Env } from "../lib/settings";
import { periodicPass } from "./periodic-pass";
import { vacuumDueTables, type VacuumReport } from "./due-tables";

export interface EmbeddedVacuum {
	/** One pass now (tests, and what the timer runs): the tables it vacuumed and analysed. */
	runOnce(): Promise<VacuumReport>;
	stop(): Promise<void>;
}

/**
 * Autovacuum for the embedded database. PGlite runs PostgreSQL as one
 * session without background workers, so nothing vacuums or analyses: in a
 * 5-minute soak, webhook deliveries had 74,000 dead row versions beside
 * 39,000 live ones and dispatch's rides 41,000 beside 800, every query on
 * them read the dead ones too, PGlite's thread took ever more of the CPU,
 * and the services' event-loop delay rose with it. Without analyse, the
 * planner also keeps planning against the statistics of the empty tables it
 * first saw.
 *
 * Every `EMBEDDED_VACUUM_MS` (60 s, autovacuum's own naptime; 0 = never)
 * this does what autovacuum would: it vacuums and analyses the tables its
 * thresholds say are due (due-tables.ts, shared with the server stand-in),
 * so a pass costs in proportion to what changed and a new database gets its
 * statistics in its first minute. It runs through the process's own pool:
 * the connections to PGlite share its one session, so a statement sent on
 * another connection could land inside a service's open transaction, while
 * the pool hands its connection out only between transactions. A pass
 * holds the database for its length (tens of milliseconds), acceptable for
 * the zero-configuration database, which serves one process.
 */
export function startEmbeddedVacuum(url: string, env: Env, warn: (message: string) => void): EmbeddedVacuum {
	const everyMs = envInt(env, "EMBEDDED_VACUUM_MS", 60_000, 0);
	const sequelize: Sequelize = acquireSequelize(url, env);
	let released = false;
	const vacuum = periodicPass(
		() => vacuumDueTables((sql) => sequelize.query(sql, { type: QueryTypes.SELECT })),
		everyMs,
		(err) => warn(`Embedded database vacuum failed: ${(err as Error)?.message ?? err}`),
	);

	return {
		runOnce: vacuum.runOnce,
		async stop() {
			await vacuum.stop();
			if (!released) {
				released = true;
				await releaseSequelize(sequelize);
			}
		},
	};
}
