/**
 * Webhook delivery at a steady rate, one notifications instance in its own
 * process (prints figures, asserts nothing):
 *
 *   npx tsx bench/webhook-rate.ts
 *   BENCH_RATE=500 BENCH_SECONDS=10 BENCH_ORDERS=500 BENCH_BACKLOG=5000 npx tsx bench/webhook-rate.ts
 *   BENCH_CPU_PROF=/tmp/prof npx tsx bench/webhook-rate.ts   # --cpu-prof of the notifications process
 *   BENCH_SERVER=/path/to/other/checkout/bin/server.ts …    # A/B: the notifications process from another tree
 *   BENCH_PG_SAMPLE=1 / BENCH_EXPLAIN=1                     # what the sessions wait on / the claim plan at peak backlog
 *
 * A throw-away database on the server PostgreSQL and NATS. This process runs
 * partners, riders, pricing and orders (to create the rides) and a writer
 * that appends ride_events the way orders does (one transaction per event:
 * bump the order's version, insert the event, commit; then the broker hint
 * orders.rideEventRecorded), spread over many orders. A node:http receiver
 * records when each webhook-id arrives.
 *
 *  1. latency: BENCH_RATE events/s for BENCH_SECONDS, commit → receipt p50/p99;
 *  2. throughput: BENCH_BACKLOG events written as fast as possible, events/s delivered;
 *  3. the floor, same run: a bare axios POST loop (keep-alive agent, same
 *     concurrency, same body size) to the same receiver.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import axios from "axios";
import { Pool } from "pg";
import { newId } from "../lib/ids";
import { CLAIM_SQL } from "../services/notifications/notifications.repo";
import { createTestDatabase, TEST_NATS_URL } from "../test/helpers/db";
import { startTestNode, uniqueNamespace } from "../test/helpers/node";
import { startServiceProcess } from "../test/helpers/processes";
import { createPartner, createRide } from "../test/helpers/webhooks";

const RATE = Number(process.env.BENCH_RATE || 500);
const SECONDS = Number(process.env.BENCH_SECONDS || 10);
const ORDERS = Number(process.env.BENCH_ORDERS || 500);
const BACKLOG = Number(process.env.BENCH_BACKLOG || 5000);
const CONCURRENCY = Number(process.env.WEBHOOK_CONCURRENCY || 64);
const CPU_PROF = process.env.BENCH_CPU_PROF;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

interface Receiver {
	url: string;
	received: Map<string, number>;
	requests: number;
	bodyBytes: number;
	close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
	const r: Receiver = { url: "", received: new Map(), requests: 0, bodyBytes: 0, close: async () => undefined };
	const server = http.createServer((req, res) => {
		let n = 0;
		req.on("data", (c: Buffer) => (n += c.length));
		req.on("end", () => {
			const id = String(req.headers["webhook-id"] ?? "");
			r.requests++;
			r.bodyBytes = n;
			if (id && !r.received.has(id)) r.received.set(id, Date.now());
			res.writeHead(200, { "content-type": "text/plain" }).end("ok");
		});
	});
	server.keepAliveTimeout = 60_000;
	await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
	r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
	r.close = async () => {
		server.closeAllConnections();
		await new Promise<void>((ok) => server.close(() => ok()));
	};
	return r;
}

async function main(): Promise<void> {
	const db = await createTestDatabase("benchwhrate");
	const namespace = uniqueNamespace("whrate");
	const node = await startTestNode({
		databaseUrl: db.url,
		services: ["partners", "riders", "pricing", "orders"],
		nats: { namespace },
		env: { LOGLEVEL: "warn" },
	});
	const receiver = await startReceiver();
	const env = {
		SERVICES: "notifications",
		TRANSPORTER: TEST_NATS_URL,
		NAMESPACE: namespace,
		DATABASE_URL: db.url,
		WEBHOOK_ALLOW_PRIVATE: "true",
		WEBHOOK_CONCURRENCY: String(CONCURRENCY),
		// One partner, one host here: lift the fairness caps to the instance's slots so the figure is the instance's.
		WEBHOOK_PARTNER_CONCURRENCY: process.env.WEBHOOK_PARTNER_CONCURRENCY || String(CONCURRENCY),
		WEBHOOK_HOST_CONCURRENCY: process.env.WEBHOOK_HOST_CONCURRENCY || String(CONCURRENCY),
		FLEET_MODE: "live",
	};
	const args = ["--import", "tsx", ...(CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${CPU_PROF}`] : []), process.env.BENCH_SERVER || "bin/server.ts"];
	const notif = await startServiceProcess("notifications", env, 60_000, args);
	const pool = new Pool({ connectionString: db.url, max: Number(process.env.BENCH_WRITERS || 48) });
	try {
		const partner = await createPartner(node.broker);
		const orders: string[] = [];
		for (let i = 0; i < ORDERS; i += 50) {
			const batch = await Promise.all(Array.from({ length: Math.min(50, ORDERS - i) }, () => createRide(node.broker, partner, `${receiver.url}/hooks`)));
			orders.push(...batch.map((r) => r.orderId));
		}
		await sleep(1000);
		// BENCH_PG_SAMPLE=1: what the database sessions are doing, sampled every 20 ms (no pg_stat_statements needed).
		const samples = new Map<string, number>();
		let sampling = process.env.BENCH_PG_SAMPLE === "1";
		const sampler = (async () => {
			while (sampling) {
				const { rows } = await pool.query(
					"SELECT state, wait_event_type, wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS q FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'",
				);
				for (const r of rows) {
					const k = `${r.state}|${r.wait_event_type ?? ""}:${r.wait_event ?? ""}|${r.q}`;
					samples.set(k, (samples.get(k) ?? 0) + 1);
				}
				await sleep(20);
			}
		})();
		const committed = new Map<string, number>();
		let next = 0;
		const writeOne = async () => {
			const orderId = orders[next++ % orders.length];
			const c = await pool.connect();
			try {
				await c.query("BEGIN");
				const { rows } = await c.query(
					"UPDATE orders SET version = version + 1, updated_at = clock_timestamp() WHERE id = $1 RETURNING version, updated_at, partner_id, webhook_url, metadata",
					[orderId],
				);
				const row = rows[0];
				const eventId = newId("evt");
				const payload = {
					eventId,
					orderId,
					status: "accepted",
					sequence: row.version,
					occurredAt: new Date(row.updated_at).toISOString(),
					metadata: row.metadata,
				};
				await c.query(
					`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at) VALUES ($1, $2, $3, $4, 'status', 'accepted', $5, $6::jsonb, $7)`,
					[eventId, orderId, row.partner_id, row.version, row.webhook_url, JSON.stringify(payload), row.updated_at],
				);
				await c.query("COMMIT");
				committed.set(eventId, Date.now());
				void node.broker.emit("orders.rideEventRecorded", { orderId, eventId, kind: "status" }).catch(() => undefined);
			} finally {
				c.release();
			}
		};
		const waitAll = async (what: string, timeoutMs: number) => {
			const until = Date.now() + timeoutMs;
			while (Date.now() < until) {
				let missing = 0;
				for (const id of committed.keys()) if (!receiver.received.has(id)) missing++;
				if (missing === 0) return;
				await sleep(20);
			}
			throw new Error(`${what}: not everything delivered in ${timeoutMs} ms`);
		};

		// 1. steady rate
		const writes: Promise<void>[] = [];
		const total = RATE * SECONDS;
		const t0 = performance.now();
		for (let i = 0; i < total; i++) {
			const due = t0 + (i * 1000) / RATE;
			const wait = due - performance.now();
			if (wait > 1) await sleep(wait);
			writes.push(writeOne());
		}
		await Promise.all(writes);
		const writeSecs = (performance.now() - t0) / 1000;
		await waitAll("steady", 120_000);
		const lat = [...committed].map(([id, at]) => receiver.received.get(id)! - at).sort((a, b) => a - b);
		console.log(
			`webhook-rate: ${ORDERS} rides, ${total} status events written at ${(total / writeSecs).toFixed(0)}/s (target ${RATE}/s), 1 notifications process, ${CONCURRENCY} slots`,
		);
		console.log(`  commit → receipt: p50 ${pct(lat, 50)} ms  p90 ${pct(lat, 90)} ms  p99 ${pct(lat, 99)} ms  max ${lat[lat.length - 1]} ms`);

		// 2. backlog throughput
		committed.clear();
		const b0 = performance.now();
		const bw: Promise<void>[] = [];
		for (let i = 0; i < BACKLOG; i++) {
			bw.push(writeOne());
			if (bw.length % 64 === 0) await Promise.all(bw.splice(0));
		}
		await Promise.all(bw);
		const bWritten = performance.now();
		if (process.env.BENCH_EXPLAIN === "1") {
			const c = await pool.connect();
			try {
				await c.query("BEGIN");
				// The claim is a function call since migration 003: this shows the call; bench/webhook-claim.ts times the claim itself.
				const plan = await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${CLAIM_SQL}`, [
					64,
					0,
					"00000000-0000-0000-0000-000000000000",
					"explain",
					45000,
					120000,
					64,
					64,
				]);
				console.log(plan.rows.map((r: Record<string, string>) => r["QUERY PLAN"]).join("\n"));
				await c.query("ROLLBACK");
			} finally {
				c.release();
			}
		}
		await waitAll("backlog", 300_000);
		const bSecs = (performance.now() - b0) / 1000;
		const firstRecv = Math.min(...[...committed.keys()].map((id) => receiver.received.get(id)!));
		const lastRecv = Math.max(...[...committed.keys()].map((id) => receiver.received.get(id)!));
		const deliverRate = BACKLOG / ((lastRecv - firstRecv) / 1000);
		console.log(
			`  backlog ${BACKLOG}: written in ${((bWritten - b0) / 1000).toFixed(2)} s, all delivered after ${bSecs.toFixed(2)} s; delivery rate first→last receipt ${deliverRate.toFixed(0)}/s`,
		);

		sampling = false;
		await sampler;
		for (const [k, n] of [...samples].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  pg ${String(n).padStart(5)} ${k}`);
		// 3. floor: bare axios loop, same concurrency and body size
		const body = Buffer.alloc(receiver.bodyBytes || 300, "a");
		const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
		const client = axios.create({ httpAgent: agent, proxy: false, validateStatus: () => true });
		const N = BACKLOG;
		let sent = 0;
		const f0 = performance.now();
		await Promise.all(
			Array.from({ length: CONCURRENCY }, async () => {
				while (sent < N) {
					sent++;
					await client.post(`${receiver.url}/floor`, body, { headers: { "content-type": "application/json", "webhook-id": "" } });
				}
			}),
		);
		const floorRate = N / ((performance.now() - f0) / 1000);
		agent.destroy();
		console.log(`  floor: bare axios POST loop, ${CONCURRENCY} concurrent, ${body.length} B: ${floorRate.toFixed(0)}/s`);
		console.log(`  ratio delivery/floor: ${(deliverRate / floorRate).toFixed(2)}  (goal ≥ 0.3); p99 ${pct(lat, 99)} ms (goal ≤ 100)`);
		console.log(`  duplicates: ${receiver.requests - receiver.received.size - N}`);
	} finally {
		await pool.end();
		await notif.kill("SIGTERM");
		await receiver.close();
		await node.stop();
		await db.drop();
	}
}

main().catch((err: unknown) => {
	console.error(err);
	process.exit(1);
});
