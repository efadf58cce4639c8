/**
 * Preloaded into a process under test (`node --import ./bench/lib/probe.mjs dist/bin/server.js`;
 * plain JavaScript so the compiled build runs without a TypeScript loader):
 * counts every query the `pg` client sends (Sequelize's and the services'
 * own) and samples RSS and event-loop delay, writing them as JSON to
 * BENCH_PROBE_FILE every 250 ms. The bench reads deltas; nothing is changed
 * in the services.
 */
import { createRequire } from "node:module";
import { renameSync, writeFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";

const file = process.env.BENCH_PROBE_FILE;
if (file) {
	const req = createRequire(`${process.cwd()}/package.json`);
	const pg = req("pg");
	let queries = 0;
	const original = pg.Client.prototype.query;
	pg.Client.prototype.query = function (...args) {
		queries += 1;
		return original.apply(this, args);
	};
	const eld = monitorEventLoopDelay({ resolution: 10 });
	eld.enable();
	const write = () => {
		const snapshot = {
			at: Date.now(),
			queries,
			// CPU time of the process so far (user + system, µs): CPU per request holds up on a busy machine where req/s does not.
			cpuUs: (() => {
				const c = process.cpuUsage();
				return c.user + c.system;
			})(),
			rss: process.memoryUsage.rss(),
			heapUsed: process.memoryUsage().heapUsed,
			eldMeanMs: eld.mean / 1e6,
			eldP99Ms: eld.percentile(99) / 1e6,
			eldMaxMs: eld.max / 1e6,
		};
		eld.reset();
		try {
			writeFileSync(`${file}.tmp`, JSON.stringify(snapshot));
			renameSync(`${file}.tmp`, file); // never a half-written file
		} catch {
			/* the bench went away */
		}
	};
	setInterval(write, 250).unref();
}
