/**
 * Where fare-estimate's gap to the bare moleculer-web floor sits:
 *
 *   npx tsx bench/fare-ladder.ts [rounds] [--ceilings]   (default 5 rounds of 5 s per rung)
 *
 * Loads, one after another and in alternating rounds (this machine's speed
 * drifts between minutes), raw node:http, bare moleculer-web, and the rungs
 * of bench/servers/ladder-web.ts: bare moleculer-web doing only what the
 * contract asks of any fare-estimate (key lookup, signed quotes), then the
 * platform's broker options, its gateway, every service. `--ceilings` adds
 * two other forms of the contract rung: the key checked in moleculer-web's
 * authenticate hook instead of onBeforeCall, and no key check at all. Prints
 * req/s and the server's CPU per request (from /proc, steadier than req/s on
 * a shared machine), then the median per rung. All rungs run under tsx, like
 * the floors, so they compare with each other; `npm run bench` measures the
 * compiled build. Figures only.
 */
import { createTestDatabase } from "../test/helpers/db";
import { apiKey, fareAnswerFile, fmt, load, processCpuSeconds, startHelper, stopAll } from "./lib/common";
import type { ServiceProcess } from "../test/helpers/processes";

const BODY = JSON.stringify({ pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } });
const SECONDS = Number(process.env.BENCH_SECONDS || 5);

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
	const args = process.argv.slice(2);
	const ceilings = args.includes("--ceilings");
	const rounds = Number(args.find((a) => /^\d+$/.test(a)) ?? 5);
	const db = await createTestDatabase("benchladder");
	const key = apiKey();
	const headers = { authorization: `Bearer ${key}` };
	const env = {
		DATABASE_URL: db.url,
		PORT: "0",
		NODE_ENV: "test",
		// Quiet: startHelper waits for "listening <port>" or "ready", and an info line may say "ready".
		LOGLEVEL: "warn",
		METRICS_PORT: "0",
		HEALTH_PORT: "",
		RATE_LIMIT_PER_MINUTE: "0",
		AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
		FLEET_MODE: "simulated",
		BOOTSTRAP_PARTNER_KEY: key,
	};
	const procs: ServiceProcess[] = [];
	try {
		const full = await startHelper("ladder-web.ts", { ...env, LADDER: "full" });
		procs.push(full.proc);
		const { file: bodyFile } = await fareAnswerFile(`http://127.0.0.1:${full.port}/ride/fare-estimate`, headers, BODY);
		const rungs: Array<{ name: string; port: number; proc: ServiceProcess; rps: number[]; us: number[] }> = [];
		const add = async (name: string, script: string, extra: Record<string, string>) => {
			const h = await startHelper(script, { ...env, BENCH_BODY_FILE: bodyFile, ...extra }, "tsx");
			procs.push(h.proc);
			rungs.push({ name, port: h.port, proc: h.proc, rps: [], us: [] });
		};
		await add("raw node:http", "raw-http.ts", {});
		await add("bare moleculer-web", "bare-web.ts", {});
		await add("+ the contract's own work", "ladder-web.ts", { LADDER: "contract" });
		if (ceilings) {
			await add("contract, key in authenticate hook", "ladder-web.ts", { LADDER: "contract", CONTRACT_AUTH: "authenticate" });
			await add("contract, signing only (no key)", "ladder-web.ts", { LADDER: "contract", CONTRACT_AUTH: "none" });
		}
		await add("+ platform broker options", "ladder-web.ts", { LADDER: "config" });
		await add("+ platform gateway", "ladder-web.ts", { LADDER: "gateway" });
		rungs.push({ name: "platform (every service)", port: full.port, proc: full.proc, rps: [], us: [] });
		for (let round = 0; round < rounds; round++) {
			for (const r of rungs) {
				const spec = { url: `http://127.0.0.1:${r.port}/ride/fare-estimate`, connections: 50, headers, body: BODY };
				await load({ ...spec, seconds: 1 });
				const cpu0 = processCpuSeconds(r.proc.child.pid);
				const got = await load({ ...spec, seconds: SECONDS });
				const cpu = processCpuSeconds(r.proc.child.pid) - cpu0;
				if (got.non2xx + got.errors > 0) throw new Error(`${r.name}: ${got.non2xx} non-2xx, ${got.errors} errors`);
				r.rps.push(got.rps);
				r.us.push((cpu * 1e6) / got.total);
				console.log(
					`round ${round + 1} ${r.name.padEnd(28)} ${fmt(got.rps).padStart(7)} req/s ${fmt((cpu * 1e6) / got.total).padStart(5)} µs CPU/request`,
				);
			}
		}
		const bare = rungs[1];
		console.log(`\n| rung | req/s (median) | CPU µs/request (median) | req/s vs bare moleculer-web |\n|---|---|---|---|`);
		for (const r of rungs) console.log(`| ${r.name} | ${fmt(median(r.rps))} | ${fmt(median(r.us))} | ${fmt(median(r.rps) / median(bare.rps), 2)} |`);
	} finally {
		await stopAll(...procs);
		await db.drop();
	}
}

void main().then(
	() => process.exit(0),
	(err: unknown) => {
		console.error(err);
		process.exit(1);
	},
);
