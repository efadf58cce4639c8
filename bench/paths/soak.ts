/**
 * Soak (with `npm run bench -- soak`, BENCH_SOAK=1, or in a smoke for a few
 * seconds): memory of the platform in one process under a steady mixed load
 * (fare estimates, bookings on the simulated fleet with SIM_SPEED=60 so rides
 * move and finish, their webhooks to a local endpoint), paced evenly (a
 * tenth of each second's requests every 100 ms), on the embedded PostgreSQL
 * (the default) and on the server PostgreSQL.
 *
 * Judged by slopes, not by a first-vs-last comparison: RSS and V8 heap used
 * are sampled every second and fitted by least squares over minutes 3–30
 * (`--soak-minutes N` runs N minutes instead, fitted from a tenth of the run,
 * at most minute 3, to its end). Goal: RSS ≤ 0.5 MB/min (0.5 MB/min is
 * 720 MB a day), heap ≈ 0 (≤ 0.1 MB/min).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestDatabase } from "../../test/helpers/db";
import { freePort } from "../../test/helpers/http";
import { rideRequest } from "../../test/helpers/rides";
import { startPartnerEndpoint } from "../../test/helpers/webhooks";
import { slope } from "../lib/method";
import { apiKey, fmt, sleep, startPlatformProcess, stopAll, webhookSecret, type BenchOptions, type Probe, type Row } from "../lib/common";

const TICK_MS = 100;
const ESTIMATES_PER_S = 100;
const BOOKINGS_PER_S = 5;

async function soakOne(label: string, env: Record<string, string>, minutes: number): Promise<Row[]> {
	const DURATION_MS = minutes * 60_000;
	/** The fit starts here: start-up, caches and the JIT settle first. */
	const FIT_FROM_MS = Math.min(3 * 60_000, DURATION_MS / 10);
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
		const t0 = Date.now();
		measuring = true;
		const sampler = setInterval(() => samples.push(platform!.probe()), 1000);
		await sleep(DURATION_MS);
		clearInterval(sampler);
		clearInterval(loadTimer);
		while (inFlight > 0) await sleep(50);
		const fitted = samples.filter((p) => p.at - t0 >= FIT_FROM_MS);
		const minutesOf = (p: Probe) => (p.at - t0) / 60_000;
		const mbPerMin = (f: (p: Probe) => number) => slope(fitted.map((p) => [minutesOf(p), f(p) / 2 ** 20]));
		const rssSlope = mbPerMin((p) => p.rss);
		const heapSlope = mbPerMin((p) => p.heapUsed);
		// Per-minute means (at most 30 shown): whether a slope is a trend or one noisy stretch.
		const perMinute = (f: (p: Probe) => number) => {
			const out: string[] = [];
			for (let m = 0; m * 60_000 < DURATION_MS && out.length < 30; m++) {
				const w = samples
					.filter((p) => p.at - t0 >= m * 60_000 && p.at - t0 < (m + 1) * 60_000)
					.map(f)
					.filter(Number.isFinite);
				if (w.length) out.push(fmt(w.reduce((x, y) => x + y, 0) / w.length / 2 ** 20));
			}
			return out.join(", ");
		};
		const failed = [...failedBy.values()].reduce((x, c) => x + c, 0);
		const span = `fitted over minutes ${fmt(FIT_FROM_MS / 60_000, 1)}–${fmt(DURATION_MS / 60_000, 1)} (${fitted.length} samples)`;
		return [
			{
				path: `soak ${label}: RSS slope`,
				figure: `${fmt(rssSlope, 2)} MB/min`,
				floor: "–",
				ratio: "–",
				goal: "≤ 0.5 MB/min",
				met: fitted.length >= 2 ? rssSlope <= 0.5 : undefined,
				note: `${span}; ${n} bookings, ${endpoint.delivered().length} webhooks delivered, ${failed} failed calls${failedBy.size ? ` (${[...failedBy].map(([how, count]) => `${how}: ${count}`).join(", ")})` : ""}; RSS per minute (MB): ${perMinute((p) => p.rss)}`,
			},
			{
				path: `soak ${label}: V8 heap slope`,
				figure: `${fmt(heapSlope, 2)} MB/min`,
				floor: "–",
				ratio: "–",
				goal: "≈ 0 (≤ 0.1 MB/min)",
				met: fitted.length >= 2 ? Math.abs(heapSlope) <= 0.1 : undefined,
				note: `heap used per minute (MB): ${perMinute((p) => p.heapUsed)}`,
			},
		];
	} finally {
		await stopAll(platform?.proc);
		await endpoint.close();
	}
}

/** BENCH_SOAK_DB=embedded or =server runs only that database's soak. */
const SOAK_DB = process.env.BENCH_SOAK_DB ?? "both";

export async function soak(opts: BenchOptions): Promise<Row[]> {
	const minutes = opts.soakMinutes ?? (opts.smoke ? 0.1 : 30);
	const rows: Row[] = [];
	// A smoke runs the embedded database's soak only (the default database, and the one whose memory grew before).
	const which = opts.smoke && !process.env.BENCH_SOAK_DB ? "embedded" : SOAK_DB;
	if (which !== "server") {
		const dataDir = mkdtempSync(join(tmpdir(), "bench-soak-"));
		try {
			rows.push(...(await soakOne("embedded", { DATA_DIR: dataDir, DATABASE_URL: "" }, minutes)));
		} finally {
			rmSync(dataDir, { recursive: true, force: true });
		}
	}
	if (which === "embedded") return rows;
	const db = await createTestDatabase("benchsoak");
	try {
		rows.push(...(await soakOne("server PG", { DATABASE_URL: db.url }, minutes)));
	} finally {
		await db.drop();
	}
	return rows;
}
