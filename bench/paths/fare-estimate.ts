/**
 * fare-estimate against its floors, in alternating rounds (bench/lib/method.ts):
 *
 *   1. the platform in one process (pinned to core 0) vs bare moleculer-web
 *      (bench/servers/bare-web.ts, one validated action answering the same
 *      bytes, compiled like the platform, pinned to core 0): req/s and the
 *      server's CPU per request; wrk on core 1, 50 connections;
 *   2. the platform as k8s deploys it (six processes over NATS, Redis-shared
 *      limits, bench/lib/platform.ts) vs bare moleculer-web with its action in
 *      a second process over the same NATS, once with Moleculer's stock NATS
 *      transporter and once with the platform's coalescing one (like for
 *      like);
 *   3. in the same topology, many partner keys and pickups spread over the
 *      city vs one key and one trip (every request the same supply cell and
 *      key cache).
 */
import { TEST_NATS_URL } from "../../test/helpers/db";
import { uniqueNamespace } from "../../test/helpers/node";
import { fareAnswerFile, fmt, processCpuSeconds, stopAll, type BenchOptions, type Row } from "../lib/common";
import { startHelper } from "../lib/common";
import { alternate, pin, ratios, roundsFor, SERVER_CORE, showSpread, spread, wrk, type LoadFigures, type PoolRequest } from "../lib/method";
import { farePool, preparedDatabase, SINGLE_TRIP, startDnsServer, startPlatform, DNS_ZONE } from "../lib/platform";

const CONNECTIONS = 50;

/** A warm-up then the measured wrk load; CPU per request of the given processes over the measured part. */
async function measure(
	baseUrl: string,
	pool: PoolRequest[],
	pids: Array<number | undefined>,
	opts: BenchOptions,
): Promise<LoadFigures & { cpuUsPerRequest: number }> {
	await wrk(baseUrl, pool, CONNECTIONS, opts.smoke ? 1 : 2);
	const cpu = () => pids.reduce<number>((a, p) => a + processCpuSeconds(p), 0);
	const c0 = cpu();
	const r = await wrk(baseUrl, pool, CONNECTIONS, opts.seconds);
	const cpuUsPerRequest = ((cpu() - c0) * 1e6) / Math.max(1, r.total);
	if (r.non2xx + r.errors > r.total * 0.01) throw new Error(`fare-estimate at ${baseUrl}: ${r.non2xx} non-2xx and ${r.errors} errors of ${r.total}`);
	return { ...r, cpuUsPerRequest };
}

export async function fareEstimate(opts: BenchOptions): Promise<Row[]> {
	const keysWanted = Number(process.env.BENCH_KEYS || (opts.smoke ? 20 : 1000));
	const trips = opts.smoke ? 200 : 5000;
	const rounds = roundsFor(opts.smoke);
	const prepared = await preparedDatabase(keysWanted);
	const db = await prepared.clone();
	const dns = await startDnsServer(DNS_ZONE);
	const keys = prepared.keys;
	const single = farePool(keys, 1, false);
	const spreadPool = farePool(keys, trips, true);
	let bodyFile = "";
	let answerBytes = 0;
	const extra = { platformCpu: [] as number[], bareCpu: [] as number[], spreadRps: [] as number[], p99: [] as number[], topoP99: [] as number[] };
	try {
		const bareOverNats = async (transporter: "stock" | "coalescing") => {
			const ns = uniqueNamespace("benchbare");
			const env = { BENCH_BODY_FILE: bodyFile, TRANSPORTER: TEST_NATS_URL, NAMESPACE: ns, BENCH_TRANSPORTER: transporter };
			const procs = [];
			try {
				const action = await startHelper("bare-web.ts", { ...env, BENCH_ROLE: "action" });
				procs.push(action.proc);
				const gw = await startHelper("bare-web.ts", { ...env, BENCH_ROLE: "gateway" });
				procs.push(gw.proc);
				for (const p of procs) pin(p.child.pid, SERVER_CORE);
				return (await measure(`http://127.0.0.1:${gw.port}`, single, [], opts)).rps;
			} finally {
				await stopAll(...procs);
			}
		};
		const figures = await alternate(rounds, {
			platform: async () => {
				const p = await startPlatform("one", db.url, keys[0], dns.server);
				try {
					if (!bodyFile) {
						const a = await fareAnswerFile(`${p.baseUrl}/ride/fare-estimate`, { authorization: `Bearer ${keys[0]}` }, JSON.stringify(SINGLE_TRIP));
						bodyFile = a.file;
						answerBytes = a.text.length;
					}
					const r = await measure(
						p.baseUrl,
						single,
						p.procs.map((x) => x.child.pid),
						opts,
					);
					extra.platformCpu.push(r.cpuUsPerRequest);
					extra.p99.push(r.p99);
					return r.rps;
				} finally {
					await p.stop();
				}
			},
			bare: async () => {
				const h = await startHelper("bare-web.ts", { BENCH_BODY_FILE: bodyFile });
				try {
					pin(h.proc.child.pid, SERVER_CORE);
					const r = await measure(`http://127.0.0.1:${h.port}`, single, [h.proc.child.pid], opts);
					extra.bareCpu.push(r.cpuUsPerRequest);
					return r.rps;
				} finally {
					await stopAll(h.proc);
				}
			},
			topology: async () => {
				const p = await startPlatform("topology", db.url, keys[0], dns.server);
				try {
					const one = await measure(p.baseUrl, single, [], opts);
					const many = await measure(p.baseUrl, spreadPool, [], opts);
					extra.spreadRps.push(many.rps);
					extra.topoP99.push(one.p99);
					return one.rps;
				} finally {
					await p.stop();
				}
			},
			bareStock: () => bareOverNats("stock"),
			bareSame: () => bareOverNats("coalescing"),
		});
		const oneVsBare = ratios(figures.platform, figures.bare);
		const cpuRatio = ratios(extra.platformCpu, extra.bareCpu);
		const topoStock = ratios(figures.topology, figures.bareStock);
		const topoSame = ratios(figures.topology, figures.bareSame);
		const spreadVsSingle = ratios(extra.spreadRps, figures.topology);
		const med = (xs: number[]) => fmt(spread(xs).median);
		const how = `${rounds} alternating round${rounds > 1 ? "s" : ""}, median (min–max); wrk 50 connections on core 1, servers on core 0`;
		return [
			{
				path: "fare-estimate, 1 process vs bare moleculer-web",
				figure: `${med(figures.platform)} req/s`,
				floor: `moleculer-web ${med(figures.bare)} req/s`,
				ratio: showSpread(oneVsBare),
				goal: "≥ 0.65",
				met: oneVsBare.median >= 0.65,
				note: `${how}; ${answerBytes} B answer, p99 ${fmt(spread(extra.p99).median, 1)} ms`,
			},
			{
				path: "fare-estimate, CPU per request vs moleculer-web's",
				figure: `${med(extra.platformCpu)} µs`,
				floor: `moleculer-web ${med(extra.bareCpu)} µs`,
				ratio: showSpread(cpuRatio),
				goal: "≤ 1.5",
				met: cpuRatio.median <= 1.5,
			},
			{
				path: "fare-estimate, topology vs moleculer-web over NATS (stock transporter)",
				figure: `${med(figures.topology)} req/s`,
				floor: `moleculer-web over NATS ${med(figures.bareStock)} req/s`,
				ratio: showSpread(topoStock),
				goal: "≥ 0.9",
				met: topoStock.median >= 0.9,
				note: `six processes as k8s deploys them, Redis-shared limits on, all on core 0 (the floor's two as well); p99 ${fmt(spread(extra.topoP99).median, 1)} ms`,
			},
			{
				path: "fare-estimate, topology vs moleculer-web over NATS (same transporter)",
				figure: `${med(figures.topology)} req/s`,
				floor: `moleculer-web, coalescing transporter ${med(figures.bareSame)} req/s`,
				ratio: showSpread(topoSame),
				goal: "≥ 0.85",
				met: topoSame.median >= 0.85,
			},
			{
				path: `fare-estimate, topology, ${keys.length} keys and ${trips} spread trips vs 1 key 1 trip`,
				figure: `${med(extra.spreadRps)} req/s`,
				floor: `single cell ${med(figures.topology)} req/s`,
				ratio: showSpread(spreadVsSingle),
				goal: "≥ 0.7",
				met: spreadVsSingle.median >= 0.7,
			},
		];
	} finally {
		dns.close();
		await db.drop();
	}
}
