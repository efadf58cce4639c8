/**
 * Webhook delivery benchmark: prints figures, asserts nothing (speed goals
 * live here, not in tests).
 *
 *   npx tsx bench/webhook-delivery.ts
 *   BENCH_RIDES=200 BENCH_EVENTS_PER_RIDE=10 WEBHOOK_CONCURRENCY=64 npx tsx bench/webhook-delivery.ts
 *
 * Real rides through orders (one in-process broker with partners, riders,
 * pricing, orders and notifications) on a throw-away database on the server
 * PostgreSQL, delivered to a local partner endpoint that verifies every
 * signature. Reports delivery throughput and end-to-end latency (event
 * occurred → endpoint received).
 */
import { performance } from "node:perf_hooks";
import { createTestDatabase } from "../test/helpers/db";
import { startTestNode } from "../test/helpers/node";
import { createPartner, createRide, move, startPartnerEndpoint, waitFor, type TestRide } from "../test/helpers/webhooks";

const RIDES = Number(process.env.BENCH_RIDES || 100);
const EVENTS_PER_RIDE = Math.max(4, Number(process.env.BENCH_EVENTS_PER_RIDE || 10));

function percentile(sorted: number[], p: number): number {
	return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function main(): Promise<void> {
	const db = await createTestDatabase("benchwh");
	const node = await startTestNode({
		databaseUrl: db.url,
		services: ["partners", "riders", "pricing", "orders", "notifications"],
		env: { WEBHOOK_ALLOW_PRIVATE: "true", LOGLEVEL: "warn" },
	});
	const partner = await createPartner(node.broker);
	const endpoint = await startPartnerEndpoint(partner.webhookSecret);
	try {
		const rides: TestRide[] = [];
		for (let i = 0; i < RIDES; i++) rides.push(await createRide(node.broker, partner, `${endpoint.url}/bench`));
		const total = RIDES * EVENTS_PER_RIDE;
		const started = performance.now();
		// accepted / back to searching (no event) pairs, then arrived, started, dropped.
		await Promise.all(
			rides.map(async (ride) => {
				for (let i = 0; i < EVENTS_PER_RIDE - 3; i++) {
					await move(node.broker, ride, "accepted");
					if (i < EVENTS_PER_RIDE - 4) await move(node.broker, ride, "searching");
				}
				for (const to of ["arrived", "started", "dropped"] as const) await move(node.broker, ride, to);
			}),
		);
		const written = performance.now();
		await waitFor("every event", () => endpoint.delivered().length >= total, 300_000, 20);
		const done = performance.now();

		const latencies = endpoint
			.delivered()
			.map((h) => h.receivedAt - Date.parse(String(h.body.occurredAt)))
			.sort((a, b) => a - b);
		const seconds = (done - started) / 1000;
		console.log(`webhook delivery: ${RIDES} rides × ${EVENTS_PER_RIDE} events = ${total} events, 1 notifications instance`);
		console.log(
			`  ride changes written in ${((written - started) / 1000).toFixed(2)} s (${(total / ((written - started) / 1000)).toFixed(0)} events/s through orders)`,
		);
		console.log(`  all delivered after ${seconds.toFixed(2)} s: ${(total / seconds).toFixed(0)} events/s end to end`);
		console.log(
			`  latency occurred → received: p50 ${percentile(latencies, 50)} ms  p95 ${percentile(latencies, 95)} ms  p99 ${percentile(latencies, 99)} ms  max ${latencies[latencies.length - 1]} ms`,
		);
		console.log(
			`  requests ${endpoint.received.length} (duplicates ${endpoint.received.length - total}), bad signatures ${endpoint.received.filter((h) => !h.signatureValid).length}`,
		);
	} finally {
		await endpoint.close();
		await node.stop();
		await db.drop();
	}
}

main().catch((err: unknown) => {
	console.error(err);
	process.exit(1);
});
