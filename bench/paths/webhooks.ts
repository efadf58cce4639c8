/**
 * Path 5: webhooks through one notifications instance (its own process, over
 * NATS); rides are driven through orders in this process (partners, riders,
 * pricing, orders on the same namespace), the partner endpoint here verifies
 * every signature.
 *   - latency: commit (the event's occurredAt) → partner receipt, p50/p99, with
 *     ride changes paced at 500 events/s;
 *   - throughput: a burst of events written as fast as orders takes them,
 *     first write → last receipt, vs a bare axios POST loop (same concurrency,
 *     signed the same way) to the same endpoint, same run.
 */
import { Agent } from "node:http";
import { randomUUID } from "node:crypto";
import axios from "axios";
import { Webhook } from "standardwebhooks";
import { createTestDatabase, TEST_NATS_URL } from "../../test/helpers/db";
import { startTestNode, uniqueNamespace } from "../../test/helpers/node";
import { createPartner, createRide, move, startPartnerEndpoint, waitFor, type TestRide } from "../../test/helpers/webhooks";
import { fmt, pct, sleep, startPlatformProcess, stopAll, type BenchOptions, type Row } from "../lib/common";

const RATE = 500;
const CONCURRENCY = Number(process.env.WEBHOOK_CONCURRENCY || 64);

export async function webhooks(opts: BenchOptions): Promise<Row[]> {
	const db = await createTestDatabase("benchwh");
	const ns = uniqueNamespace("benchwh");
	let notif;
	const node = await startTestNode({ databaseUrl: db.url, services: ["partners", "riders", "pricing", "orders"], nats: { namespace: ns }, env: { LOGLEVEL: "warn" } });
	try {
		notif = await startPlatformProcess("notifications", { DATABASE_URL: db.url, TRANSPORTER: TEST_NATS_URL, NAMESPACE: ns, SERVICES: "notifications", PORT: "0" });
		await node.broker.waitForServices(["notifications"], 30_000);
		const partner = await createPartner(node.broker);
		const endpoint = await startPartnerEndpoint(partner.webhookSecret);
		try {
			const url = `${endpoint.url}/bench`;
			const rides: TestRide[] = [];
			const RIDES = opts.smoke ? 20 : 300;
			for (let i = 0; i < RIDES; i += 25) rides.push(...(await Promise.all(Array.from({ length: Math.min(25, RIDES - i) }, () => createRide(node.broker, partner, url)))));
			const busy = new Set<string>();
			let cursor = 0;
			const oneEvent = async (): Promise<boolean> => {
				for (let k = 0; k < rides.length; k++) {
					const ride = rides[cursor++ % rides.length];
					if (busy.has(ride.orderId)) continue;
					busy.add(ride.orderId);
					try {
						await move(node.broker, ride, "accepted");
						await move(node.broker, ride, "searching");
					} finally {
						busy.delete(ride.orderId);
					}
					return true;
				}
				return false;
			};

			// Latency at 500 events/s.
			const seconds = opts.seconds;
			const before = endpoint.delivered().length;
			const startedAt = Date.now();
			let sent = 0;
			let skipped = 0;
			const pending: Promise<unknown>[] = [];
			while (Date.now() - startedAt < seconds * 1000) {
				const due = Math.floor(((Date.now() - startedAt) / 1000) * RATE);
				while (sent + skipped < due) {
					if (busy.size >= rides.length) {
						skipped++;
						continue;
					}
					sent++;
					pending.push(oneEvent());
				}
				await sleep(5);
			}
			await Promise.all(pending);
			const paced = (sent / (Date.now() - startedAt)) * 1000;
			await waitFor("paced events delivered", () => endpoint.delivered().length >= before + sent, 120_000, 20);
			const lat = endpoint
				.delivered()
				.slice(before)
				.map((h) => h.receivedAt - Date.parse(String(h.body.occurredAt)))
				.sort((a, b) => a - b);

			// Throughput: a burst.
			// At most 3000 events, and at most 3 × BENCH_SECONDS of writing (orders in this process may be the bound).
			const b0 = endpoint.delivered().length;
			const t0 = Date.now();
			let left = opts.smoke ? 100 : 3000;
			let burst = 0;
			await Promise.all(
				Array.from({ length: Math.min(rides.length, 64) }, async () => {
					while (left > 0 && Date.now() - t0 < opts.seconds * 3000) {
						left--;
						if (await oneEvent()) burst++;
						else left++;
					}
				}),
			);
			const written = Date.now() - t0;
			await waitFor("burst delivered", () => endpoint.delivered().length >= b0 + burst, 300_000, 10);
			const deliveredRate = (burst / (Date.now() - t0)) * 1000;

			const bad = endpoint.received.filter((h) => !h.signatureValid).length;
			// Floor: bare axios POST loop, same concurrency, same endpoint, signed bodies of the same size.
			const sample = endpoint.delivered()[endpoint.delivered().length - 1].raw;
			const signer = new Webhook(partner.webhookSecret);
			const http = axios.create({ httpAgent: new Agent({ keepAlive: true, maxSockets: CONCURRENCY }) });
			let todo = burst;
			const f0 = Date.now();
			await Promise.all(
				Array.from({ length: CONCURRENCY }, async () => {
					while (todo-- > 0) {
						const id = `msg_${randomUUID()}`;
						const now = new Date();
						await http.post(url, sample, {
							headers: { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": String(Math.floor(now.getTime() / 1000)), "webhook-signature": signer.sign(id, now, sample) },
						});
					}
				}),
			);
			const floorRate = (burst / (Date.now() - f0)) * 1000;
			return [
				{
					path: `webhooks, commit → receipt at ${RATE} events/s`,
					figure: `p50 ${fmt(pct(lat, 50))} ms, p99 ${fmt(pct(lat, 99))} ms`,
					floor: "–",
					ratio: "–",
					goal: "p99 ≤ 100 ms",
					met: pct(lat, 99) <= 100,
					note: `${sent} events paced at ${fmt(paced)}/s over ${RIDES} rides${skipped ? `, ${skipped} not sent (every ride busy)` : ""}`,
				},
				{
					path: "webhooks, 1 notifications instance, throughput",
					figure: `${fmt(deliveredRate)} events/s`,
					floor: `axios loop ×${CONCURRENCY} ${fmt(floorRate)}/s`,
					ratio: fmt(deliveredRate / floorRate, 2),
					goal: "≥ 0.3",
					met: deliveredRate / floorRate >= 0.3,
					note: `burst of ${burst} written in ${fmt(written / 1000, 1)} s (${fmt((burst / written) * 1000)}/s through orders, the bound when it is lower); bad signatures at the endpoint: ${bad}`,
				},
			];
		} finally {
			await endpoint.close();
		}
	} finally {
		await stopAll(notif?.proc);
		await node.stop();
		await db.drop();
	}
}
