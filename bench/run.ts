/**
 * `npm run bench [-- --smoke] [-- --soak-minutes N] [-- <path>…]`: every
 * comparison of issues 9 and 26 with its floor measured in the same run
 * (docs/BENCHMARKS.md, "Method": alternating rounds, pinned cores, wrk and an
 * open-loop generator), one table (path, figure, floor, ratio, goal, met?),
 * then the goal rows alone with met / unmet.
 *
 *   --smoke          every path for a few seconds, one round (CI): no assertion on speed, exit 1 only if a path crashed
 *   --soak-minutes N the soak's length per database (default 30); the soak runs with `soak` named,
 *                    BENCH_SOAK=1, or in a smoke (a quarter of a minute)
 *   names            only these paths: fare, orders, latency, reads, background, webhooks, fleet, retention, soak
 *   BENCH_SECONDS    seconds per load measurement (default 10, smoke 1)
 *   BENCH_ROUNDS     alternating rounds per ratio (default 5, smoke 1)
 *   BENCH_KEYS       partner keys for fare and create-order (default 1,000, smoke 20)
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
import { latency } from "./paths/latency";
import { reads } from "./paths/reads";
import { dropPreparedDatabases } from "./lib/platform";
import { soak } from "./paths/soak";
import { fleet } from "./paths/fleet";
import { retention } from "./paths/retention";

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const soakAt = args.indexOf("--soak-minutes");
const soakMinutes = soakAt >= 0 ? Number(args[soakAt + 1]) : undefined;
if (soakMinutes !== undefined && !(soakMinutes > 0)) throw new Error("--soak-minutes needs a number of minutes above 0");
const names = args.filter((a, i) => !a.startsWith("--") && !(soakAt >= 0 && i === soakAt + 1));
const wantSoak = smoke || names.includes("soak") || process.env.BENCH_SOAK === "1";
if (smoke && !process.env.BENCH_FLOORS_RUNTIME) process.env.BENCH_FLOORS_RUNTIME = "tsx";
const opts: BenchOptions = { smoke, seconds: Number(process.env.BENCH_SECONDS || (smoke ? 1 : 10)), soakMinutes };

const paths: Array<{ name: string; label: string; run: (o: BenchOptions) => Promise<Row[]> }> = [
	{ name: "fare", label: "fare-estimate", run: fareEstimate },
	{ name: "orders", label: "create-order", run: createOrder },
	{ name: "latency", label: "partner-visible latency", run: latency },
	{ name: "reads", label: "read paths", run: reads },
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
	// The goals alone: each with its figure and whether it was met.
	const goals = rows.filter((r) => r.goal !== "–" && r.goal !== "");
	console.log(`\nGoals (${goals.filter((r) => r.met === true).length} met of ${goals.length}):\n\n| goal row | result | goal | met? |\n|---|---|---|---|`);
	for (const r of goals) {
		const result = r.ratio !== "–" && !/ms$/.test(r.goal) ? r.ratio : r.figure;
		console.log(`| ${r.path} | ${result} | ${r.goal} | ${r.met === undefined ? "not measured" : r.met ? "met" : "unmet"} |`);
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
				goal: "RSS ≤ 0.5 MB/min, heap ≈ 0",
				note: "the soak runs with `npm run bench -- soak [--soak-minutes N]` or BENCH_SOAK=1",
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
	await dropPreparedDatabases().catch((err: unknown) => console.error(`could not drop the prepared databases: ${(err as Error).message}`));
	await autovacuum.restore().catch((err: unknown) => console.error(`could not put autovacuum back: ${(err as Error).message}`));
	printTable(rows);
	console.log(`\nbench done in ${((Date.now() - started) / 1000).toFixed(0)} s${crashed ? `, ${crashed} path(s) crashed` : ""}`);
	process.exit(crashed === 0 ? 0 : 1);
}

void main();
