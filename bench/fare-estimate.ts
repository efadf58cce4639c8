/**
 * Fare-estimate benchmark: prints figures, asserts nothing (speed goals live
 * here, not in tests).
 *
 *   npx tsx bench/fare-estimate.ts            # pure math + broker calls
 *   BENCH_HTTP=1 npx tsx bench/fare-estimate.ts   # also through the gateway
 *
 * Uses a throw-away database on the server PostgreSQL (TEST_DATABASE_URL or
 * postgres://postgres@127.0.0.1:5432/test) and one in-process broker.
 */
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { computeFare, type Tariff } from "../services/pricing/fare";
import { encodeQuote, QuoteKeyring, verifyQuote } from "../services/pricing/quote-token";
import { createTestDatabase } from "../test/helpers/db";
import { startTestNode } from "../test/helpers/node";

const PICKUP = { lat: 12.9716, lng: 77.5946 };
const DROP = { lat: 12.9352, lng: 77.6245 };

function percentile(sorted: number[], p: number): number {
	return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function report(label: string, latencies: number[], elapsedMs: number): void {
	const sorted = [...latencies].sort((a, b) => a - b);
	const rate = (latencies.length / elapsedMs) * 1000;
	console.log(
		`${label.padEnd(34)} ${String(latencies.length).padStart(6)} calls  ${rate.toFixed(0).padStart(7)}/s  ` +
			`p50 ${percentile(sorted, 50).toFixed(2)} ms  p95 ${percentile(sorted, 95).toFixed(2)} ms  p99 ${percentile(sorted, 99).toFixed(2)} ms`,
	);
}

async function load(label: string, total: number, concurrency: number, one: () => Promise<unknown>): Promise<void> {
	for (let i = 0; i < Math.min(200, total); i++) await one(); // warm-up
	const latencies: number[] = [];
	let next = 0;
	const started = performance.now();
	await Promise.all(
		Array.from({ length: concurrency }, async () => {
			while (next < total) {
				next++;
				const t0 = performance.now();
				await one();
				latencies.push(performance.now() - t0);
			}
		}),
	);
	report(label, latencies, performance.now() - started);
}

function pureBench(): void {
	const tariff: Tariff = { currency: "INR", baseFarePaise: 5000, perKmPaise: 1400, perMinutePaise: 150, minimumFarePaise: 8000, taxBasisPoints: 500 };
	const keyring = new QuoteKeyring(randomBytes(32).toString("base64url"));
	const n = 100_000;
	let t0 = performance.now();
	for (let i = 0; i < n; i++) computeFare(tariff, 5_000 + (i % 1000), 900 + (i % 300), 10 + (i % 11));
	console.log(`computeFare                        ${((n / (performance.now() - t0)) * 1000).toFixed(0)}/s`);
	const fare = computeFare(tariff, 5234, 960, 12);
	const claims = {
		partnerId: "ptn_bench",
		serviceType: "cab" as const,
		pickup: PICKUP,
		drop: DROP,
		distance: 5234,
		duration: 960,
		fare,
		expiresAt: Date.now() + 300_000,
	};
	t0 = performance.now();
	let token = "";
	for (let i = 0; i < n; i++) token = encodeQuote(claims, keyring);
	console.log(`encodeQuote                        ${((n / (performance.now() - t0)) * 1000).toFixed(0)}/s  (${token.length} chars)`);
	t0 = performance.now();
	const expect = { partnerId: "ptn_bench", serviceType: "cab", pickup: PICKUP, drop: DROP };
	for (let i = 0; i < n; i++) verifyQuote(token, expect, keyring, Date.now());
	console.log(`verifyQuote                        ${((n / (performance.now() - t0)) * 1000).toFixed(0)}/s`);
}

export async function runFareEstimateBench(): Promise<void> {
	pureBench();
	const db = await createTestDatabase("benchfare");
	const apiKey = `rk_bench_${randomBytes(24).toString("base64url")}`;
	const withHttp = process.env.BENCH_HTTP === "1";
	const node = await startTestNode({
		databaseUrl: db.url,
		services: withHttp ? ["partners", "pricing", "gateway"] : ["pricing"],
		env: { BOOTSTRAP_PARTNER_KEY: apiKey, RATE_LIMIT_PER_MINUTE: "0" },
	});
	try {
		const meta = { meta: { partnerId: "ptn_bench" } };
		await load("pricing.estimate (broker, both)", 20_000, 32, () => node.broker.call("pricing.estimate", { pickup: PICKUP, drop: DROP }, meta));
		await load("pricing.estimate (broker, cab)", 20_000, 32, () =>
			node.broker.call("pricing.estimate", { pickup: PICKUP, drop: DROP, serviceType: "cab" }, meta),
		);
		if (withHttp && node.baseUrl) {
			const { default: axios } = await import("axios");
			const { Agent } = await import("node:http");
			const http = axios.create({
				baseURL: node.baseUrl,
				httpAgent: new Agent({ keepAlive: true, maxSockets: 32 }),
				headers: { Authorization: `Bearer ${apiKey}` },
			});
			await load("POST /ride/fare-estimate (HTTP)", 5_000, 32, () => http.post("/ride/fare-estimate", { pickup: PICKUP, drop: DROP }));
		}
	} finally {
		await node.stop();
		await db.drop();
	}
}

if (require.main === module) {
	runFareEstimateBench().then(
		() => process.exit(0),
		(err: unknown) => {
			console.error(err);
			process.exit(1);
		},
	);
}
