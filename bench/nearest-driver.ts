/**
 * Nearest-driver benchmark: prints figures, asserts nothing (speed goals live
 * here, not in tests).
 *
 *   npx tsx bench/nearest-driver.ts               # the H3 index alone, 1k / 10k / 100k drivers
 *   BENCH_BROKER=1 npx tsx bench/nearest-driver.ts  # also dispatch.supplyDemand through a broker
 *                                                  # with 100k drivers in PostgreSQL (index rebuilt at start)
 *
 * Drivers are spread over three metro areas (15 km around Bengaluru, Delhi,
 * Mumbai); queries are random points in the same areas. "nearest 5" is what
 * matching asks (candidates within the 5 km search radius), "nearest 1" is
 * the eta of supplyDemand, "count 3 km" is its available-driver count. A
 * linear scan of all drivers is printed beside it for scale.
 */
import { performance } from "node:perf_hooks";
import { haversineMeters } from "../lib/geo";
import type { Point } from "../contracts/common";
import { DEFAULT_CITIES } from "../lib/settings";
import { CellIndex } from "../services/dispatch/spatial-index";
import { pointInDisk, seededRandom } from "../services/fleet/simulation";
import { connect, createTestDatabase } from "../test/helpers/db";
import { startTestNode, type TestNode } from "../test/helpers/node";

const METRO_RADIUS_M = 15_000;
const SEARCH_RADIUS_M = 5000;
const SUPPLY_RADIUS_M = 3000;

function percentile(sorted: number[], p: number): number {
	return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function measure(label: string, queries: Point[], one: (q: Point) => unknown): void {
	for (let i = 0; i < Math.min(200, queries.length); i++) one(queries[i]); // warm-up
	const latencies: number[] = [];
	for (const q of queries) {
		const t0 = performance.now();
		one(q);
		latencies.push(performance.now() - t0);
	}
	latencies.sort((a, b) => a - b);
	console.log(
		`  ${label.padEnd(22)} ${String(queries.length).padStart(6)} lookups  p50 ${(percentile(latencies, 50) * 1000).toFixed(1).padStart(8)} µs  ` +
			`p99 ${(percentile(latencies, 99) * 1000).toFixed(1).padStart(8)} µs`,
	);
}

function randomPoints(n: number, seed: string): Point[] {
	const rand = seededRandom(seed);
	return Array.from({ length: n }, (_, i) => pointInDisk(DEFAULT_CITIES[i % DEFAULT_CITIES.length], METRO_RADIUS_M, rand));
}

function indexBench(drivers: number): void {
	const points = randomPoints(drivers, `drivers-${drivers}`);
	const index = new CellIndex<null>(8);
	const t0 = performance.now();
	points.forEach((p, i) => index.upsert(`drv_${i}`, p, null));
	const buildMs = performance.now() - t0;
	const queries = randomPoints(5000, `queries-${drivers}`);
	console.log(`${drivers.toLocaleString("en")} drivers (index built in ${buildMs.toFixed(0)} ms)`);
	measure("nearest 5 (matching)", queries, (q) => index.nearest(q, { limit: 5, radiusM: SEARCH_RADIUS_M }));
	measure("nearest 1 (eta)", queries, (q) => index.nearest(q, { limit: 1, radiusM: SEARCH_RADIUS_M }));
	measure("count 3 km (supply)", queries.slice(0, 2000), (q) => index.countWithin(q, SUPPLY_RADIUS_M));
	measure("linear scan nearest 1", queries.slice(0, drivers >= 100_000 ? 300 : 2000), (q) => {
		let best = Infinity;
		for (const p of points) {
			const d = haversineMeters(q, p);
			if (d < best) best = d;
		}
		return best;
	});
	// Moving drivers: what a location update costs the index.
	const moves = randomPoints(20_000, `moves-${drivers}`);
	const t1 = performance.now();
	moves.forEach((p, i) => index.upsert(`drv_${i % drivers}`, p, null));
	console.log(
		`  ${"location update".padEnd(22)} ${String(moves.length).padStart(6)} updates  ${(((performance.now() - t1) / moves.length) * 1000).toFixed(1).padStart(8)} µs each`,
	);
}

async function brokerBench(drivers: number): Promise<void> {
	const db = await createTestDatabase("benchdispatch");
	let node: TestNode | undefined;
	try {
		// Create the tables, then load the drivers in one statement.
		node = await startTestNode({ databaseUrl: db.url, services: ["dispatch"] });
		await node.stop();
		const pg = await connect(db.url);
		pg.on("error", () => undefined);
		const points = randomPoints(drivers, "broker-drivers");
		const lat = points.map((p) => p.lat);
		const lng = points.map((p) => p.lng);
		await pg.query(
			`INSERT INTO drivers (id, name, phone, vehicle_number, service_type, status, lat, lng, heading, location_at)
			 SELECT 'drv_bench' || i, 'Bench ' || i, '+9160' || lpad(i::text, 8, '0'), 'BENCH' || i,
			        CASE WHEN i % 2 = 0 THEN 'cab' ELSE 'scooty' END, 'available', ($1::float8[])[i], ($2::float8[])[i], 0, now()
			 FROM generate_series(1, $3::int) AS i`,
			[lat, lng, drivers],
		);
		await pg.end();
		const t0 = performance.now();
		node = await startTestNode({ databaseUrl: db.url, services: ["dispatch"] });
		console.log(
			`dispatch started with ${drivers.toLocaleString("en")} drivers in ${(performance.now() - t0).toFixed(0)} ms (index rebuilt from PostgreSQL)`,
		);
		const queries = randomPoints(3000, "broker-queries");
		const latencies: number[] = [];
		for (const q of queries) {
			const t1 = performance.now();
			await node.broker.call("dispatch.supplyDemand", { point: q });
			latencies.push(performance.now() - t1);
		}
		latencies.sort((a, b) => a - b);
		console.log(`  dispatch.supplyDemand (broker call)  p50 ${percentile(latencies, 50).toFixed(2)} ms  p99 ${percentile(latencies, 99).toFixed(2)} ms`);
	} finally {
		await node?.stop();
		await db.drop();
	}
}

async function main(): Promise<void> {
	for (const n of [1_000, 10_000, 100_000]) indexBench(n);
	if (process.env.BENCH_BROKER) await brokerBench(100_000);
}

main().then(
	() => process.exit(0),
	(err: unknown) => {
		console.error(err);
		process.exit(1);
	},
);
