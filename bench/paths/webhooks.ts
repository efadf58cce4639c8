/**
 * Path 5: webhooks through ONE notifications instance (its own process, over
 * NATS) to a partner endpoint in this process that verifies every signature.
 *
 * How ride events are made: orders in one process on 2 cores could not offer
 * 500 events/s (the old generator, two orders.transition calls per ride,
 * paced at most 186 pairs/s with every one of 300 rides busy), so this
 * process writes the outbox rows as orders does (orders.repo.ts applyMove):
 * one transaction per event holding the conditional `UPDATE orders …
 * version = version + 1` and the `INSERT INTO ride_events` of the body built
 * by orders' own buildEventPayload, then, after the commit, the
 * `orders.rideEventRecorded` hint on the bus. The two are one statement
 * (a data-modifying WITH) instead of orders' BEGIN/UPDATE/INSERT/COMMIT, and
 * occurredAt comes from this process's clock, so that the generator's own
 * round trips do not take the cores the measured path needs (with four round
 * trips per event, the writer sessions sat "idle in transaction" waiting for
 * this process). Same rows, same atomicity. Rides are real (orders.create),
 * toggled accepted ⇄ searching; a ride has at most one write in flight (as
 * with a real driver).
 *
 *   1. throughput: BACKLOG events are written while notifications is not
 *      running; then it is started and the drain rate is timed from the first
 *      to the last receipt. Floor, same run: a bare axios keep-alive POST loop
 *      with the same concurrency (WEBHOOK_CONCURRENCY, 64) to the same endpoint,
 *      signed bodies of the same size.
 *   2. latency: events offered at RATE/s (open loop: event i is due at
 *      t0 + i/RATE whatever happened before) for BENCH_SECONDS; commit (the
 *      writer's COMMIT answered) → receipt at the endpoint, both on this
 *      process's clock, p50/p99; the ride's occurredAt → receipt as a note.
 *
 * One partner and one host here, so the per-partner and per-host caps are
 * lifted to the instance's slots (else 16 of the 64 slots would be usable and
 * the figure would be the cap's, not the instance's).
 *
 * BENCH_WEBHOOK_RATE (500), BENCH_WEBHOOK_BACKLOG (5000), BENCH_WEBHOOK_RIDES (500),
 * BENCH_PG_SAMPLE=1 (what the database sessions wait on during the latency run),
 * BENCH_WEBHOOK_TRACE=1 (latency per 250 ms of commits: steady, or stalls?),
 * BENCH_CPU_PROF=<dir> (a CPU profile of the notifications process).
 */
import { Agent } from "node:http";
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import axios from "axios";
import { Pool } from "pg";
import { Webhook } from "standardwebhooks";
import { newId } from "../../lib/ids";
import { buildEventPayload } from "../../services/orders/order-view";
import { createTestDatabase, TEST_NATS_URL } from "../../test/helpers/db";
import { startTestNode, uniqueNamespace } from "../../test/helpers/node";
import { createPartner, createRide, orderViolations, startPartnerEndpoint, type PartnerEndpoint } from "../../test/helpers/webhooks";
import { fmt, freshProbe, machineJiffies, pct, processCpuSeconds, sleep, startPlatformProcess, stopAll, type BenchOptions, type Row } from "../lib/common";

const RATE = Number(process.env.BENCH_WEBHOOK_RATE || 500);
const CONCURRENCY = Number(process.env.WEBHOOK_CONCURRENCY || 64);
/** Writer connections: enough that 500 one-event transactions a second never queue behind each other. */
const WRITERS = 16;

const DRIVER = { id: "drv_bench1", name: "Ravi Kumar", phone: "+919800000001", vehicleNumber: "KA01AB1234" };
const DRIVER_LOCATION = { lat: 12.975, lng: 77.59, heading: 45 };

interface Ride {
	orderId: string;
	status: "searching" | "accepted";
	/** The order's version now (the next event's sequence is one more). */
	version: number;
	metadata: Record<string, unknown> | null;
	busy: boolean;
}

/** First 2xx receipt time per event id, read incrementally from the endpoint's log. */
class Receipts {
	private cursor = 0;
	readonly at = new Map<string, number>();
	constructor(private readonly endpoint: PartnerEndpoint) {}
	update(): void {
		const r = this.endpoint.received;
		for (; this.cursor < r.length; this.cursor++) {
			const h = r[this.cursor];
			// Answered is set synchronously for the default behaviour (200 at once).
			if (h.answered >= 200 && h.answered < 300 && !this.at.has(h.eventId)) this.at.set(h.eventId, h.receivedAt);
		}
	}
	async waitAll(ids: Iterable<string>, what: string, timeoutMs: number): Promise<void> {
		const list = [...ids];
		const until = Date.now() + timeoutMs;
		for (;;) {
			this.update();
			const missing = list.filter((id) => !this.at.has(id)).length;
			if (missing === 0) return;
			if (Date.now() > until) throw new Error(`${what}: ${missing} of ${list.length} events not delivered in ${timeoutMs} ms`);
			await sleep(10);
		}
	}
}

export async function webhooks(opts: BenchOptions): Promise<Row[]> {
	const db = await createTestDatabase("benchwh");
	const ns = uniqueNamespace("benchwh");
	let notif: Awaited<ReturnType<typeof startPlatformProcess>> | undefined;
	const node = await startTestNode({
		databaseUrl: db.url,
		services: ["partners", "riders", "pricing", "orders"],
		nats: { namespace: ns },
		env: { LOGLEVEL: "warn" },
	});
	const pool = new Pool({ connectionString: db.url, max: WRITERS });
	try {
		const partner = await createPartner(node.broker);
		const endpoint = await startPartnerEndpoint(partner.webhookSecret);
		const receipts = new Receipts(endpoint);
		try {
			const url = `${endpoint.url}/bench`;
			const RIDES = opts.smoke ? 20 : Number(process.env.BENCH_WEBHOOK_RIDES || 500);
			const rides: Ride[] = [];
			for (let i = 0; i < RIDES; i += 25) {
				const batch = await Promise.all(Array.from({ length: Math.min(25, RIDES - i) }, () => createRide(node.broker, partner, url)));
				rides.push(...batch.map((r) => ({ orderId: r.orderId, status: "searching" as const, version: 0, metadata: null, busy: false })));
			}
			const current = await pool.query<{ id: string; version: number; metadata: Record<string, unknown> | null }>(
				"SELECT id, version, metadata FROM orders WHERE id = ANY($1)",
				[rides.map((r) => r.orderId)],
			);
			const byId = new Map(current.rows.map((r) => [r.id, r]));
			for (const ride of rides) Object.assign(ride, { version: byId.get(ride.orderId)!.version, metadata: byId.get(ride.orderId)!.metadata });

			let hints = true;
			/** One ride event as orders.repo.ts applyMove writes it (one transaction, here one statement); resolves with its id and commit time. */
			const writeEvent = async (ride: Ride): Promise<{ eventId: string; committedAt: number; occurredAt: number }> => {
				const to = ride.status === "searching" ? "accepted" : "searching";
				const eventId = newId("evt");
				const sequence = ride.version + 1;
				const occurredAt = new Date();
				const driver = to === "accepted" ? DRIVER : null;
				const driverLocation = to === "accepted" ? DRIVER_LOCATION : null;
				const eta = to === "accepted" ? 240 : null;
				const payload = buildEventPayload({
					eventId,
					row: { id: ride.orderId, driver, driver_location: driverLocation, eta, metadata: ride.metadata } as unknown as Parameters<
						typeof buildEventPayload
					>[0]["row"],
					status: to,
					sequence,
					occurredAt,
				});
				const r = await pool.query(
					`WITH u AS (
					   UPDATE orders SET status = $3, updated_at = $4, version = version + 1, driver = $5::jsonb, driver_location = $6::jsonb, eta = $7
					   WHERE id = $1 AND status = $2 AND version = $8 RETURNING id, partner_id, webhook_url)
					 INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
					 SELECT $9, u.id, u.partner_id, $8 + 1, 'status', $3, u.webhook_url, $10::jsonb, $4 FROM u`,
					[
						ride.orderId,
						ride.status,
						to,
						occurredAt,
						driver && JSON.stringify(driver),
						driverLocation && JSON.stringify(driverLocation),
						eta,
						ride.version,
						eventId,
						JSON.stringify(payload),
					],
				);
				if (r.rowCount !== 1) throw new Error(`ride ${ride.orderId} was not ${ride.status} at version ${ride.version}`);
				const committedAt = Date.now();
				ride.status = to;
				ride.version = sequence;
				// After the commit, as orders does: only a hint, the table is the truth.
				if (hints) void node.broker.emit("orders.rideEventRecorded", { orderId: ride.orderId, eventId, kind: "status" }).catch(() => undefined);
				return { eventId, committedAt, occurredAt: occurredAt.getTime() };
			};
			let cursor = 0;
			const nextFreeRide = (): Ride | undefined => {
				for (let k = 0; k < rides.length; k++) {
					const ride = rides[cursor++ % rides.length];
					if (!ride.busy) return ride;
				}
				return undefined;
			};
			const writeOnFreeRide = async () => {
				const ride = nextFreeRide();
				if (!ride) return undefined;
				ride.busy = true;
				try {
					return await writeEvent(ride);
				} finally {
					ride.busy = false;
				}
			};

			// 1. Throughput: a backlog written while no notifications instance runs, then drained by one.
			hints = false;
			const BACKLOG = opts.smoke ? 200 : Number(process.env.BENCH_WEBHOOK_BACKLOG || 5000);
			const backlogIds: string[] = [];
			let toWrite = BACKLOG;
			await Promise.all(
				Array.from({ length: WRITERS }, async () => {
					while (toWrite > 0) {
						toWrite--;
						const w = await writeOnFreeRide();
						if (w) backlogIds.push(w.eventId);
						else toWrite++;
					}
				}),
			);
			hints = true;
			const startAsked = Date.now();
			notif = await startPlatformProcess("notifications", {
				DATABASE_URL: db.url,
				TRANSPORTER: TEST_NATS_URL,
				NAMESPACE: ns,
				SERVICES: "notifications",
				PORT: "0",
				WEBHOOK_CONCURRENCY: String(CONCURRENCY),
				WEBHOOK_PARTNER_CONCURRENCY: String(CONCURRENCY),
				WEBHOOK_HOST_CONCURRENCY: String(CONCURRENCY),
				// BENCH_CPU_PROF=<dir>: a CPU profile of the notifications process (written when it stops).
				...(process.env.BENCH_CPU_PROF ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_CPU_PROF}` } : {}),
			});
			await receipts.waitAll(backlogIds, "backlog", 600_000);
			const times = backlogIds.map((id) => receipts.at.get(id)!);
			const first = Math.min(...times);
			const last = Math.max(...times);
			const drainRate = ((backlogIds.length - 1) / Math.max(1, last - first)) * 1000;
			// Statements the notifications process sent (the probe counts its pg client's queries), start-up included.
			const drainProbe = await freshProbe(notif.probe);
			await node.broker.waitForServices(["notifications"], 30_000);

			// 2. Latency at RATE events/s, open loop.
			const seconds = opts.seconds;
			const total = Math.round(RATE * seconds);
			const written: Array<{ eventId: string; committedAt: number; occurredAt: number }> = [];
			let notSent = 0;
			const writes: Promise<void>[] = [];
			const pgSamples = new Map<string, number>();
			let sampling = process.env.BENCH_PG_SAMPLE === "1";
			const sampler = (async () => {
				while (sampling) {
					const { rows } = await pool.query(
						"SELECT state, wait_event_type, wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS q FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' AND application_name = 'notifications'",
					);
					for (const r of rows) {
						const k = `${r.state}|${r.wait_event_type ?? ""}:${r.wait_event ?? ""}|${r.q}`;
						pgSamples.set(k, (pgSamples.get(k) ?? 0) + 1);
					}
					await sleep(20);
				}
			})();
			const probe0 = await freshProbe(notif.probe);
			const cpu0 = { notif: processCpuSeconds(notif.proc.child.pid), self: process.cpuUsage(), machine: machineJiffies(), at: performance.now() };
			const t0 = performance.now();
			for (let i = 0; i < total; i++) {
				const wait = t0 + (i * 1000) / RATE - performance.now();
				if (wait > 1) await sleep(wait);
				writes.push(
					writeOnFreeRide().then((w) => {
						if (w) written.push(w);
						else notSent++;
					}),
				);
			}
			await Promise.all(writes);
			const offerSecs = (performance.now() - t0) / 1000;
			// Where the CPU went while events were offered: the notifications process, this process (writers, hints, endpoint), the machine.
			const wall = (performance.now() - cpu0.at) / 1000;
			const self = process.cpuUsage(cpu0.self);
			const machine = machineJiffies();
			const cpuNote =
				`CPU while offering: notifications ${fmt(((processCpuSeconds(notif.proc.child.pid) - cpu0.notif) / wall) * 100)}% of a core, ` +
				`bench process ${fmt(((self.user + self.system) / 1e6 / wall) * 100)}%, machine ${fmt(((machine.busy - cpu0.machine.busy) / (machine.total - cpu0.machine.total)) * 100)}% busy`;
			const commitSpan =
				written.length > 1 ? (Math.max(...written.map((w) => w.committedAt)) - Math.min(...written.map((w) => w.committedAt))) / 1000 : NaN;
			await receipts.waitAll(
				written.map((w) => w.eventId),
				"paced events",
				300_000,
			);
			sampling = false;
			await sampler;
			const probe1 = await freshProbe(notif.probe);
			const perEvent = (probe1.queries - probe0.queries) / written.length;
			const lat = written.map((w) => receipts.at.get(w.eventId)! - w.committedAt).sort((a, b) => a - b);
			if (process.env.BENCH_WEBHOOK_TRACE === "1") {
				// Per 250 ms of commits: is the latency steady, or are there stalls (and how often)?
				const start = Math.min(...written.map((w) => w.committedAt));
				const slots = new Map<number, number[]>();
				for (const w of written) {
					const k = Math.floor((w.committedAt - start) / 250);
					if (!slots.has(k)) slots.set(k, []);
					slots.get(k)!.push(receipts.at.get(w.eventId)! - w.committedAt);
				}
				for (const [k, l] of [...slots].sort((a, b) => a[0] - b[0])) {
					l.sort((a, b) => a - b);
					console.log(
						`    +${String(k * 250).padStart(5)} ms: ${String(l.length).padStart(4)} events, p50 ${pct(l, 50)} ms, max ${l[l.length - 1]} ms`,
					);
				}
			}
			const fromOccurred = written.map((w) => receipts.at.get(w.eventId)! - w.occurredAt).sort((a, b) => a - b);
			if (pgSamples.size) {
				console.log("  pg_stat_activity samples of the notifications sessions (every 20 ms, latency run):");
				for (const [k, n] of [...pgSamples].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`    ${String(n).padStart(5)} ${k}`);
			}

			const bad = endpoint.received.filter((h) => !h.signatureValid).length;
			const violations = orderViolations(endpoint.received).length;
			// Floor: bare axios POST loop, same concurrency, same endpoint, signed bodies of the same size.
			const sample = endpoint.received[endpoint.received.length - 1].raw;
			const signer = new Webhook(partner.webhookSecret);
			const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
			const http = axios.create({ httpAgent: agent, proxy: false });
			let todo = backlogIds.length;
			const f0 = Date.now();
			await Promise.all(
				Array.from({ length: CONCURRENCY }, async () => {
					while (todo-- > 0) {
						const id = `msg_${randomUUID()}`;
						const now = new Date();
						await http.post(url, sample, {
							headers: {
								"content-type": "application/json",
								"webhook-id": id,
								"webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
								"webhook-signature": signer.sign(id, now, sample),
							},
						});
					}
				}),
			);
			const floorRate = (backlogIds.length / (Date.now() - f0)) * 1000;
			agent.destroy();
			return [
				{
					path: `webhooks, commit → receipt at ${RATE} events/s`,
					figure: `p50 ${fmt(pct(lat, 50))} ms, p99 ${fmt(pct(lat, 99))} ms`,
					floor: "–",
					ratio: "–",
					goal: "p99 ≤ 100 ms",
					met: pct(lat, 99) <= 100,
					note:
						`${written.length} status events offered in ${fmt(offerSecs, 1)} s, committed at ${fmt(written.length / commitSpan)}/s over ${RIDES} rides` +
						`${notSent ? `, ${notSent} not sent (every ride busy)` : ""}; max ${fmt(lat[lat.length - 1])} ms; occurredAt → receipt p50 ${fmt(pct(fromOccurred, 50))} ms, p99 ${fmt(pct(fromOccurred, 99))} ms; ${cpuNote}; ${fmt(perEvent, 1)} statements per event`,
				},
				{
					path: "webhooks, 1 notifications instance, throughput",
					figure: `${fmt(drainRate)} events/s`,
					floor: `axios loop ×${CONCURRENCY} ${fmt(floorRate)}/s`,
					ratio: fmt(drainRate / floorRate, 2),
					goal: "≥ 0.3",
					met: drainRate / floorRate >= 0.3,
					note:
						`backlog of ${backlogIds.length} written before notifications started, drained first → last receipt in ${fmt((last - first) / 1000, 1)} s ` +
						`(start asked → last receipt ${fmt((last - startAsked) / 1000, 1)} s), ${fmt(drainProbe.queries / backlogIds.length, 1)} statements per event; bad signatures ${bad}, order violations ${violations}`,
				},
			];
		} finally {
			await endpoint.close();
		}
	} finally {
		await stopAll(notif?.proc);
		await pool.end();
		await node.stop();
		await db.drop();
	}
}
