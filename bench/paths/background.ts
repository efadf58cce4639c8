/**
 * Background work with rides waiting, measured where it costs: PostgreSQL CPU
 * (the /proc CPU time of this database's own backends, pg_stat_activity) and
 * rows written (pg_stat_database tup_inserted + tup_updated + tup_deleted),
 * per 100 waiting rides. Counting transactions would flatter batching, which
 * keeps them flat by construction.
 *
 * The platform in one process (core 0), live fleet mode, a live key. Drivers
 * online over the driver API (bench/lib/fleet-load.ts, two generators on core
 * 1): half of them near the city centre, each holding an accepted ride
 * (busy); the other half online and pinging 140 km away, free but too far
 * for any ride. Then the floor window (nobody waiting), then WAITING rides
 * booked at the centre that nobody can take (DISPATCH_TIMEOUT_MS long enough
 * that none gives up), and the window again after their first retries.
 */
import { readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import type { Client } from "pg";
import { connect, createTestDatabase } from "../../test/helpers/db";
import { apiKey, fmt, sleep, stopAll, type BenchOptions, type Row } from "../lib/common";
import { GENERATOR_CORE, pin, SERVER_CORE } from "../lib/method";
import { CENTRE, driverTokens, Generator, startLivePlatform, PING_INTERVAL_MS } from "./fleet";

const FAR_AWAY = { lat: 12.2958, lng: 76.6394 };
const TICKS = (() => {
	const n = Number(String(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout).trim());
	return n > 0 ? n : 100;
})();

/** CPU seconds of the live backends connected to `database` (exited ones are lost: the platform's pool keeps its connections). */
async function backendCpuSeconds(pg: Client, database: string): Promise<number> {
	const pids = (await pg.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [database])).rows;
	let ticks = 0;
	for (const { pid } of pids) {
		try {
			const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
			const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
			ticks += Number(f[11]) + Number(f[12]);
		} catch {
			/* gone meanwhile */
		}
	}
	return ticks / TICKS;
}

async function rowsWritten(pg: Client, database: string): Promise<number> {
	await pg.query("SELECT pg_stat_clear_snapshot()");
	const r = await pg.query<{ n: string }>("SELECT (tup_inserted + tup_updated + tup_deleted)::text AS n FROM pg_stat_database WHERE datname = $1", [
		database,
	]);
	return Number(r.rows[0]?.n ?? NaN);
}

/** Rows written/s and backend CPU ms/s over `ms` (after the statistics of what came before are flushed). */
async function window(pg: Client, database: string, ms: number): Promise<{ rowsPerS: number; cpuMsPerS: number }> {
	await sleep(1100);
	const r0 = await rowsWritten(pg, database);
	const c0 = await backendCpuSeconds(pg, database);
	const t0 = Date.now();
	await sleep(ms);
	const c1 = await backendCpuSeconds(pg, database);
	await sleep(1100); // the window's counters flushed (idle backends publish their statistics late)
	const r1 = await rowsWritten(pg, database);
	const s = (Date.now() - t0 - 1100) / 1000;
	return { rowsPerS: (r1 - r0) / s, cpuMsPerS: ((c1 - c0) * 1000) / s };
}

export async function background(opts: BenchOptions): Promise<Row[]> {
	const db = await createTestDatabase("benchbg");
	const pg = await connect(db.url);
	const key = apiKey();
	const DRIVERS = opts.smoke ? 6 : 40;
	const WAITING = opts.smoke ? 40 : 400;
	const busyGen = new Generator();
	const freeGen = new Generator();
	let platform;
	try {
		const tokens = await driverTokens(db, DRIVERS);
		const started = await startLivePlatform(db, key, { DISPATCH_TIMEOUT_MS: "3600000" });
		platform = started.platform;
		const port = started.port;
		pin(platform.proc.child.pid, SERVER_CORE);
		pin(busyGen.child.pid, GENERATOR_CORE);
		pin(freeGen.child.pid, GENERATOR_CORE);
		const half = DRIVERS / 2;
		const url = `http://127.0.0.1:${port}`;
		const maxSeconds = opts.smoke ? 120 : 600;
		await busyGen.call("init", { url, drivers: tokens.slice(0, half), centre: CENTRE, radiusM: 1000, partnerKey: key, maxSeconds });
		await freeGen.call("init", { url, drivers: tokens.slice(half), centre: FAR_AWAY, radiusM: 1000, partnerKey: key, maxSeconds });
		await busyGen.call("policy", { policy: "accept" });
		for (const g of [busyGen, freeGen]) {
			await g.call("online", { from: 0, to: half });
			await g.call("polls", { from: 0, to: half, waitSeconds: 20 });
			await g.call("pings", { from: 0, to: half, intervalMs: PING_INTERVAL_MS, maxMs: maxSeconds * 1000 });
		}
		// One ride per busy driver, accepted and held.
		await busyGen.call("rides", { rate: 10, ms: (half / 10) * 1000 });
		await sleep(opts.smoke ? 3000 : 8000);
		const count = async (status: string) =>
			Number((await pg.query<{ n: string }>("SELECT count(*)::text AS n FROM orders WHERE status = $1", [status])).rows[0].n);
		const busyDrivers = await count("accepted");
		const W = opts.smoke ? 2000 : Math.max(31_000, opts.seconds * 1000);
		const idle = await window(pg, db.name, W);
		await busyGen.call("rides", { rate: 100, ms: (WAITING / 100) * 1000 });
		// Every booking answered (on a busy machine they trail the schedule), then past the first matching attempts.
		await sleep((WAITING / 100) * 1000);
		let booked = await count("searching");
		for (let stable = 0, i = 0; booked < WAITING && stable < 3 && i < 60; i++) {
			await sleep(1000);
			const now = await count("searching");
			stable = now === booked ? stable + 1 : 0;
			booked = now;
		}
		await sleep(opts.smoke ? 1000 : 10_000);
		const waitingBefore = await count("searching");
		const busy = await window(pg, db.name, W);
		const waiting = Math.min(waitingBefore, await count("searching"));
		const creates = (await busyGen.call<{ rides: { creates: { byStatus: Record<string, number> } } }>("stats")).rides.creates.byStatus;
		const rowsPer100 = ((busy.rowsPerS - idle.rowsPerS) / Math.max(1, waiting)) * 100;
		const cpuPer100 = ((busy.cpuMsPerS - idle.cpuMsPerS) / Math.max(1, waiting)) * 100;
		const failedCreates =
			Object.entries(creates)
				.map(([k, n]) => `${n}× ${k}`)
				.join(", ") || "none";
		const note = `${DRIVERS} drivers online (${busyDrivers} holding an accepted ride near the rides, the rest free 140 km away), ${waiting} rides searching through the window; windows ${fmt(W / 1000)} s; the backends' CPU from /proc (pg_stat_activity pids of this database); create-order answers not 2xx: ${failedCreates}`;
		return [
			{
				path: `background, ${waiting} rides waiting: rows written`,
				figure: `${fmt(busy.rowsPerS, 1)} rows/s`,
				floor: `0 waiting ${fmt(idle.rowsPerS, 1)} rows/s`,
				ratio: `${rowsPer100 < 0 ? "" : "+"}${fmt(rowsPer100, 1)} rows/s per 100`,
				goal: "≤ 5 per 100",
				met: waiting > 0 ? rowsPer100 <= 5 : undefined,
				note,
			},
			{
				path: `background, ${waiting} rides waiting: PostgreSQL CPU`,
				figure: `${fmt(busy.cpuMsPerS, 1)} ms/s`,
				floor: `0 waiting ${fmt(idle.cpuMsPerS, 1)} ms/s`,
				ratio: `${cpuPer100 < 0 ? "" : "+"}${fmt(cpuPer100, 1)} ms/s per 100`,
				goal: "≤ 5 per 100",
				met: waiting > 0 ? cpuPer100 <= 5 : undefined,
			},
		];
	} finally {
		busyGen.stop();
		freeGen.stop();
		await stopAll(platform?.proc);
		await pg.end();
		await db.drop();
	}
}
