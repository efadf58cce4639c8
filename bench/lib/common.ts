/** Shared pieces of the bench paths: rows of the table, load generation (autocannon), processes under test, PostgreSQL counters. */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import autocannon from "autocannon";
import { Client } from "pg";
import { spawnNode, startServiceProcess, type ServiceProcess } from "../../test/helpers/processes";

export const ROOT = resolve(__dirname, "../..");

/** One line of the table. `met` is undefined when there is no goal or the path was skipped. */
export interface Row {
	path: string;
	figure: string;
	floor: string;
	ratio: string;
	goal: string;
	met?: boolean;
	note?: string;
}

export interface BenchOptions {
	smoke: boolean;
	/** Seconds per load measurement. */
	seconds: number;
	/** `--soak-minutes N`: the soak's length per database (default 30; a smoke a quarter of a minute). */
	soakMinutes?: number;
}

export const pct = (sorted: number[], p: number): number =>
	sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
export const fmt = (n: number, digits = 0): string =>
	Number.isFinite(n) ? n.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits }) : "n/a";
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface LoadResult {
	rps: number;
	p50: number;
	p99: number;
	total: number;
	non2xx: number;
	errors: number;
}

/** Answers per second that were 2xx (a load's rate less its refusals and errors). */
export const okPerSecond = (r: LoadResult): number => (r.total === 0 ? 0 : ((r.total - r.non2xx) / r.total) * r.rps);

export interface LoadSpec {
	url: string;
	connections: number;
	seconds: number;
	headers?: Record<string, string>;
	body?: string;
	/** A fresh body per request (distinct riders). */
	bodyFn?: () => string;
}

/** autocannon in this process against a server in another one. */
export async function load(spec: LoadSpec): Promise<LoadResult> {
	const headers = { "content-type": "application/json", ...spec.headers };
	const result = await autocannon({
		url: spec.url,
		method: "POST",
		connections: spec.connections,
		duration: spec.seconds,
		headers,
		body: spec.body,
		requests: spec.bodyFn ? [{ method: "POST", setupRequest: (req: Record<string, unknown>) => ({ ...req, body: spec.bodyFn!() }) }] : undefined,
	});
	const total = result.requests.total;
	return {
		rps: total / Math.max(0.001, result.duration),
		p50: result.latency.p50,
		p99: result.latency.p99,
		total,
		non2xx: result.non2xx,
		errors: result.errors + result.timeouts,
	};
}

/** A short warm-up then the measured run. */
export async function warmAndLoad(spec: LoadSpec, opts: BenchOptions): Promise<LoadResult> {
	await load({ ...spec, seconds: opts.smoke ? 1 : 3 });
	return load(spec);
}

const TSX = ["--import", "tsx"];

/**
 * What runs under test: `dist` (default) is the compiled build that `npm run
 * start:prod` and the Docker image run, built once per bench run; `tsx`
 * (BENCH_RUNTIME=tsx) is `npm start`'s TypeScript loader, which adds esbuild's
 * name-keeping helpers to every closure and compiles at start.
 */
const RUNTIME = process.env.BENCH_RUNTIME === "tsx" ? "tsx" : "dist";
let built = false;

/** `npm run build` (tsc + assets into dist/), once per bench process. */
export function ensureBuild(): void {
	if (RUNTIME !== "dist" || built) return;
	const tsc = spawnSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, encoding: "utf8" });
	if (tsc.status !== 0) throw new Error(`bench: the build failed (tsc -p tsconfig.build.json):\n${tsc.stdout}${tsc.stderr}`);
	const assets = spawnSync(process.execPath, ["scripts/copy-build-assets.mjs"], { cwd: ROOT, encoding: "utf8" });
	if (assets.status !== 0) throw new Error(`bench: copying build assets failed: ${assets.stderr}`);
	built = true;
}

/** The runtime label printed with the figures. */
export const benchRuntime = (): string => (RUNTIME === "dist" ? "compiled build (node dist/bin/server.js)" : "tsx bin/server.ts");

let floorsBuilt = false;
/** The floors bench/tsconfig.servers.json compiles (ladder-web, a tool's, starts the whole platform and stays under tsx). */
const COMPILED_FLOORS = ["bare-web.ts", "raw-http.ts", "bare-insert.ts", "bare-ping.ts"];

/**
 * The floors compiled like the platform: bench/servers/*.ts with tsc into
 * dist-bench/ (bench/tsconfig.servers.json), once per bench process, when the
 * platform runs its compiled build.
 */
function ensureFloorsBuild(): void {
	if (RUNTIME !== "dist" || floorsBuilt) return;
	const tsc = spawnSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "bench/tsconfig.servers.json"], { cwd: ROOT, encoding: "utf8" });
	if (tsc.status !== 0) throw new Error(`bench: the floors' build failed (tsc -p bench/tsconfig.servers.json):\n${tsc.stdout}${tsc.stderr}`);
	floorsBuilt = true;
}

/** A helper server (bare-web, raw-http) in its own process, compiled like the platform; resolves with its port once it prints "listening <port>" (or "ready"). */
export async function startHelper(
	script: string,
	env: Record<string, string>,
	// A smoke's figures mean nothing: its floors run under tsx and skip their compile (BENCH_FLOORS_RUNTIME).
	runtime = process.env.BENCH_FLOORS_RUNTIME === "tsx" ? "tsx" : RUNTIME,
): Promise<{ proc: ServiceProcess; port: number }> {
	const compiled = runtime === "dist" && COMPILED_FLOORS.includes(script);
	if (compiled) ensureFloorsBuild();
	const proc = spawnNode(
		script,
		compiled ? [join(ROOT, "dist-bench/bench/servers", script.replace(/\.ts$/, ".js"))] : [...TSX, join(ROOT, "bench/servers", script)],
		env,
	);
	await proc.waitFor(/listening \d+|ready/, 60_000);
	const m = /listening (\d+)/.exec(proc.output());
	return { proc, port: m ? Number(m[1]) : 0 };
}

/** A platform process (the compiled dist/bin/server.js, or bin/server.ts under tsx) with the probe preloaded; its probe file is returned. */
export async function startPlatformProcess(label: string, env: Record<string, string>): Promise<{ proc: ServiceProcess; probe: () => Probe }> {
	ensureBuild();
	const file = join(mkdtempSync(join(tmpdir(), "bench-")), "probe.json");
	const proc = await startServiceProcess(
		label,
		{
			NODE_ENV: "test",
			LOGLEVEL: "info",
			METRICS_PORT: "0",
			HEALTH_PORT: "",
			WEBHOOK_ALLOW_PRIVATE: "true",
			RATE_LIMIT_PER_MINUTE: "0",
			AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
			SHUTDOWN_DELAY_MS: "0",
			BENCH_PROBE_FILE: file,
			...env,
		},
		120_000,
		RUNTIME === "dist"
			? ["--import", join(ROOT, "bench/lib/probe.mjs"), "dist/bin/server.js"]
			: [...TSX, "--import", join(ROOT, "bench/lib/probe.mjs"), "bin/server.ts"],
	);
	return { proc, probe: () => readProbe(file) };
}

export interface Probe {
	at: number;
	queries: number;
	/** Process CPU time so far (user + system), µs. */
	cpuUs: number;
	rss: number;
	heapUsed: number;
	eldMeanMs: number;
	eldP99Ms: number;
	eldMaxMs: number;
}

export function readProbe(file: string): Probe {
	try {
		return JSON.parse(readFileSync(file, "utf8")) as Probe;
	} catch {
		return { at: Date.now(), queries: NaN, cpuUs: NaN, rss: NaN, heapUsed: NaN, eldMeanMs: NaN, eldP99Ms: NaN, eldMaxMs: NaN };
	}
}

/** Waits until the probe has written a snapshot newer than now (so a read after load is fresh). */
export async function freshProbe(read: () => Probe): Promise<Probe> {
	const since = Date.now();
	for (let i = 0; i < 20; i++) {
		const p = read();
		if (p.at > since) return p;
		await sleep(100);
	}
	return read();
}

/** Committed + rolled-back transactions of one database (pg_stat_database), read fresh. */
export async function xacts(pg: Client, database: string): Promise<number> {
	await pg.query("SELECT pg_stat_clear_snapshot()");
	const r = await pg.query<{ n: string }>("SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1", [database]);
	return Number(r.rows[0]?.n ?? NaN);
}

/** Transactions per second of `database` over `ms` (waits for the statistics to be flushed on both ends). */
export async function xactRate(pg: Client, database: string, ms: number): Promise<number> {
	await sleep(1100);
	const a = await xacts(pg, database);
	const t0 = Date.now();
	await sleep(ms);
	const b = await xacts(pg, database);
	return ((b - a) / (Date.now() - t0)) * 1000;
}

export const apiKey = () => `rk_bench_${randomBytes(24).toString("base64url")}`;
export const webhookSecret = () => `whsec_${randomBytes(24).toString("base64")}`;

export function writeTemp(name: string, text: string): string {
	const file = join(mkdtempSync(join(tmpdir(), "bench-")), name);
	writeFileSync(file, text);
	return file;
}

/**
 * One real fare-estimate answer from the platform at `url`, in a temp file
 * (BENCH_BODY_FILE): the floors and ladder rungs answer these same bytes.
 */
export async function fareAnswerFile(url: string, headers: Record<string, string>, body: string): Promise<{ file: string; text: string }> {
	const res = await fetch(url, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body });
	const text = await res.text();
	if (res.status !== 200) throw new Error(`fare-estimate answered ${res.status}: ${text}`);
	return { file: writeTemp("answer.json", text), text };
}

/** Stops processes, ignoring those already gone. */
export async function stopAll(...procs: Array<ServiceProcess | undefined>): Promise<void> {
	await Promise.all(
		procs.map(async (p) => {
			if (!p) return;
			const t = setTimeout(() => p.child.kill("SIGKILL"), 15_000);
			await p.kill("SIGTERM").catch(() => undefined);
			clearTimeout(t);
		}),
	);
}

/** Clock ticks per second of /proc's CPU times (USER_HZ; 100 on Linux unless `getconf CLK_TCK` says otherwise). */
const TICKS_PER_SECOND = (() => {
	const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
	const n = Number(String(r.stdout).trim());
	return r.status === 0 && n > 0 ? n : 100;
})();

/**
 * One process's /proc/<pid>/stat: its command name and its CPU clock ticks,
 * its own (utime + stime) and its waited-for children's (cutime + cstime);
 * undefined when it cannot be read (no /proc, or the process is gone). The
 * name may hold spaces and parentheses, so the fields are read after the last ")".
 */
function procStat(pid: number | string | undefined): { comm: string; ownTicks: number; childTicks: number } | undefined {
	let stat: string;
	try {
		stat = readFileSync(`/proc/${pid}/stat`, "utf8");
	} catch {
		return undefined;
	}
	const close = stat.lastIndexOf(")");
	const f = stat.slice(close + 2).split(" ");
	return { comm: stat.slice(stat.indexOf("(") + 1, close), ownTicks: Number(f[11]) + Number(f[12]), childTicks: Number(f[13]) + Number(f[14]) };
}

/** CPU seconds used so far by a process (utime + stime from /proc; NaN where there is no /proc). */
export function processCpuSeconds(pid: number | undefined): number {
	const stat = procStat(pid);
	return stat ? stat.ownTicks / TICKS_PER_SECOND : NaN;
}

/** Busy and total jiffies of the whole machine (/proc/stat), to tell how saturated the cores were. */
export function machineJiffies(): { busy: number; total: number } {
	try {
		const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0].split(/\s+/).slice(1).map(Number);
		const total = cpu.reduce((a, b) => a + b, 0);
		return { busy: total - cpu[3] - cpu[4], total };
	} catch {
		return { busy: NaN, total: NaN };
	}
}

/**
 * CPU seconds used so far by the local PostgreSQL server: every process named
 * postgres, including the backends that have exited (the postmaster's
 * cutime/cstime), so pgbench's connections count after they close. NaN when
 * the database is not on this machine or /proc cannot be read. Counts the
 * whole server, so nothing else should be using it meanwhile.
 */
export function postgresCpuSeconds(databaseUrl: string): number {
	const host = new URL(databaseUrl).hostname;
	if (!["127.0.0.1", "localhost", "::1", "[::1]", ""].includes(host)) return NaN;
	let ticks = 0;
	let seen = 0;
	let pids: string[];
	try {
		pids = readdirSync("/proc").filter((p) => /^\d+$/.test(p));
	} catch {
		return NaN;
	}
	for (const pid of pids) {
		const stat = procStat(pid); // undefined: exited meanwhile
		if (!stat || (stat.comm !== "postgres" && !stat.comm.startsWith("postgres:"))) continue;
		ticks += stat.ownTicks + stat.childTicks;
		seen += 1;
	}
	return seen > 0 ? ticks / TICKS_PER_SECOND : NaN;
}
