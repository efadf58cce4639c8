/**
 * `npm run bench [-- --smoke] [-- soak] [-- <path>…]`: runs each comparison of
 * issue 9 with its floor measured in the same run, back to back, and prints
 * one table (path, figure, floor, ratio, goal, met?). Servers under test run
 * in child processes; autocannon (the load generator) runs here.
 *
 *   --smoke   every path for a few seconds (CI): no assertion on speed, exit 1 only if a path crashed
 *   soak      also the memory/soak path (BENCH_SOAK_MS, default 10 min; BENCH_SOAK_DB=embedded|server for one database); or BENCH_SOAK=1
 *   names     only these paths: fare, orders, background, webhooks, fleet, retention, soak
 *   BENCH_SECONDS  seconds per load measurement (default 10, smoke 1)
 *
 * The platform expects autovacuum on the server PostgreSQL: when it is off
 * the run turns it on (ALTER SYSTEM, superuser) and puts it back at the end.
 *
 * The older micro-benchmarks run on their own: `npx tsx bench/nearest-driver.ts`,
 * `bench/fare-estimate.ts`, `bench/webhook-delivery.ts`.
 */
import { availableParallelism, totalmem } from "node:os";
import { benchRuntime, fmt, type BenchOptions, type Row } from "./lib/common";
import { autovacuumOnForRun } from "../test/helpers/db";
import { fareEstimate } from "./paths/fare-estimate";
import { createOrder } from "./paths/create-order";
import { background } from "./paths/background";
import { webhooks } from "./paths/webhooks";
import { soak } from "./paths/soak";
import { fleet } from "./paths/fleet";
import { retention } from "./paths/retention";

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const names = args.filter((a) => !a.startsWith("--"));
const wantSoak = !smoke && (names.includes("soak") || process.env.BENCH_SOAK === "1");
const opts: BenchOptions = { smoke, seconds: Number(process.env.BENCH_SECONDS || (smoke ? 1 : 10)) };

const paths: Array<{ name: string; label: string; run: (o: BenchOptions) => Promise<Row[]> }> = [
	{ name: "fare", label: "fare-estimate", run: fareEstimate },
	{ name: "orders", label: "create-order", run: createOrder },
	{ name: "background", label: "background work", run: background },
	{ name: "webhooks", label: "webhooks", run: webhooks },
	{ name: "fleet", label: "driver fleet", run: fleet },
	{ name: "retention", label: "retention", run: retention },
	{ name: "soak", label: "memory/soak", run: soak },
];

function printTable(rows: Row[]): void {
	const head = ["path", "figure", "floor", "ratio", "goal", "met?"];
	const cells = rows.map((r) => [r.path, r.figure, r.floor, r.ratio, r.goal, r.met === undefined ? "–" : r.met ? "yes" : "no"]);
	console.log(`\n| ${head.join(" | ")} |\n|${head.map(() => "---").join("|")}|`);
	for (const c of cells) console.log(`| ${c.join(" | ")} |`);
	const notes = rows.filter((r) => r.note);
	if (notes.length) {
		console.log("");
		for (const r of notes) console.log(`- ${r.path}: ${r.note}`);
	}
}

async function main(): Promise<void> {
	const started = Date.now();
	console.log(
		`bench${smoke ? " (smoke)" : ""}: ${availableParallelism()} cores, ${fmt(totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}, ${new Date().toISOString()}, ${opts.seconds} s per load, platform: ${benchRuntime()}`,
	);
	const autovacuum = await autovacuumOnForRun();
	console.log(`PostgreSQL: ${autovacuum.note}`);
	const rows: Row[] = [];
	let crashed = 0;
	const selected = paths.filter((p) => {
		if (p.name === "soak" && !wantSoak) {
			rows.push({
				path: p.label,
				figure: "skipped",
				floor: "–",
				ratio: "–",
				goal: "flat ±10%",
				note: "soak runs with `npm run bench -- soak` or BENCH_SOAK=1",
			});
			return false;
		}
		return names.length === 0 || names.includes(p.name);
	});
	const runOne = async (p: (typeof paths)[number]): Promise<Row[]> => {
		const t0 = Date.now();
		console.log(`\n=== ${p.label}`);
		try {
			const got = await p.run(opts);
			for (const r of got) console.log(`  ${r.path}: ${r.figure} | ${r.floor} | ratio ${r.ratio} | goal ${r.goal}${r.note ? ` | ${r.note}` : ""}`);
			return got;
		} catch (err) {
			crashed += 1;
			console.error(`  ${p.label} crashed:`, err);
			return [
				{ path: p.label, figure: "CRASHED", floor: "–", ratio: "–", goal: "–", met: false, note: String((err as Error).message ?? err).split("\n")[0] },
			];
		} finally {
			console.log(`  (${p.label}: ${((Date.now() - t0) / 1000).toFixed(0)} s)`);
		}
	};
	// One path at a time, also in a smoke: side by side they only slowed each other down on 2 cores.
	const results: Row[][] = [];
	for (const p of selected) results.push(await runOne(p));
	rows.unshift(...results.flat());
	await autovacuum.restore().catch((err: unknown) => console.error(`could not put autovacuum back: ${(err as Error).message}`));
	printTable(rows);
	console.log(`\nbench done in ${((Date.now() - started) / 1000).toFixed(0)} s${crashed ? `, ${crashed} path(s) crashed` : ""}`);
	process.exit(crashed === 0 ? 0 : 1);
}

void main();
