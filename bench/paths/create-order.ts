/**
 * Path 3: POST /ride/create-order, a distinct rider per request, server
 * PostgreSQL, 32 connections (the platform in one process, live fleet mode so
 * nothing else moves): orders/s and p99, statements and transactions per
 * order; vs pgbench's one-row insert per transaction into a table with a
 * partial unique index, 16 clients, on a throw-away database, same run; and
 * vs the stack's own ceiling: bare moleculer-web + one validated action doing
 * that one insert through Sequelize (bench/servers/bare-insert.ts), same 32
 * connections and bodies, what no create-order on this stack can exceed;
 * and the contract's ceiling: the same action writing what any order must
 * (the rider upserted, the order referencing it) in one statement.
 */
import { spawnSync } from "node:child_process";
import { randomInt } from "node:crypto";
import { connect, createTestDatabase } from "../../test/helpers/db";
import { freePort } from "../../test/helpers/http";
import {
	apiKey,
	fmt,
	freshProbe,
	load,
	okPerSecond,
	postgresCpuSeconds,
	sleep,
	startHelper,
	startPlatformProcess,
	stopAll,
	writeTemp,
	xacts,
	type BenchOptions,
	type Row,
} from "../lib/common";

const CONNECTIONS = 32;

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
 * pgbench on its own throw-away database; undefined (with why) when pgbench is
 * missing or fails. `pgCpuUsPerTx`: the PostgreSQL server's CPU per insert.
 */
async function pgbench(seconds: number): Promise<{ tps?: number; pgCpuUsPerTx?: number; why?: string }> {
	if (spawnSync("pgbench", ["--version"]).status !== 0) return { why: "pgbench not installed" };
	const db = await createTestDatabase("benchpgb");
	const pg = await connect(db.url);
	try {
		await pg.query(
			"CREATE TABLE bench_rides (id bigserial PRIMARY KEY, rider text NOT NULL, active boolean NOT NULL DEFAULT true, created_at timestamptz NOT NULL DEFAULT now())",
		);
		await pg.query("CREATE UNIQUE INDEX bench_rides_one_active ON bench_rides (rider) WHERE active");
		const script = writeTemp("insert.sql", "INSERT INTO bench_rides (rider) VALUES (md5(random()::text));\n");
		const u = new URL(db.url);
		let res = spawnSync("true", [], { encoding: "utf8" });
		let cpu0 = NaN;
		for (let attempt = 0; attempt < 3; attempt++) {
			// Other suites share the server: "too many clients" is retried after a pause.
			cpu0 = postgresCpuSeconds(db.url);
			res = spawnSync(
				"pgbench",
				[
					"-n",
					"-f",
					script,
					"-c",
					"16",
					"-j",
					"2",
					"-T",
					String(seconds),
					"-h",
					u.hostname,
					"-p",
					u.port || "5432",
					"-U",
					u.username || "postgres",
					db.name,
				],
				{ encoding: "utf8" },
			);
			if (!/too many clients/.test(String(res.stderr))) break;
			await new Promise((r) => setTimeout(r, 3000));
		}
		await sleep(300); // pgbench's backends exit after it: let the postmaster reap them (their CPU moves to its cutime)
		const cpu = postgresCpuSeconds(db.url) - cpu0;
		const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(res.stdout);
		const done = /number of transactions actually processed: (\d+)/.exec(res.stdout);
		if (!m) return { why: `pgbench failed: ${(res.stderr || res.stdout).slice(0, 200)}` };
		return { tps: Number(m[1]), pgCpuUsPerTx: done ? (cpu * 1e6) / Number(done[1]) : NaN };
	} finally {
		await pg.end();
		await db.drop();
	}
}

/**
 * The stack's ceiling for create-order: bare moleculer-web + one action that
 * inserts one row through Sequelize per request (no authentication, no rider,
 * no price, no ride mirror), loaded like the platform; orders/s. `contract`:
 * the rider and the order in one statement instead (bench/servers/bare-insert.ts).
 */
async function stackCeiling(seconds: number, smoke: boolean, ceiling: "stack" | "contract" = "stack"): Promise<{ rps: number; p99: number }> {
	const db = await createTestDatabase("benchceil");
	let helper;
	try {
		helper = await startHelper("bare-insert.ts", { DATABASE_URL: db.url, CEILING: ceiling });
		const spec = { url: `http://127.0.0.1:${helper.port}/ride/create-order`, connections: CONNECTIONS, bodyFn: orderBody };
		await load({ ...spec, seconds: smoke ? 1 : 2 }); // warm-up
		const r = await load({ ...spec, seconds });
		return { rps: okPerSecond(r), p99: r.p99 };
	} finally {
		await stopAll(helper?.proc);
		await db.drop();
	}
}

export async function createOrder(opts: BenchOptions): Promise<Row[]> {
	const db = await createTestDatabase("benchorder");
	const pg = await connect(db.url);
	const key = apiKey();
	let platform;
	try {
		const port = await freePort();
		platform = await startPlatformProcess("platform", { DATABASE_URL: db.url, PORT: String(port), BOOTSTRAP_PARTNER_KEY: key, FLEET_MODE: "live" });
		const spec = {
			url: `http://127.0.0.1:${port}/ride/create-order`,
			connections: CONNECTIONS,
			headers: { authorization: `Bearer ${key}` },
			bodyFn: orderBody,
		};
		await load({ ...spec, seconds: opts.smoke ? 1 : 2 }); // warm-up
		// Background transactions of an idle platform, subtracted from the per-order count.
		await sleep(1100);
		const idle0 = await xacts(pg, db.name);
		await sleep(2000);
		const idleRate = ((await xacts(pg, db.name)) - idle0) / 2;
		const probe0 = await freshProbe(platform.probe);
		const x0 = await xacts(pg, db.name);
		const pgCpu0 = postgresCpuSeconds(db.url);
		const t0 = Date.now();
		const ours = await load({ ...spec, seconds: opts.seconds });
		const elapsed = (Date.now() - t0) / 1000;
		await sleep(1100);
		const x1 = await xacts(pg, db.name);
		const pgCpu1 = postgresCpuSeconds(db.url);
		const probe1 = await freshProbe(platform.probe);
		const orders = ours.total - ours.non2xx;
		const txPerOrder = (x1 - x0 - idleRate * (elapsed + 1.1)) / orders;
		const stPerOrder = (probe1.queries - probe0.queries) / orders;
		// CPU per order (the idle platform's background included; it is a few % of a core): what bounds orders/s on a saturated machine.
		const platformUs = (probe1.cpuUs - probe0.cpuUs) / orders;
		const postgresUs = ((pgCpu1 - pgCpu0) * 1e6) / orders;
		await stopAll(platform.proc);
		platform = undefined;
		const floor = await pgbench(opts.seconds);
		const ceiling = await stackCeiling(opts.seconds, opts.smoke);
		const contractCeiling = await stackCeiling(opts.seconds, opts.smoke, "contract");
		const ordersPerSecond = okPerSecond(ours);
		const ratio = floor.tps ? ordersPerSecond / floor.tps : NaN;
		// PostgreSQL's share only when the server is local (/proc); the bound only with pgbench's figure beside it.
		const postgresNote = !Number.isFinite(postgresUs)
			? ""
			: `, PostgreSQL ${fmt(postgresUs)} µs` +
				(floor.pgCpuUsPerTx
					? ` (pgbench: ${fmt(floor.pgCpuUsPerTx)} µs of PostgreSQL per insert, so an order costs PostgreSQL ${fmt(postgresUs / floor.pgCpuUsPerTx, 1)} inserts' work: even with a platform that used no CPU, the ratio could reach ≈ ${fmt(floor.pgCpuUsPerTx / postgresUs, 2)})`
					: "");
		const note = `${fmt(stPerOrder, 1)} statements and ${fmt(txPerOrder, 1)} transactions per order (idle ${fmt(idleRate, 1)} tx/s subtracted); CPU per order: platform ${fmt(platformUs)} µs${postgresNote}${ours.non2xx + ours.errors ? `, ${ours.non2xx} non-2xx, ${ours.errors} errors/timeouts` : ""}${floor.why ? `; ${floor.why}` : ""}`;
		return [
			{
				path: "create-order, 32 connections, orders/s",
				figure: `${fmt(ordersPerSecond)} orders/s`,
				floor: floor.tps ? `pgbench ${fmt(floor.tps)} tps` : "skipped",
				ratio: fmt(ratio, 2),
				goal: "≥ 0.3",
				met: floor.tps ? ratio >= 0.3 : undefined,
				note,
			},
			{
				path: "create-order vs the stack's ceiling",
				figure: `${fmt(ordersPerSecond)} orders/s`,
				floor: `moleculer-web + 1 Sequelize insert ${fmt(ceiling.rps)}/s`,
				ratio: fmt(ordersPerSecond / ceiling.rps, 2),
				goal: "–",
				note: `the ceiling itself is ${floor.tps ? fmt(ceiling.rps / floor.tps, 2) : "n/a"} × pgbench (p99 ${ceiling.p99} ms): no create-order on this stack and machine can pass that ratio`,
			},
			{
				path: "create-order vs the contract's ceiling",
				figure: `${fmt(ordersPerSecond)} orders/s`,
				floor: `moleculer-web + rider and order in 1 statement ${fmt(contractCeiling.rps)}/s`,
				ratio: fmt(ordersPerSecond / contractCeiling.rps, 2),
				goal: "–",
				note: `the ceiling itself is ${floor.tps ? fmt(contractCeiling.rps / floor.tps, 2) : "n/a"} × pgbench (p99 ${contractCeiling.p99} ms): no create-order that keeps its rider and order in PostgreSQL can pass that ratio on this machine`,
			},
			{
				path: "create-order, 32 connections, p99",
				figure: `${ours.p99} ms (p50 ${ours.p50} ms)`,
				floor: "–",
				ratio: "–",
				goal: "≤ 50 ms",
				met: orders > 0 ? ours.p99 <= 50 : undefined,
			},
		];
	} finally {
		await stopAll(platform?.proc);
		await pg.end();
		await db.drop();
	}
}
