/**
 * create-order against its floor, in alternating rounds (bench/lib/method.ts),
 * each round on a fresh clone of a prepared database (bench/lib/platform.ts):
 *
 *   1. the platform in one process (core 0) loaded by wrk (core 1, 32
 *      connections) with requests as production partners send them: many
 *      keys, each order with its key's quoteId, a fresh Idempotency-Key and
 *      rider, a webhook URL whose host name the platform resolves through the
 *      bench's DNS server; orders/s, vs pgbench's one-row insert into a table
 *      with a partial unique index (16 clients, pgbench itself on core 1: the
 *      same class of C generator); PostgreSQL CPU per order in pgbench
 *      inserts; then, on the same process, an open loop at 60 % of the
 *      orders/s it just reached: p50/p99 from each request's due time;
 *   2. the same in the production topology (six processes over NATS, all on
 *      core 0): orders/s vs the one-process figure of the same round, and
 *      an open loop at 50 % of its own maximum.
 */
import { spawnSync } from "node:child_process";
import { randomInt } from "node:crypto";
import { connect, createTestDatabase } from "../../test/helpers/db";
import { fmt, postgresCpuSeconds, sleep, writeTemp, type BenchOptions, type Row } from "../lib/common";
import { alternate, GENERATOR_CORE, openLoop, ratios, roundsFor, showSpread, spread, wrk } from "../lib/method";
import { DNS_ZONE, orderPool, preparedDatabase, startDnsServer, startHookReceiver, startPlatform } from "../lib/platform";

const CONNECTIONS = 32;

/** A create-order body with a distinct rider (bench/profile.ts's load). */
export function orderBody(): string {
	const jitter = () => (randomInt(0, 2000) - 1000) / 100_000;
	return JSON.stringify({
		user: { name: "Bench Rider", phone: `+9198${String(randomInt(0, 100_000_000)).padStart(8, "0")}` },
		serviceType: "cab",
		pickup: { lat: 12.9716 + jitter(), lng: 77.5946 + jitter(), address: "MG Road" },
		drop: { lat: 12.9352 + jitter(), lng: 77.6245 + jitter() },
		webhookURL: "http://127.0.0.1:9/hooks",
		metadata: { partnerRef: `bench-${randomInt(0, 1e9)}` },
	});
}

/**
 * pgbench (pinned to the generator core) on its own throw-away database;
 * `pgCpuUsPerTx`: the PostgreSQL server's CPU per insert.
 */
async function pgbench(seconds: number): Promise<{ tps: number; pgCpuUsPerTx: number }> {
	if (spawnSync("pgbench", ["--version"]).status !== 0) throw new Error("pgbench is not installed");
	const db = await createTestDatabase("benchpgb");
	const pg = await connect(db.url);
	try {
		await pg.query(
			"CREATE TABLE bench_rides (id bigserial PRIMARY KEY, rider text NOT NULL, active boolean NOT NULL DEFAULT true, created_at timestamptz NOT NULL DEFAULT now())",
		);
		await pg.query("CREATE UNIQUE INDEX bench_rides_one_active ON bench_rides (rider) WHERE active");
		const script = writeTemp("insert.sql", "INSERT INTO bench_rides (rider) VALUES (md5(random()::text));\n");
		const u = new URL(db.url);
		const args = ["-c", String(GENERATOR_CORE), "pgbench", "-n", "-f", script, "-c", "16", "-j", "1", "-T", String(seconds)];
		args.push("-h", u.hostname, "-p", u.port || "5432", "-U", u.username || "postgres", db.name);
		let res = spawnSync("true", [], { encoding: "utf8" });
		let cpu0 = NaN;
		for (let attempt = 0; attempt < 3; attempt++) {
			// Other suites share the server: "too many clients" is retried after a pause.
			cpu0 = postgresCpuSeconds(db.url);
			res = spawnSync("taskset", args, { encoding: "utf8" });
			if (!/too many clients/.test(String(res.stderr))) break;
			await sleep(3000);
		}
		await sleep(300); // pgbench's backends exit after it: let the postmaster reap them (their CPU moves to its cutime)
		const cpu = postgresCpuSeconds(db.url) - cpu0;
		const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(res.stdout);
		const done = /number of transactions actually processed: (\d+)/.exec(res.stdout);
		if (!m || !done) throw new Error(`pgbench failed: ${(res.stderr || res.stdout).slice(0, 300)}`);
		return { tps: Number(m[1]), pgCpuUsPerTx: (cpu * 1e6) / Number(done[1]) };
	} finally {
		await pg.end();
		await db.drop();
	}
}

interface ShapeRound {
	ordersPerS: number;
	p99Closed: number;
	pgCpuUsPerOrder: number;
	platformCpuUsPerOrder: number;
	statementsPerOrder: number;
	open: { rate: number; p50: number; p99: number; max: number; okShare: number };
	bad: number;
}

export async function createOrder(opts: BenchOptions): Promise<Row[]> {
	const keysWanted = Number(process.env.BENCH_KEYS || (opts.smoke ? 20 : 1000));
	const rounds = roundsFor(opts.smoke);
	const prepared = await preparedDatabase(keysWanted);
	const dns = await startDnsServer(DNS_ZONE);
	const hooks = await startHookReceiver();
	const keys = prepared.keys;
	const got: Record<"one" | "topology", ShapeRound[]> = { one: [], topology: [] };
	const pgb: Array<{ tps: number; pgCpuUsPerTx: number }> = [];

	const shapeRound = async (shape: "one" | "topology", fraction: number): Promise<number> => {
		const db = await prepared.clone();
		try {
			// Rides wait for a driver as long as the round lasts; none gives up mid-run.
			const p = await startPlatform(shape, db.url, keys[0], dns.server, { DISPATCH_TIMEOUT_MS: "600000" });
			try {
				const pool = await orderPool(p.baseUrl, keys, hooks.port, Math.min(keys.length, opts.smoke ? 50 : 1000));
				await wrk(p.baseUrl, pool, CONNECTIONS, opts.smoke ? 1 : 2);
				await sleep(500);
				const pg0 = postgresCpuSeconds(db.url);
				const cpu0 = p.cpuSeconds();
				const q0 = p.queries();
				const r = await wrk(p.baseUrl, pool, CONNECTIONS, opts.seconds);
				const orders = Math.max(1, r.total - r.non2xx);
				const pgCpuUsPerOrder = ((postgresCpuSeconds(db.url) - pg0) * 1e6) / orders;
				const platformCpuUsPerOrder = ((p.cpuSeconds() - cpu0) * 1e6) / orders;
				await sleep(300); // the probes' next snapshot
				const statementsPerOrder = (p.queries() - q0) / orders;
				const rate = Math.max(1, Math.round(r.okPerS * fraction));
				const o = await openLoop(p.baseUrl, pool, rate, opts.seconds);
				got[shape].push({
					ordersPerS: r.okPerS,
					p99Closed: r.p99,
					pgCpuUsPerOrder,
					platformCpuUsPerOrder,
					statementsPerOrder,
					open: { rate, p50: o.p50, p99: o.p99, max: o.max, okShare: o.due ? (o.total - o.non2xx) / o.due : NaN },
					bad: r.non2xx + r.errors + o.non2xx + o.errors,
				});
				return r.okPerS;
			} finally {
				await p.stop();
			}
		} finally {
			await db.drop();
		}
	};

	try {
		const figures = await alternate(rounds, {
			one: () => shapeRound("one", 0.6),
			pgbench: async () => {
				const r = await pgbench(Math.max(3, opts.seconds)); // its 16 connections take a while to open on a busy machine
				pgb.push(r);
				return r.tps;
			},
			topology: () => shapeRound("topology", 0.5),
		});
		const vsPgbench = ratios(figures.one, figures.pgbench);
		const pgWork = ratios(
			got.one.map((g) => g.pgCpuUsPerOrder),
			pgb.map((g) => g.pgCpuUsPerTx),
		);
		const topoVsOne = ratios(figures.topology, figures.one);
		const med = (xs: number[], d = 0) => fmt(spread(xs).median, d);
		const one = got.one;
		const topo = got.topology;
		const openP99 = spread(one.map((g) => g.open.p99));
		const topoOpenP99 = spread(topo.map((g) => g.open.p99));
		const how = `${rounds} alternating round${rounds > 1 ? "s" : ""}, median (min–max), a fresh clone of the database each round`;
		const bad = (xs: ShapeRound[]) => xs.reduce((a, g) => a + g.bad, 0);
		return [
			{
				path: "create-order, 1 process vs pgbench (both C generators)",
				figure: `${med(figures.one)} orders/s`,
				floor: `pgbench ${med(figures.pgbench)} tps`,
				ratio: showSpread(vsPgbench),
				goal: "≥ 0.3",
				met: vsPgbench.median >= 0.3,
				note: `${how}; ${keys.length} keys, quoteId + Idempotency-Key + webhook host names through DNS; wrk 32 connections on core 1, platform on core 0; closed-loop p99 ${med(
					one.map((g) => g.p99Closed),
					1,
				)} ms; ${med(
					one.map((g) => g.statementsPerOrder),
					1,
				)} statements per order; platform CPU ${med(one.map((g) => g.platformCpuUsPerOrder))} µs per order; ${bad(one)} non-2xx/errors`,
			},
			{
				path: "create-order, PostgreSQL CPU per order in pgbench inserts",
				figure: `${med(one.map((g) => g.pgCpuUsPerOrder))} µs`,
				floor: `pgbench insert ${med(pgb.map((g) => g.pgCpuUsPerTx))} µs`,
				ratio: showSpread(pgWork, 1),
				goal: "≤ 3",
				met: pgWork.median <= 3,
				note: "the whole local PostgreSQL server's CPU (/proc), so the machine's other users count too",
			},
			{
				path: "create-order, 1 process, open-loop p99 at 60 % of the run's maximum",
				figure: `${fmt(openP99.median, 1)} ms (p50 ${med(
					one.map((g) => g.open.p50),
					1,
				)} ms)`,
				floor: `${med(one.map((g) => g.open.rate))} orders/s offered`,
				ratio: `${showSpread(openP99, 1)} ms`,
				goal: "≤ 50 ms",
				met: openP99.median <= 50,
				note: `answered 2xx: ${fmt(spread(one.map((g) => g.open.okShare * 100)).median, 1)} % of those due; max ${med(one.map((g) => g.open.max))} ms`,
			},
			{
				path: "create-order, topology vs 1 process",
				figure: `${med(figures.topology)} orders/s`,
				floor: `1 process ${med(figures.one)} orders/s`,
				ratio: showSpread(topoVsOne),
				goal: "≥ 0.7",
				met: topoVsOne.median >= 0.7,
				note: `six processes over NATS, all on core 0; platform CPU ${med(topo.map((g) => g.platformCpuUsPerOrder))} µs per order; closed-loop p99 ${med(
					topo.map((g) => g.p99Closed),
					1,
				)} ms; ${bad(topo)} non-2xx/errors`,
			},
			{
				path: "create-order, topology, open-loop p99 at 50 % of its maximum",
				figure: `${fmt(topoOpenP99.median, 1)} ms (p50 ${med(
					topo.map((g) => g.open.p50),
					1,
				)} ms)`,
				floor: `${med(topo.map((g) => g.open.rate))} orders/s offered`,
				ratio: `${showSpread(topoOpenP99, 1)} ms`,
				goal: "≤ 100 ms",
				met: topoOpenP99.median <= 100,
				note: `answered 2xx: ${fmt(spread(topo.map((g) => g.open.okShare * 100)).median, 1)} % of those due; max ${med(topo.map((g) => g.open.max))} ms`,
			},
		];
	} finally {
		dns.close();
		await hooks.close();
	}
}
