/**
 * Path `fleet`: the driver side at fleet scale. The platform in one process
 * (the compiled build, live fleet mode, server PostgreSQL), a fleet of
 * driver apps in a load generator process of its own (bench/lib/fleet-load.ts:
 * node:http, one keep-alive Agent), so the generator's CPU is not the
 * platform's. For each fleet size (BENCH_FLEET_DRIVERS, default 1000,10000;
 * a fresh database and platform each):
 *
 *   1. waiting: the platform idle with no driver online, then the fleet
 *      online (`POST /driver/online`), each driver holding a `/driver/offers`
 *      long-poll (re-issued when it returns), no rides: PostgreSQL
 *      transactions/s of the platform's database (pg_stat_database deltas)
 *      over each window, the difference per 1,000 drivers; the platform's
 *      CPU from /proc/<pid>/stat.
 *   2. pings: the same fleet, waits open, each driver `POST /driver/location`
 *      every 4 s on an open-loop schedule: pings/s answered 2xx, p99,
 *      transactions and CPU per ping over what the waiting fleet costs (row
 *      1's window subtracted). Floors, measured in the same run at the same
 *      rate once the platform has stopped (bench/servers/bare-ping.ts): (a)
 *      bare moleculer-web + fastest-validator on the same body; (b) that plus
 *      one Sequelize `UPDATE drivers … WHERE id = $1` per ping on the run's
 *      database.
 *
 * On the first size only (1,000 by default):
 *
 *   3. offer latency (after row 2, pings still running): rides created by the partner (a live key) at
 *      BENCH_FLEET_OFFER_RATE/s near the fleet's centre; create-order 201 →
 *      the offer in the driver's long-poll answer, p50/p99. The driver
 *      declines at once and the partner cancels the ride, so offers do not
 *      pile up and no ride goes round the fleet; only a ride's first offer
 *      is timed.
 *   4. end to end (run first, right after the idle window, with only
 *      BENCH_FLEET_E2E_DRIVERS drivers ever online: a driver gone offline
 *      would leave its long-poll running on the server): those drivers accept every offer, arrive, start with the OTP (the partner's
 *      create-order answer carries it in live mode; handed over in the
 *      generator's memory) and drop, over the driver API only, no think
 *      time; half as many partner workers each create a ride and wait for
 *      its drop. Rides dropped per second, and create-order 201 → the
 *      `accepted` webhook at a receiver on 127.0.0.1 (less the time between
 *      the offer reaching the driver and its accept, ≈ 0 here), p50/p99.
 */
import { fork, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import type { DriverTokenCreated } from "../../contracts/driver";
import { connect, createTestDatabase, type TestDatabase } from "../../test/helpers/db";
import { freePort } from "../../test/helpers/http";
import { startTestNode } from "../../test/helpers/node";
import {
	apiKey,
	fmt,
	processCpuSeconds,
	ROOT,
	sleep,
	startHelper,
	startPlatformProcess,
	stopAll,
	webhookSecret,
	xacts,
	type BenchOptions,
	type Row,
} from "../lib/common";

/** PostgreSQL flushes an idle backend's statistics at most this late (PGSTAT_IDLE_INTERVAL, 10 s), plus a margin. */
const PG_STATS_LAG_MS = 11_000;
export const PING_INTERVAL_MS = 4000;
export const CENTRE = { lat: 12.9716, lng: 77.5946 };
export const RADIUS_M = 2000;

interface Tally {
	sent: number;
	done: number;
	ok: number;
	byStatus: Record<string, number>;
	p50: number;
	p99: number;
	max: number;
	maxLagMs: number;
}
interface Stats {
	pings: Tally;
	polls: Tally;
	rides: {
		created: number;
		creates: Tally;
		offered: number;
		offerP50: number;
		offerP99: number;
		offerMax: number;
		offerSeenBefore201: number;
		accepted: number;
		acceptedP50: number;
		acceptedP99: number;
		thinkMax: number;
		dropped: number;
		steps: Tally;
		cancels: Tally;
	};
	sockets: number;
}

/** The generator process and a request/answer call over its IPC channel. */
export class Generator {
	private seq = 0;
	private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
	readonly child: ChildProcess;
	constructor() {
		this.child = fork(join(ROOT, "bench/lib/fleet-load.ts"), [], {
			execArgv: ["--import", "tsx"],
			cwd: ROOT,
			stdio: ["ignore", "inherit", "inherit", "ipc"],
		});
		this.child.on("message", (m: { id: number; result?: unknown; error?: string }) => {
			const p = this.pending.get(m.id);
			this.pending.delete(m.id);
			if (m.error) p?.reject(new Error(m.error));
			else p?.resolve(m.result);
		});
		this.child.on("exit", () => {
			for (const p of this.pending.values()) p.reject(new Error("the fleet generator exited"));
			this.pending.clear();
		});
	}
	call<T = unknown>(cmd: string, args: Record<string, unknown> = {}): Promise<T> {
		const id = ++this.seq;
		return new Promise<T>((resolve, reject) => {
			this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
			this.child.send({ id, cmd, ...args });
		});
	}
	stop(): void {
		if (this.child.exitCode === null) this.child.kill("SIGTERM");
	}
}

/**
 * The platform in one process for scripted drivers: live fleet mode, `key` as
 * the bootstrap partner's live key, `env` on top. The scripted drivers jump to
 * the pickup the moment they accept (the paths measure the platform's work per
 * ride, not the drive), so the speed check is set out of their way; it still
 * runs on every ping, at the same cost.
 */
export async function startLivePlatform(
	db: TestDatabase,
	key: string,
	env: Record<string, string> = {},
): Promise<{ platform: Awaited<ReturnType<typeof startPlatformProcess>>; port: number }> {
	const port = await freePort();
	const platform = await startPlatformProcess("platform", {
		DATABASE_URL: db.url,
		PORT: String(port),
		BOOTSTRAP_PARTNER_KEY: key,
		BOOTSTRAP_PARTNER_MODE: "live",
		BOOTSTRAP_WEBHOOK_SECRET: webhookSecret(),
		FLEET_MODE: "live",
		DRIVER_MAX_SPEED_KMH: "1000000",
		...env,
	});
	return { platform, port };
}

/** Registers `n` live cab drivers through dispatch.createDriverToken (dispatch alone in this process, before the platform starts). */
export async function driverTokens(db: TestDatabase, n: number): Promise<Array<{ id: string; token: string }>> {
	const node = await startTestNode({ databaseUrl: db.url, services: ["dispatch"], env: { LOGLEVEL: "error" } }); // alone: its sweep warns that orders is missing
	try {
		const out: Array<{ id: string; token: string }> = new Array(n);
		let next = 0;
		const worker = async () => {
			while (next < n) {
				const i = next++;
				const t = await node.broker.call<DriverTokenCreated, Record<string, unknown>>("dispatch.createDriverToken", {
					name: `Fleet Driver ${i}`,
					phone: `+9190${String(i).padStart(8, "0")}`,
					vehicleNumber: `KA01F${i}`,
					serviceType: "cab",
					mode: "live",
				});
				out[i] = { id: t.driverId, token: t.token };
			}
		};
		await Promise.all(Array.from({ length: 16 }, worker));
		return out;
	} finally {
		await node.stop();
	}
}

interface Window {
	txPerS: number;
	cpuCores: number;
	seconds: number;
}

/** Transactions/s of the database and CPU (cores) of a process over `ms`. */
async function measure(pg: Awaited<ReturnType<typeof connect>>, database: string, pid: number | undefined, ms: number): Promise<Window> {
	const x0 = await xacts(pg, database);
	const c0 = processCpuSeconds(pid);
	const t0 = Date.now();
	await sleep(ms);
	const x1 = await xacts(pg, database);
	const c1 = processCpuSeconds(pid);
	const seconds = (Date.now() - t0) / 1000;
	return { txPerS: (x1 - x0) / seconds, cpuCores: (c1 - c0) / seconds, seconds };
}

const statuses = (t: Tally): string =>
	Object.entries(t.byStatus)
		.map(([s, n]) => `${fmt(n)}× ${s}`)
		.join(", ") || "none";

interface SizeResult {
	size: number;
	idle: Window;
	waiting: Window;
	waitPolls: Tally;
	pings: Window;
	pingStats: Stats;
	pingRate: number;
	onlineMs: number;
	onlineFailed: Record<string, number>;
	offers?: Stats["rides"] & { seconds: number; rate: number };
	e2e?: Stats["rides"] & { seconds: number; drivers: number };
}

async function runSize(size: number, withRides: boolean, opts: BenchOptions, db: TestDatabase, W: number): Promise<SizeResult> {
	const pg = await connect(db.url);
	const key = apiKey();
	const gen = new Generator();
	let platform: Awaited<ReturnType<typeof startPlatformProcess>> | undefined;
	try {
		const tokens = await driverTokens(db, size);
		const started = await startLivePlatform(db, key);
		platform = started.platform;
		const port = started.port;
		const pid = platform.proc.child.pid;
		await gen.call("init", {
			url: `http://127.0.0.1:${port}`,
			drivers: tokens,
			centre: CENTRE,
			radiusM: RADIUS_M,
			partnerKey: key,
			maxSeconds: opts.smoke ? 120 : 900,
		});
		await sleep(opts.smoke ? 200 : 5000); // start-up work settles
		let idle = await measure(pg, db.name, pid, W);

		const pingBudgetMs = (opts.smoke ? 30 : 240) * 1000;
		let e2e: SizeResult["e2e"];
		let first = 0;
		if (withRides) {
			// End to end first, with only the scripted drivers ever online: the rest of the
			// fleet's long-polls would otherwise keep running on the server after they go offline.
			const e2eDrivers = Math.min(size, Number(process.env.BENCH_FLEET_E2E_DRIVERS || (opts.smoke ? 10 : 200)));
			first = e2eDrivers;
			await gen.call("online", { from: 0, to: e2eDrivers });
			await gen.call("policy", { policy: "script" });
			await gen.call("polls", { from: 0, to: e2eDrivers, waitSeconds: 20 });
			await gen.call("pings", { from: 0, to: e2eDrivers, intervalMs: PING_INTERVAL_MS, maxMs: pingBudgetMs });
			const warm = opts.smoke ? 300 : 2000;
			await gen.call("rides", { workers: Math.max(1, Math.floor(e2eDrivers / 2)), ms: warm + W });
			await sleep(warm);
			await gen.call("mark");
			const t0 = Date.now();
			await sleep(W);
			e2e = { ...(await gen.call<Stats>("stats")).rides, seconds: (Date.now() - t0) / 1000, drivers: e2eDrivers };
			await gen.call("stopPings");
			await gen.call("policy", { policy: "decline" });
			await sleep(opts.smoke ? 200 : 3000); // the last rides dropped
			// The scripted drivers go offline and the rides' webhooks drain; the floor is measured
			// again, nobody online, right before the fleet comes online, so the waiting row compares
			// like with like rather than with the platform before any ride.
			await gen.call("offline", { from: 0, to: e2eDrivers });
			first = 0;
			await sleep(opts.smoke ? 300 : PG_STATS_LAG_MS);
			idle = await measure(pg, db.name, pid, W);
		}

		const on = await gen.call<{ ok: number; failed: Record<string, number>; ms: number }>("online", { from: first, to: size });
		await gen.call("polls", { from: first, to: size, waitSeconds: 20 });
		// PostgreSQL (15+) publishes an idle backend's transaction counts up to 10 s late: the online
		// burst must not land in the waiting window (it did at 3 s: ~80 tx/s of "waiting" that was
		// drivers going online). The polls spread meanwhile.
		await sleep(opts.smoke ? 300 : PG_STATS_LAG_MS);
		await gen.call("mark");
		const waiting = await measure(pg, db.name, pid, W);
		const waitPolls = (await gen.call<Stats>("stats")).polls;

		await gen.call("pings", { from: 0, to: size, intervalMs: PING_INTERVAL_MS, maxMs: pingBudgetMs });
		await sleep(opts.smoke ? 300 : PING_INTERVAL_MS + 1100); // one full round of pings, counters flushed
		await gen.call("mark");
		const pings = await measure(pg, db.name, pid, W);
		const pingStats = await gen.call<Stats>("stats");
		const result: SizeResult = {
			size,
			idle,
			waiting,
			waitPolls,
			pings,
			pingStats,
			pingRate: (size * 1000) / PING_INTERVAL_MS,
			onlineMs: on.ms,
			onlineFailed: on.failed,
			e2e,
		};

		if (withRides) {
			const rate = Number(process.env.BENCH_FLEET_OFFER_RATE || (opts.smoke ? 4 : 5));
			await gen.call("mark");
			await gen.call("rides", { rate, ms: W });
			await sleep(W + (opts.smoke ? 300 : 2000));
			result.offers = { ...(await gen.call<Stats>("stats")).rides, seconds: W / 1000, rate };
		}
		await gen.call("stopPings");
		return result;
	} finally {
		gen.stop();
		await stopAll(platform?.proc);
		await pg.end();
	}
}

interface FloorResult {
	okPerS: number;
	p99: number;
	cpuUsPerPing: number;
	txPerPing: number;
	non2xx: string;
}

/** One ping floor (bench/servers/bare-ping.ts) at the fleet's rate, the same generator and drivers. */
async function pingFloor(kind: "validate" | "update", db: TestDatabase, ids: string[], W: number, smoke: boolean): Promise<FloorResult> {
	const pg = await connect(db.url);
	const gen = new Generator();
	let helper;
	try {
		helper = await startHelper("bare-ping.ts", { PING_FLOOR: kind, DATABASE_URL: db.url });
		await gen.call("init", { url: `http://127.0.0.1:${helper.port}`, drivers: ids.map((id) => ({ id, token: id })), maxSeconds: smoke ? 60 : 300 });
		await gen.call("pings", { from: 0, to: ids.length, intervalMs: PING_INTERVAL_MS, maxMs: (smoke ? 20 : 60) * 1000 });
		await sleep(smoke ? 300 : PING_INTERVAL_MS + 1100);
		await gen.call("mark");
		const w = await measure(pg, db.name, helper.proc.child.pid, W);
		const s = (await gen.call<Stats>("stats")).pings;
		await gen.call("stopPings");
		const okPerS = s.ok / w.seconds;
		return { okPerS, p99: s.p99, cpuUsPerPing: (w.cpuCores * 1e6) / okPerS, txPerPing: w.txPerS / okPerS, non2xx: statuses(s) };
	} finally {
		gen.stop();
		await stopAll(helper?.proc);
		await pg.end();
	}
}

const ms = (n: number) => (Number.isFinite(n) ? `${fmt(n)} ms` : "n/a");
const sizeLabel = (n: number) => `${fmt(n)} drivers`;

export async function fleet(opts: BenchOptions): Promise<Row[]> {
	const sizes = (process.env.BENCH_FLEET_DRIVERS || (opts.smoke ? "20" : "1000,10000"))
		.split(",")
		.map((s) => Number(s.trim()))
		.filter((n) => Number.isInteger(n) && n > 0);
	const W = opts.smoke ? 500 : Math.max(2000, opts.seconds * 1000);
	const rows: Row[] = [];
	for (const [i, size] of sizes.entries()) {
		const db = await createTestDatabase("benchfleet");
		try {
			const r = await runSize(size, i === 0, opts, db, W);
			const ids = (await (async () => {
				const pg = await connect(db.url);
				try {
					return (await pg.query<{ id: string }>("SELECT id FROM drivers ORDER BY phone LIMIT $1", [size])).rows.map((x) => x.id);
				} finally {
					await pg.end();
				}
			})()) as string[];
			const floorA = await pingFloor("validate", db, ids, W, opts.smoke);
			const floorB = await pingFloor("update", db, ids, W, opts.smoke);
			rows.push(...sizeRows(r, floorA, floorB));
		} finally {
			await db.drop();
		}
	}
	return rows;
}

function sizeRows(r: SizeResult, a: FloorResult, b: FloorResult): Row[] {
	const rows: Row[] = [];
	const added = r.waiting.txPerS - r.idle.txPerS;
	const per1000 = (added / r.size) * 1000;
	const p = r.pingStats.pings;
	const okPerS = p.ok / r.pings.seconds;
	// Saturated (fewer than 95% of the pings answered 2xx), the pings displace the waits' own work and
	// the difference with the waiting window means nothing: the figures are then undivided.
	const saturated = okPerS < 0.95 * r.pingRate;
	const txPerPing = (saturated ? r.pings.txPerS : r.pings.txPerS - r.waiting.txPerS) / okPerS || NaN;
	const cpuUsPerPing = ((saturated ? r.pings.cpuCores : r.pings.cpuCores - r.waiting.cpuCores) * 1e6) / okPerS || NaN;
	const how = saturated ? " (saturated: undivided)" : "";
	const allOk = p.ok === p.done && p.done > 0 && p.sent - p.done <= Math.ceil(r.pingRate * 0.5);
	rows.push({
		path: `fleet, ${sizeLabel(r.size)} waiting`,
		figure: `${fmt(r.waiting.txPerS, 1)} tx/s`,
		floor: `0 online ${fmt(r.idle.txPerS, 1)} tx/s`,
		ratio: `+${fmt(added, 1)} tx/s (${fmt(per1000, 1)} per 1,000)`,
		goal: "≤ 10 tx/s added for 1,000 waiting",
		met: per1000 <= 10,
		note: `platform CPU ${fmt(r.waiting.cpuCores * 100)}% of a core waiting vs ${fmt(r.idle.cpuCores * 100)}% idle; went online in ${fmt(r.onlineMs / 1000, 1)} s${Object.keys(r.onlineFailed).length ? ` (failed: ${JSON.stringify(r.onlineFailed)})` : ""}; long-polls returned in the window: ${fmt(r.waitPolls.done)}, not 2xx: ${statuses(r.waitPolls)}; windows ${fmt(r.idle.seconds, 1)} s / ${fmt(r.waiting.seconds, 1)} s`,
	});
	rows.push({
		path: `fleet, ${sizeLabel(r.size)} pinging, CPU per ping`,
		figure: `${fmt(cpuUsPerPing)} µs/ping${how}`,
		floor: `(b) moleculer-web + 1 UPDATE ${fmt(b.cpuUsPerPing)} µs/ping`,
		ratio: fmt(cpuUsPerPing / b.cpuUsPerPing, 2),
		goal: "≤ 1.0",
		met: cpuUsPerPing / b.cpuUsPerPing <= 1,
		note: `${fmt(okPerS)} pings/s 2xx of ${fmt(r.pingRate)}/s offered (${fmt(p.sent)} sent, ${fmt(p.done)} answered in the window; not 2xx: ${statuses(p)}), p50 ${ms(p.p50)}, p99 ${ms(p.p99)}, max ${ms(p.max)}, generator lag max ${ms(p.maxLagMs)}; platform CPU ${fmt(r.pings.cpuCores * 100)}% of a core (waiting alone ${fmt(r.waiting.cpuCores * 100)}%${saturated ? "" : ", subtracted"}; undivided, ${fmt((r.pings.cpuCores * 1e6) / okPerS)} µs per ping); floor (a) moleculer-web + validation ${fmt(a.cpuUsPerPing)} µs/ping (${fmt(a.okPerS)}/s, p99 ${ms(a.p99)}), floor (b) ${fmt(b.okPerS)}/s, p99 ${ms(b.p99)}, not 2xx (a) ${a.non2xx}, (b) ${b.non2xx}`,
	});
	rows.push({
		path: `fleet, ${sizeLabel(r.size)} pinging, tx per ping`,
		figure: `${fmt(txPerPing, 2)} tx/ping${how}`,
		floor: `(b) ${fmt(b.txPerPing, 2)} tx/ping`,
		ratio: fmt(txPerPing, 2),
		goal: "≤ 0.1",
		met: txPerPing <= 0.1,
		note: `${fmt(r.pings.txPerS, 1)} tx/s pinging, ${fmt(r.waiting.txPerS, 1)} tx/s waiting alone (${saturated ? "not subtracted: saturated" : "subtracted"})`,
	});
	const big = r.size >= 10_000;
	rows.push({
		path: `fleet, ${sizeLabel(r.size)} pinging, delivery`,
		figure: `${fmt(okPerS)} pings/s 2xx, p99 ${ms(p.p99)}`,
		floor: `offered ${fmt(r.pingRate)}/s`,
		ratio: fmt(okPerS / r.pingRate, 2),
		goal: big ? "every ping 2xx, p99 ≤ 100 ms" : "–",
		met: big ? allOk && p.p99 <= 100 : undefined,
		note: `not 2xx: ${statuses(p)}; unanswered at the window's end: ${fmt(Math.max(0, p.sent - p.done))}; "backlog": due while 2,000 pings were in flight, not sent (the generator's bound)`,
	});
	if (r.offers) {
		const o = r.offers;
		rows.push({
			path: `fleet, offer latency, ${sizeLabel(r.size)} waiting`,
			figure: `p50 ${ms(o.offerP50)}, p99 ${ms(o.offerP99)}`,
			floor: "–",
			ratio: "–",
			goal: "p99 ≤ 250 ms",
			met: o.offered > 0 ? o.offerP99 <= 250 : undefined,
			note: `${fmt(o.created)} rides created at ${o.rate}/s over ${o.seconds} s (create-order not 201: ${statuses(o.creates)}), ${fmt(o.offered)} offered (max ${ms(o.offerMax)}; ${o.offerSeenBefore201} offers reached the driver before the partner read the 201, counted as 0 ms); the driver declined at once and the partner cancelled (decline not 2xx: ${statuses(o.steps)}, cancel not 2xx: ${statuses(o.cancels)}); pings running`,
		});
	}
	if (r.e2e) {
		const e = r.e2e;
		rows.push({
			path: `fleet, end to end, ${e.drivers} scripted drivers`,
			figure: `${fmt(e.dropped / e.seconds, 1)} rides/s; create → accepted webhook p50 ${ms(e.acceptedP50)}, p99 ${ms(e.acceptedP99)}`,
			floor: "–",
			ratio: "–",
			goal: "–",
			note: `${fmt(e.created)} rides created and ${fmt(e.dropped)} dropped in ${fmt(e.seconds, 1)} s by ${Math.max(1, Math.floor(e.drivers / 2))} partner workers; ${fmt(e.accepted)} accepted webhooks timed (think time offer → accept max ${ms(e.thinkMax)}, subtracted); offer p99 ${ms(e.offerP99)}; driver steps ${fmt(e.steps.done)}, not 2xx: ${statuses(e.steps)}, step p99 ${ms(e.steps.p99)}; create-order not 201: ${statuses(e.creates)}`,
		});
	}
	return rows;
}
