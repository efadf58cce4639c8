import type { Sequelize } from "sequelize";
import { acquireSequelize, releaseSequelize } from "../mixins/db.mixin";
import { envInt, type Env } from "../lib/settings";
import { periodicPass } from "./periodic-pass";

/** Every this many vacuums, the pass also analyses (ANALYZE reads a sample of every table: ~0.7 s in a 5-minute soak's database). */
export const ANALYZE_EVERY = 10;

export interface EmbeddedVacuum {
	/** One pass now (tests, and what the timer runs); true when it analysed too. */
	runOnce(): Promise<boolean>;
	stop(): Promise<void>;
}

/**
 * Autovacuum for the embedded database. PGlite runs PostgreSQL as one
 * session without background workers, so nothing vacuums or analyses: in a
 * 5-minute soak, webhook deliveries had 74,000 dead row versions beside
 * 39,000 live ones and dispatch's rides 41,000 beside 800, every query on
 * them read the dead ones too, PGlite's thread took ever more of the CPU,
 * and the services' event-loop delay rose with it.
 *
 * Every `EMBEDDED_VACUUM_MS` (60 s; 0 = never) this runs `VACUUM`, and every
 * tenth time `VACUUM (ANALYZE)`, through the process's own pool: the
 * connections to PGlite share its one session, so a statement sent on
 * another connection could land inside a service's open transaction, while
 * the pool hands its connection out only between transactions. A pass
 * holds the database for its length (tens of milliseconds; the analysing
 * one longer), acceptable for the zero-configuration database, which serves
 * one process.
 */
export function startEmbeddedVacuum(url: string, env: Env, warn: (message: string) => void): EmbeddedVacuum {
	const everyMs = envInt(env, "EMBEDDED_VACUUM_MS", 60_000, 0);
	const sequelize: Sequelize = acquireSequelize(url, env);
	let passes = 0;
	let released = false;
	const vacuum = periodicPass(
		async () => {
			passes += 1;
			const analyse = passes % ANALYZE_EVERY === 0;
			await sequelize.query(analyse ? "VACUUM (ANALYZE)" : "VACUUM");
			return analyse;
		},
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
