/**
 * CPU profile of one platform process under a fare-estimate or create-order
 * load (docs/BENCHMARKS.md, "Other tools"):
 *
 *   npx tsx bench/profile.ts fare|orders [seconds]   → prints the top self-time
 *   functions and writes the .cpuprofile (open it in Chrome DevTools).
 *   npx tsx bench/profile.ts rung:raw|rung:bare|rung:contract|rung:config|rung:gateway|rung:full [seconds]
 *                                  → the same for one rung of bench/fare-ladder.ts
 *                                    under the fare load (every rung under tsx,
 *                                    rung:full too), so two rungs' profiles can be
 *                                    set side by side.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { createTestDatabase } from "../test/helpers/db";
import { freePort } from "../test/helpers/http";
import { apiKey, fareAnswerFile, load, startHelper, startPlatformProcess, stopAll } from "./lib/common";
import { orderBody } from "./paths/create-order";
import type { ServiceProcess } from "../test/helpers/processes";

interface Node {
	id: number;
	callFrame: { functionName: string; url: string; lineNumber: number };
	hitCount: number;
	children?: number[];
}

function summarise(file: string, top = 40): void {
	const prof = JSON.parse(readFileSync(file, "utf8")) as { nodes: Node[]; samples: number[] };
	const total = prof.samples.length;
	const byFn = new Map<string, number>();
	const byFile = new Map<string, number>();
	for (const n of prof.nodes) {
		const url = n.callFrame.url
			.replace(/^file:\/\//, "")
			.replace(/.*node_modules\//, "nm:")
			.replace(/.*\/work\/[^/]+\//, "");
		const key = `${n.callFrame.functionName || "(anon)"} ${url}:${n.callFrame.lineNumber + 1}`;
		byFn.set(key, (byFn.get(key) ?? 0) + n.hitCount);
		const f = url.startsWith("nm:")
			? url
					.split("/")
					.slice(0, url.startsWith("nm:@") ? 2 : 1)
					.join("/")
			: url || n.callFrame.functionName;
		byFile.set(f, (byFile.get(f) ?? 0) + n.hitCount);
	}
	const show = (m: Map<string, number>, k: number) =>
		[...m.entries()]
			.sort((a, b) => b[1] - a[1])
			.slice(0, k)
			.forEach(([name, hits]) => console.log(`${((hits / total) * 100).toFixed(1).padStart(5)}%  ${name}`));
	console.log(`--- self time by function (${total} samples)`);
	show(byFn, top);
	console.log("--- self time by file/package");
	show(byFile, 30);
}

async function main(): Promise<void> {
	const what = process.argv[2] ?? "fare";
	const seconds = Number(process.argv[3] ?? 10);
	const dir = mkdtempSync(join(tmpdir(), "cpuprof-"));
	const db = await createTestDatabase("benchprof");
	const key = apiKey();
	const port = await freePort();
	const profiled = `--cpu-prof --cpu-prof-dir=${dir}`;
	const env = {
		DATABASE_URL: db.url,
		PORT: String(port),
		BOOTSTRAP_PARTNER_KEY: key,
		FLEET_MODE: process.env.FLEET_MODE ?? (what === "orders" ? "live" : "simulated"),
	};
	const headers = { authorization: `Bearer ${key}` };
	const pickup = { lat: 12.9716, lng: 77.5946 };
	const drop = { lat: 12.9352, lng: 77.6245 };
	const body = JSON.stringify({ pickup, drop });
	const platform = what.startsWith("rung:")
		? await startRung(what.slice(5), { ...env, NODE_OPTIONS: profiled }, headers, body)
		: await startPlatformProcess("platform", { ...env, NODE_OPTIONS: profiled });
	try {
		const url = `http://127.0.0.1:${port}/ride/${what === "orders" ? "create-order" : "fare-estimate"}`;
		const bodyFn = orderBody;
		const orders = what === "orders";
		await load({ url, connections: orders ? 32 : 50, seconds: 2, headers, body, bodyFn: orders ? bodyFn : undefined });
		const r = await load({ url, connections: orders ? 32 : 50, seconds, headers, body, bodyFn: orders ? bodyFn : undefined });
		console.log(`${what}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, non-2xx ${r.non2xx}, errors ${r.errors}`);
	} finally {
		await stopAll(platform.proc);
		await db.drop();
	}
	const files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"));
	for (const f of files) {
		console.log(`profile: ${join(dir, f)}`);
		summarise(join(dir, f));
	}
}

/**
 * One rung of the fare ladder on env.PORT, answering what the full platform
 * answers (a platform without profiling is started once for that answer).
 */
async function startRung(rung: string, env: Record<string, string>, headers: Record<string, string>, body: string): Promise<{ proc: ServiceProcess }> {
	const quiet = {
		...env,
		NODE_ENV: "test",
		LOGLEVEL: "warn",
		METRICS_PORT: "0",
		HEALTH_PORT: "",
		RATE_LIMIT_PER_MINUTE: "0",
		AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
	};
	if (rung === "full") return startHelper("ladder-web.ts", { ...quiet, LADDER: "full" });
	const full = await startHelper("ladder-web.ts", { ...quiet, PORT: "0", NODE_OPTIONS: "", LADDER: "full" });
	let bodyFile: string;
	try {
		bodyFile = (await fareAnswerFile(`http://127.0.0.1:${full.port}/ride/fare-estimate`, headers, body)).file;
	} finally {
		await stopAll(full.proc);
	}
	if (rung === "raw") return startHelper("raw-http.ts", { ...quiet, BENCH_BODY_FILE: bodyFile });
	if (rung === "bare") return startHelper("bare-web.ts", { ...quiet, BENCH_BODY_FILE: bodyFile });
	return startHelper("ladder-web.ts", { ...quiet, BENCH_BODY_FILE: bodyFile, LADDER: rung });
}

void main().then(
	() => process.exit(0),
	(err: unknown) => {
		console.error(err);
		process.exit(1);
	},
);
