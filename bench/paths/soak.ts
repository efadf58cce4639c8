/**
 * Path 6 (only with `npm run bench -- soak` or BENCH_SOAK=1): memory and
 * event-loop delay of the platform in one process under a steady mixed load
 * (fare estimates, bookings on the simulated fleet with SIM_SPEED=60 so rides
 * move and finish, their webhooks to a local endpoint), paced evenly (a
 * tenth of each second's requests every 100 ms), on the embedded PostgreSQL
 * (the default) and on the server PostgreSQL. The load first runs
 * BENCH_SOAK_WARMUP_MS (default 2 minutes, not measured: rides in progress,
 * caches and the JIT reach their steady state), then BENCH_SOAK_MS (default
 * 10 minutes) measured. First minute vs last minute of the measured part,
 * RSS and event-loop delay p99 (a 250 ms histogram, sampled every 250 ms):
 * goal flat within ±10%.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestDatabase } from "../../test/helpers/db";
import { freePort } from "../../test/helpers/http";
import { rideRequest } from "../../test/helpers/rides";
import { startPartnerEndpoint } from "../../test/helpers/webhooks";
import { apiKey, fmt, sleep, startPlatformProcess, stopAll, webhookSecret, type BenchOptions, type Probe, type Row } from "../lib/common";

const DURATION_MS = Number(process.env.BENCH_SOAK_MS || 600_000);
const WARMUP_MS = Number(process.env.BENCH_SOAK_WARMUP_MS ?? 120_000);
const TICK_MS = 100;
const ESTIMATES_PER_S = 100;
const BOOKINGS_PER_S = 5;

async function soakOne(label: string, env: Record<string, string>): Promise<Row[]> {
	const key = apiKey();
	const secret = webhookSecret();
	const endpoint = await startPartnerEndpoint(secret);
	const port = await freePort();
	let platform;
	try {
		platform = await startPlatformProcess(`soak-${label}`, {
			...env,
			PORT: String(port),
			BOOTSTRAP_PARTNER_KEY: key,
			BOOTSTRAP_WEBHOOK_SECRET: secret,
			FLEET_MODE: "simulated",
			SIM_SPEED: "60",
		});
		const post = async (path: string, body: unknown) => {
			const r = await fetch(`http://127.0.0.1:${port}${path}`, {
				method: "POST",
				headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
				body: JSON.stringify(body),
			});
			await r.text();
			return r.status;
		};
		const samples: Probe[] = [];
		let n = 0;
		// Failures of the measured part by answer (status or "network"): what failed, not only how many.
		const failedBy = new Map<string, number>();
		let measuring = false;
		const fail = (how: string) => {
			if (measuring) failedBy.set(how, (failedBy.get(how) ?? 0) + 1);
		};
		let inFlight = 0;
		const fire = (path: string, body: unknown) => {
			inFlight++;
			void post(path, body)
				.then(
					(status) => {
						if (status >= 400) fail(`${path} ${status}`);
					},
					() => fail(`${path} network`),
				)
				.finally(() => inFlight--);
		};
		// Steady load: 1/10 of each second's estimates every 100 ms, a booking every 200 ms.
		let tick = 0;
		const loadTimer = setInterval(() => {
			for (let i = 0; i < ESTIMATES_PER_S / (1000 / TICK_MS); i++)
				fire("/ride/fare-estimate", { pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } });
			if (tick++ % (1000 / TICK_MS / BOOKINGS_PER_S) === 0) fire("/ride/create-order", rideRequest(`${endpoint.url}/soak`, n++));
		}, TICK_MS);
		await sleep(WARMUP_MS);
		const t0 = Date.now();
		measuring = true;
		const bookingsAtStart = n;
		const deliveredAtStart = endpoint.delivered().length;
		const sampler = setInterval(() => samples.push(platform!.probe()), 250);
		await sleep(DURATION_MS);
		clearInterval(sampler);
		clearInterval(loadTimer);
		while (inFlight > 0) await sleep(50);
		const minute = Math.min(60_000, DURATION_MS / 3);
		const first = samples.filter((s) => s.at - t0 <= minute);
		const last = samples.filter((s) => s.at >= t0 + DURATION_MS - minute);
		// Over the samples that were read: a probe file caught unreadable once (NaN) must not blank its whole window.
		const mean = (xs: Probe[], f: (p: Probe) => number) => {
			const read = xs.map(f).filter(Number.isFinite);
			return read.length ? read.reduce((a, v) => a + v, 0) / read.length : NaN;
		};
		const rss = [mean(first, (p) => p.rss), mean(last, (p) => p.rss)];
		const eld = [mean(first, (p) => p.eldP99Ms), mean(last, (p) => p.eldP99Ms)];
		const mb = (b: number) => `${fmt(b / 2 ** 20)} MB`;
		const drift = (a: number, b: number) => b / a - 1;
		// Every window, not only the first and the last: whether a change is a trend or one noisy window.
		const windows = Array.from({ length: Math.floor(DURATION_MS / minute) }, (_, i) =>
			samples.filter((s) => s.at - t0 > i * minute && s.at - t0 <= (i + 1) * minute),
		);
		const series = (f: (p: Probe) => number, show: (v: number) => string) => windows.map((w) => show(mean(w, f))).join(", ");
		return [
			{
				path: `soak ${label}: RSS first → last ${fmt(minute / 1000)} s`,
				figure: `${mb(rss[0])} → ${mb(rss[1])}`,
				floor: "first window",
				ratio: fmt(rss[1] / rss[0], 2),
				goal: "flat ±10%",
				met: Math.abs(drift(rss[0], rss[1])) <= 0.1,
				note: `${fmt(WARMUP_MS / 60_000, 1)} min warm-up then ${fmt(DURATION_MS / 60_000, 1)} min measured: ${n - bookingsAtStart} bookings, ${endpoint.delivered().length - deliveredAtStart} webhooks delivered, ${[...failedBy.values()].reduce((a, c) => a + c, 0)} failed calls${failedBy.size ? ` (${[...failedBy].map(([how, count]) => `${how}: ${count}`).join(", ")})` : ""}; RSS per window (MB): ${series(
					(p) => p.rss,
					(v) => fmt(v / 2 ** 20),
				)}; V8 heap used per window (MB): ${series(
					(p) => p.heapUsed,
					(v) => fmt(v / 2 ** 20),
				)}`,
			},
			{
				path: `soak ${label}: event-loop delay p99`,
				figure: `${fmt(eld[0], 1)} → ${fmt(eld[1], 1)} ms`,
				floor: "first window",
				ratio: fmt(eld[1] / eld[0], 2),
				goal: "flat ±10%",
				met: Math.abs(drift(eld[0], eld[1])) <= 0.1,
				note: `per window (ms): ${series(
					(p) => p.eldP99Ms,
					(v) => fmt(v, 1),
				)}`,
			},
		];
	} finally {
		await stopAll(platform?.proc);
		await endpoint.close();
	}
}

/** BENCH_SOAK_DB=embedded or =server runs only that database's soak (looking into one of them takes 12 minutes, not 24). */
const SOAK_DB = process.env.BENCH_SOAK_DB ?? "both";

export async function soak(_opts: BenchOptions): Promise<Row[]> {
	const rows: Row[] = [];
	if (SOAK_DB !== "server") {
		const dataDir = mkdtempSync(join(tmpdir(), "bench-soak-"));
		try {
			rows.push(...(await soakOne("embedded", { DATA_DIR: dataDir, DATABASE_URL: "" })));
		} finally {
			rmSync(dataDir, { recursive: true, force: true });
		}
	}
	if (SOAK_DB === "embedded") return rows;
	const db = await createTestDatabase("benchsoak");
	try {
		rows.push(...(await soakOne("server PG", { DATABASE_URL: db.url })));
	} finally {
		await db.drop();
	}
	return rows;
}
