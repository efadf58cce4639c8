/**
 * CPU profile of one platform process under a fare-estimate or create-order
 * load (what docs/BENCHMARKS.md's "where the time goes" is read from):
 *
 *   npx tsx bench/profile.ts fare|orders [seconds]   → prints the top self-time
 *   functions and writes the .cpuprofile (open it in Chrome DevTools).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { createTestDatabase } from "../test/helpers/db";
import { freePort } from "../test/helpers/http";
import { apiKey, load, startPlatformProcess, stopAll } from "./lib/common";
import { orderBody } from "./paths/create-order";

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount: number; children?: number[] }

function summarise(file: string, top = 40): void {
	const prof = JSON.parse(readFileSync(file, "utf8")) as { nodes: Node[]; samples: number[] };
	const total = prof.samples.length;
	const byFn = new Map<string, number>();
	const byFile = new Map<string, number>();
	for (const n of prof.nodes) {
		const url = n.callFrame.url.replace(/^file:\/\//, "").replace(/.*node_modules\//, "nm:").replace(/.*\/work\/[^/]+\//, "");
		const key = `${n.callFrame.functionName || "(anon)"} ${url}:${n.callFrame.lineNumber + 1}`;
		byFn.set(key, (byFn.get(key) ?? 0) + n.hitCount);
		const f = url.startsWith("nm:") ? url.split("/").slice(0, url.startsWith("nm:@") ? 2 : 1).join("/") : url || n.callFrame.functionName;
		byFile.set(f, (byFile.get(f) ?? 0) + n.hitCount);
	}
	const show = (m: Map<string, number>, k: number) =>
		[...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, k).forEach(([name, hits]) => console.log(`${((hits / total) * 100).toFixed(1).padStart(5)}%  ${name}`));
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
	const platform = await startPlatformProcess("platform", {
		DATABASE_URL: db.url,
		PORT: String(port),
		BOOTSTRAP_PARTNER_KEY: key,
		FLEET_MODE: process.env.FLEET_MODE ?? (what === "fare" ? "simulated" : "live"),
		NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${dir}`,
	});
	try {
		const headers = { authorization: `Bearer ${key}` };
		const pickup = { lat: 12.9716, lng: 77.5946 };
		const drop = { lat: 12.9352, lng: 77.6245 };
		const url = `http://127.0.0.1:${port}/ride/${what === "fare" ? "fare-estimate" : "create-order"}`;
		const body = JSON.stringify({ pickup, drop });
		const bodyFn = orderBody;
		await load({ url, connections: what === "fare" ? 50 : 32, seconds: 2, headers, body, bodyFn: what === "fare" ? undefined : bodyFn });
		const r = await load({ url, connections: what === "fare" ? 50 : 32, seconds, headers, body, bodyFn: what === "fare" ? undefined : bodyFn });
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

void main().then(
	() => process.exit(0),
	(err: unknown) => {
		console.error(err);
		process.exit(1);
	},
);
