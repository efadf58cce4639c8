import { Client } from "pg";
import { envInt, type Env } from "../lib/settings";
import { ANALYZE_EVERY } from "./embedded-vacuum";

/** One process at a time vacuums a database (session advisory lock); "vacu" in ASCII. */
export const SERVER_VACUUM_LOCK_KEY = 0x76616375;

export type VacuumPass = "vacuumed" | "analysed" | "busy" | "off";

export interface ServerVacuum {
	/** What the server said at start: false when its autovacuum was off. */
	readonly autovacuum: boolean;
	/**
	 * One pass now (tests, and what the timer runs): "vacuumed" or
	 * "analysed" when this process ran it, "busy" when another process held
	 * the lock, "off" when the stand-in is not running (autovacuum is on).
	 */
	runOnce(): Promise<VacuumPass>;
	stop(): Promise<void>;
}

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
 * autovacuum on stayed flat (docs/BENCHMARKS.md, "Soak"). Without
 * autoanalyze the planner also keeps the statistics of the empty tables
 * it first saw and scans them sequentially.
 *
 * At start every process that uses the database asks `SHOW autovacuum`.
 * When it is on (any normal server) this does nothing. When it is off, the
 * process says so once (turning it on is the fix, docs/OPERATIONS.md) and,
 * unless `SERVER_VACUUM_MS` is 0, runs `VACUUM (SKIP_LOCKED)` over the
 * database every `SERVER_VACUUM_MS` (60 s), with ANALYZE on the first pass
 * and every tenth. Several processes share one database: a pass runs only
 * in the process that takes the advisory lock, on its own connection (VACUUM
 * cannot run inside a transaction, so not through the pool). Turning
 * autovacuum on later takes effect for this at the next restart; until
 * then a pass over an already vacuumed database is cheap (SKIP_LOCKED, and
 * the visibility map skips clean pages).
 */
export async function startServerVacuum(url: string, env: Env, log: ServerVacuumLog): Promise<ServerVacuum> {
	const everyMs = envInt(env, "SERVER_VACUUM_MS", 60_000, 0);
	const probe = new Client({ connectionString: url });
	await probe.connect();
	let autovacuum: boolean;
	try {
		autovacuum = (await probe.query<{ autovacuum: string }>("SHOW autovacuum")).rows[0]?.autovacuum === "on";
	} finally {
		await probe.end().catch(() => undefined);
	}
	if (autovacuum) return { autovacuum, runOnce: async () => "off", stop: async () => undefined };
	log.warn(
		"autovacuum is off on this PostgreSQL server: the platform's busiest tables bloat and every statement on them slows down over hours. " +
			(everyMs > 0
				? `Until it is on, one process at a time vacuums the database every ${everyMs} ms (SERVER_VACUUM_MS; 0 = never). Turn autovacuum on (docs/OPERATIONS.md).`
				: "SERVER_VACUUM_MS is 0, so nothing vacuums it. Turn autovacuum on (docs/OPERATIONS.md)."),
	);
	return { autovacuum, ...databaseVacuum(url, everyMs, log) };
}

/**
 * The stand-in's passes (startServerVacuum decides whether it runs): every
 * `everyMs` (0 = only when asked), in whichever process holds the lock.
 */
export function databaseVacuum(url: string, everyMs: number, log: ServerVacuumLog): Omit<ServerVacuum, "autovacuum"> {
	let passes = 0;
	let running: Promise<VacuumPass> | null = null;
	let timer: NodeJS.Timeout | undefined;

	const pass = async (): Promise<VacuumPass> => {
		const client = new Client({ connectionString: url, application_name: "ride-platform vacuum" });
		client.on("error", () => undefined);
		await client.connect();
		try {
			const { rows } = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1) AS locked", [SERVER_VACUUM_LOCK_KEY]);
			if (!rows[0]?.locked) return "busy";
			const analyse = passes % ANALYZE_EVERY === 0;
			passes += 1;
			await client.query(analyse ? "VACUUM (ANALYZE, SKIP_LOCKED)" : "VACUUM (SKIP_LOCKED)");
			return analyse ? "analysed" : "vacuumed";
		} finally {
			// Ending the session releases the advisory lock too.
			await client.end().catch(() => undefined);
		}
	};

	const runOnce = () => {
		running ??= pass().finally(() => {
			running = null;
		});
		return running;
	};

	if (everyMs > 0) {
		timer = setInterval(() => runOnce().catch((err: unknown) => log.warn(`Database vacuum failed: ${(err as Error)?.message ?? err}`)), everyMs);
		timer.unref();
	}

	return {
		runOnce,
		async stop() {
			if (timer) clearInterval(timer);
			timer = undefined;
			await running?.catch(() => undefined);
		},
	};
}
