/**
 * The open-loop load generator (bench/lib/method.ts `openLoop`), in its own
 * process pinned to the generator core: request k is due at t0 + k / rate
 * whatever happened before, and its latency runs from that due time (no
 * coordinated omission: a stall of the server counts for every request due
 * during it). At most `maxInFlight` requests are open; one due past that is
 * counted as an error ("backlog"), not sent late.
 *
 *   node --import tsx bench/lib/open-loop.ts <config.json>
 *   config: { baseUrl, pool: PoolRequest[], rate, seconds, maxInFlight, base }
 *
 * Prints one line `BENCHJSON {…}` (OpenLoopFigures) and exits; it exits by
 * itself after seconds + 30 s whatever happens.
 */
import { Agent, request } from "node:http";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import type { PoolRequest } from "./method";

const config = JSON.parse(readFileSync(process.argv[2], "utf8")) as {
	baseUrl: string;
	pool: PoolRequest[];
	rate: number;
	seconds: number;
	maxInFlight: number;
	base: number;
};
const url = new URL(config.baseUrl);
const agent = new Agent({ keepAlive: true, maxSockets: config.maxInFlight, maxFreeSockets: config.maxInFlight });
const latencies: number[] = [];
let ok = 0;
let non2xx = 0;
let errors = 0;
let inFlight = 0;
let lagMax = 0;
const fill = (s: string, n: string) => (s.includes("{{n}}") ? s.replaceAll("{{n}}", n) : s);

function send(k: number, due: number): void {
	const e = config.pool[k % config.pool.length];
	const n = String(config.base + k).padStart(9, "0");
	const body = fill(e.body, n);
	const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(body) };
	for (const [h, v] of Object.entries(e.headers)) headers[h] = fill(v, n);
	inFlight++;
	const req = request({ host: url.hostname, port: url.port, path: fill(e.path, n), method: e.method ?? "POST", headers, agent, timeout: 15_000 }, (res) => {
		res.resume();
		res.on("end", () => {
			inFlight--;
			latencies.push(performance.now() - due);
			if (res.statusCode! >= 200 && res.statusCode! < 300) ok++;
			else non2xx++;
		});
	});
	req.on("timeout", () => req.destroy(new Error("timeout")));
	req.on("error", () => {
		inFlight--;
		errors++;
	});
	req.end(body);
}

const t0 = performance.now();
const total = Math.floor(config.rate * config.seconds);
let k = 0;
function tick(): void {
	const now = performance.now();
	for (; k < total && t0 + (k * 1000) / config.rate <= now; k++) {
		const due = t0 + (k * 1000) / config.rate;
		lagMax = Math.max(lagMax, now - due);
		if (inFlight >= config.maxInFlight) errors++;
		else send(k, due);
	}
	if (k < total) setTimeout(tick, 1);
	else void finish();
}

async function finish(): Promise<void> {
	const until = performance.now() + 15_000;
	while (inFlight > 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 20));
	const seconds = (performance.now() - t0) / 1000;
	const sorted = latencies.sort((a, b) => a - b);
	const at = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN);
	const figures = {
		rps: latencies.length / seconds,
		okPerS: ok / seconds,
		total: latencies.length,
		non2xx,
		errors: errors + inFlight,
		p50: at(50),
		p99: at(99),
		max: sorted.length ? sorted[sorted.length - 1] : NaN,
		seconds,
		due: total,
		rate: config.rate,
		lagMax,
	};
	console.log(`BENCHJSON ${JSON.stringify(figures)}`);
	process.exit(0);
}

setTimeout(() => process.exit(2), (config.seconds + 30) * 1000).unref();
tick();
