/**
 * The bench's method (docs/BENCHMARKS.md, "Method"):
 *
 * - every ratio is ROUNDS alternating rounds (platform, floor, platform,
 *   floor …), each side started, loaded and stopped before the other is
 *   started: the median and the min–max of the per-round ratios;
 * - where the path is one process, the server is pinned to core 0 and the
 *   load generator to core 1 (`taskset`); the production topology's
 *   processes all go on core 0 as well, so both sides of a ratio have one
 *   core each;
 * - the load generator is Debian's `wrk` (C), driven by a Lua script built
 *   from a pool of requests (many keys, bodies, a fresh Idempotency-Key per
 *   request), closed loop: the maximum;
 * - the latency goals are open loop (bench/lib/open-loop.ts in its own pinned
 *   process): requests due at a fixed rate, a stated fraction of the same
 *   run's maximum, each timed from when it was due.
 */
import { spawn, spawnSync } from "node:child_process";
import { createSocket, type Socket } from "node:dgram";
import { join } from "node:path";
import autocannon from "autocannon";
import { fmt, ROOT, writeTemp } from "./common";

export const SERVER_CORE = 0;
export const GENERATOR_CORE = 1;

const hasTaskset = spawnSync("taskset", ["--version"]).status === 0;
/** BENCH_NO_WRK=1 runs the autocannon fallback as on a machine without wrk. */
const hasWrk = process.env.BENCH_NO_WRK !== "1" && spawnSync("sh", ["-c", "command -v wrk"]).status === 0;

/** Pins every thread of a running process (and the threads it starts later) to one core; false without taskset. */
export function pin(pid: number | undefined, core: number): boolean {
	if (!hasTaskset || !pid) return false;
	return spawnSync("taskset", ["-a", "-p", "-c", String(core), String(pid)], { encoding: "utf8" }).status === 0;
}

/** Runs `cmd args` pinned to `core` (taskset -c), or unpinned without taskset. */
function pinnedCommand(core: number, cmd: string, args: string[]): [string, string[]] {
	return hasTaskset ? ["taskset", ["-c", String(core), cmd, ...args]] : [cmd, args];
}

export interface Spread {
	median: number;
	min: number;
	max: number;
	values: number[];
}

export function spread(values: number[]): Spread {
	const v = values.filter(Number.isFinite).sort((a, b) => a - b);
	if (v.length === 0) return { median: NaN, min: NaN, max: NaN, values };
	const mid = Math.floor(v.length / 2);
	return { median: v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2, min: v[0], max: v[v.length - 1], values };
}

/** "0.39 (0.32–0.45)": the median and the range of a spread. */
export const showSpread = (s: Spread, digits = 2): string =>
	s.values.length > 1 ? `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})` : fmt(s.median, digits);

/**
 * `rounds` alternating rounds of the given sides (each a function that starts
 * its server, loads it, stops it and returns its figure): per side the list of
 * figures in round order. Round r runs the sides in order, so every side sees
 * the same drift of a shared machine.
 */
export async function alternate<K extends string>(rounds: number, sides: Record<K, () => Promise<number>>): Promise<Record<K, number[]>> {
	const out = Object.fromEntries(Object.keys(sides).map((k) => [k, [] as number[]])) as Record<K, number[]>;
	for (let r = 0; r < rounds; r++) {
		for (const k of Object.keys(sides) as K[]) {
			const t0 = Date.now();
			out[k].push(await sides[k]());
			console.log(`  · round ${r + 1}/${rounds} ${k}: ${fmt(out[k][r], 1)} (${fmt((Date.now() - t0) / 1000, 1)} s)`);
		}
	}
	return out;
}

/** Per-round ratios a[i] / b[i]. */
export const ratios = (a: number[], b: number[]): Spread => spread(a.map((x, i) => x / b[i]));

/** One request of a pool; `{{n}}` in the path, a header or the body is replaced by a number unique in the run. */
export interface PoolRequest {
	method?: string;
	path: string;
	headers: Record<string, string>;
	body: string;
}

export interface LoadFigures {
	/** Answers per second (all answers). */
	rps: number;
	/** 2xx answers per second. */
	okPerS: number;
	total: number;
	non2xx: number;
	errors: number;
	p50: number;
	p99: number;
	max: number;
	seconds: number;
}

let uniqueBase = Math.floor(Math.random() * 50) * 10_000_000;
/** A new range of unique numbers for the next load (phones and Idempotency-Keys never repeat within a bench run). */
function nextBase(): number {
	uniqueBase += 10_000_000;
	return uniqueBase;
}

const luaString = (s: string) => `[==[${s}]==]`;

/** The wrk Lua script for a pool: requests in turn, `{{n}}` filled per request, a JSON summary at the end. */
function wrkScript(pool: PoolRequest[]): string {
	const dynamic = pool.some((r) => `${r.path}${JSON.stringify(r.headers)}${r.body}`.includes("{{n}}"));
	const entries = pool
		.map(
			(r) =>
				`{m=${luaString(r.method ?? "POST")},p=${luaString(r.path)},b=${luaString(r.body)},h={${Object.entries({
					"Content-Type": "application/json",
					...r.headers,
				})
					.map(([k, v]) => `[ ${luaString(k)} ]=${luaString(v)}`)
					.join(",")}}}`,
		)
		.join(",\n");
	return `local pool = {\n${entries}\n}
local dynamic = ${dynamic ? "true" : "false"}
local base = ${nextBase()}
local i = 0
local ready = {}
init = function(args)
	if not dynamic then
		for k, e in ipairs(pool) do ready[k] = wrk.format(e.m, e.p, e.h, e.b) end
	end
end
request = function()
	i = i + 1
	local k = (i % #pool) + 1
	if not dynamic then return ready[k] end
	local e = pool[k]
	local n = string.format("%09d", base + i)
	local h = {}
	for hk, hv in pairs(e.h) do h[hk] = (hv:gsub("{{n}}", n)) end
	return wrk.format(e.m, (e.p:gsub("{{n}}", n)), h, (e.b:gsub("{{n}}", n)))
end
done = function(summary, latency, requests)
	local e = summary.errors
	io.write(string.format('BENCHJSON {"requests":%d,"duration_us":%d,"status":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\\n',
		summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(50), latency:percentile(99), latency.max))
end
`;
}

function runCollect(cmd: string, args: string[], timeoutMs: number): Promise<{ code: number | null; out: string }> {
	return new Promise((resolve) => {
		const child = spawn(cmd, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
		let out = "";
		child.stdout.on("data", (c: Buffer) => (out += c.toString()));
		child.stderr.on("data", (c: Buffer) => (out += c.toString()));
		const t = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
		child.on("exit", (code) => {
			clearTimeout(t);
			resolve({ code, out });
		});
	});
}

let warned = false;

/**
 * Without wrk (apt-get install wrk): autocannon in this process, so a bench
 * or its smoke still runs; its figures are then the JavaScript generator's,
 * which the run says once.
 */
async function autocannonFallback(baseUrl: string, pool: PoolRequest[], connections: number, seconds: number): Promise<LoadFigures> {
	if (!warned) console.log("  ! wrk is not installed (apt-get install wrk): loads run on autocannon in the bench process, unpinned");
	warned = true;
	const base = nextBase();
	let i = 0;
	const fill = (text: string, n: string) => text.replaceAll("{{n}}", n);
	const result = await autocannon({
		url: baseUrl,
		connections,
		duration: seconds,
		requests: [
			{
				setupRequest: (req: Record<string, unknown>) => {
					const e = pool[i % pool.length];
					const n = String(base + ++i).padStart(9, "0");
					const headers: Record<string, string> = { "content-type": "application/json" };
					for (const [h, v] of Object.entries(e.headers)) headers[h] = fill(v, n);
					return { ...req, method: e.method ?? "POST", path: fill(e.path, n), headers, body: fill(e.body, n) };
				},
			},
		],
	});
	const secs = Math.max(0.001, result.duration);
	const total = result.requests.total;
	return {
		rps: total / secs,
		okPerS: (total - result.non2xx) / secs,
		total,
		non2xx: result.non2xx,
		errors: result.errors + result.timeouts,
		p50: result.latency.p50,
		p99: result.latency.p99,
		max: result.latency.max,
		seconds: secs,
	};
}

/** Closed loop with wrk (one thread, `connections` connections) pinned to the generator core. */
export async function wrk(baseUrl: string, pool: PoolRequest[], connections: number, seconds: number): Promise<LoadFigures> {
	if (!hasWrk) return autocannonFallback(baseUrl, pool, connections, seconds);
	const script = writeTemp("load.lua", wrkScript(pool));
	const [cmd, args] = pinnedCommand(GENERATOR_CORE, "wrk", ["-t1", `-c${connections}`, `-d${seconds}s`, "--timeout", "10s", "-s", script, baseUrl]);
	const r = await runCollect(cmd, args, (seconds + 30) * 1000);
	const m = /BENCHJSON (\{.*\})/.exec(r.out);
	if (!m) throw new Error(`wrk failed (${r.code}): ${r.out.slice(0, 500)}`);
	const j = JSON.parse(m[1]) as Record<string, number>;
	const secs = j.duration_us / 1e6;
	const errors = j.connect + j.read + j.write + j.timeout;
	return {
		rps: j.requests / secs,
		okPerS: (j.requests - j.status) / secs,
		total: j.requests,
		non2xx: j.status,
		errors,
		p50: j.p50_us / 1000,
		p99: j.p99_us / 1000,
		max: j.max_us / 1000,
		seconds: secs,
	};
}

export interface OpenLoopFigures extends LoadFigures {
	/** Requests due in the run. */
	due: number;
	/** Per-second rate asked for. */
	rate: number;
	/** Largest lag of the generator's own timer behind a due time, ms (the generator's own health). */
	lagMax: number;
}

/**
 * Open loop at `rate` requests/s for `seconds` (bench/lib/open-loop.ts in its
 * own process pinned to the generator core): latency from each request's due
 * time, so a stall counts for every request due during it.
 */
export async function openLoop(baseUrl: string, pool: PoolRequest[], rate: number, seconds: number, maxInFlight = 512): Promise<OpenLoopFigures> {
	const config = writeTemp("open-loop.json", JSON.stringify({ baseUrl, pool, rate, seconds, maxInFlight, base: nextBase() }));
	const [cmd, args] = pinnedCommand(GENERATOR_CORE, process.execPath, ["--import", "tsx", join(ROOT, "bench/lib/open-loop.ts"), config]);
	const r = await runCollect(cmd, args, (seconds + 60) * 1000);
	const m = /BENCHJSON (\{.*\})/.exec(r.out);
	if (!m) throw new Error(`the open-loop generator failed (${r.code}): ${r.out.slice(0, 500)}`);
	return JSON.parse(m[1]) as OpenLoopFigures;
}

/**
 * A DNS server on 127.0.0.1 (UDP, a free port) answering every A query under
 * `zone` with 127.0.0.1 (TTL `ttl` s) and NXDOMAIN otherwise: the platform
 * resolves the bench's webhook host names through it (WEBHOOK_DNS_SERVERS),
 * as it resolves partners' names in production.
 */
export async function startDnsServer(zone: string, ttl = 60): Promise<{ server: string; queries: () => number; close: () => void }> {
	const socket: Socket = createSocket("udp4");
	let queries = 0;
	socket.on("message", (msg, rinfo) => {
		queries++;
		let at = 12;
		const labels: string[] = [];
		while (at < msg.length && msg[at] !== 0) {
			labels.push(msg.subarray(at + 1, at + 1 + msg[at]).toString());
			at += msg[at] + 1;
		}
		at += 1;
		const name = labels.join(".").toLowerCase();
		const type = msg.readUInt16BE(at);
		const end = at + 4;
		const ours = name === zone || name.endsWith(`.${zone}`);
		const header = Buffer.alloc(12);
		msg.copy(header, 0, 0, 2);
		header.writeUInt16BE(ours ? 0x8180 : 0x8183, 2);
		header.writeUInt16BE(1, 4);
		const answers: Buffer[] = [];
		if (ours && type === 1) {
			const rr = Buffer.alloc(16);
			rr.writeUInt16BE(0xc00c, 0);
			rr.writeUInt16BE(1, 2);
			rr.writeUInt16BE(1, 4);
			rr.writeUInt32BE(ttl, 6);
			rr.writeUInt16BE(4, 10);
			[127, 0, 0, 1].forEach((b, i) => rr.writeUInt8(b, 12 + i));
			answers.push(rr);
		}
		header.writeUInt16BE(answers.length, 6);
		socket.send(Buffer.concat([header, msg.subarray(12, end), ...answers]), rinfo.port, rinfo.address);
	});
	await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
	return { server: `127.0.0.1:${socket.address().port}`, queries: () => queries, close: () => socket.close() };
}

/** Least-squares slope of y over x (per unit of x). */
export function slope(points: Array<[number, number]>): number {
	const p = points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
	if (p.length < 2) return NaN;
	const mx = p.reduce((a, [x]) => a + x, 0) / p.length;
	const my = p.reduce((a, [, y]) => a + y, 0) / p.length;
	const sxy = p.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
	const sxx = p.reduce((a, [x]) => a + (x - mx) ** 2, 0);
	return sxx === 0 ? NaN : sxy / sxx;
}

/** Rounds for a ratio: BENCH_ROUNDS (default 5; 1 in a smoke). */
export const roundsFor = (smoke: boolean): number => Number(process.env.BENCH_ROUNDS || (smoke ? 1 : 5));
