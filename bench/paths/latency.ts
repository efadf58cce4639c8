/**
 * Partner-visible latency, the platform's own share: rides booked by a partner
 * (a live key) open loop at a steady rate, offered to scripted drivers over
 * the driver API (bench/lib/fleet-load.ts in its own process pinned to core
 * 1; the platform in one process on core 0, live fleet mode), who accept at
 * once; the partner then cancels each accepted ride at once.
 *
 *   - create-order sent → `accepted` webhook received, less the driver's
 *     think time (offer seen → accept sent): what the platform takes;
 *   - cancel sent → `customer_cancelled` webhook received.
 *
 * Both timed on the generator's clock; the webhooks go to its own receiver.
 */
import { connect } from "../../test/helpers/db";
import { apiKey, fmt, sleep, stopAll, type BenchOptions, type Row } from "../lib/common";
import { GENERATOR_CORE, pin, SERVER_CORE } from "../lib/method";
import { CENTRE, driverTokens, Generator, startLivePlatform, PING_INTERVAL_MS, RADIUS_M } from "./fleet";
import { createTestDatabase } from "../../test/helpers/db";

interface RideStats {
	created: number;
	accepted: number;
	platformAccepted: { n: number; p50: number; p99: number };
	platformCancelled: { n: number; sent: number; p50: number; p99: number };
	creates: { byStatus: Record<string, number> };
	steps: { byStatus: Record<string, number> };
	cancels: { byStatus: Record<string, number> };
}

export async function latency(opts: BenchOptions): Promise<Row[]> {
	const driversN = opts.smoke ? 5 : 20;
	const rate = Number(process.env.BENCH_LATENCY_RATE || (opts.smoke ? 2 : 4));
	const W = opts.smoke ? 3000 : Math.max(10_000, opts.seconds * 1000);
	const db = await createTestDatabase("benchlatency");
	const gen = new Generator();
	const key = apiKey();
	let platform;
	try {
		const tokens = await driverTokens(db, driversN);
		const started = await startLivePlatform(db, key);
		platform = started.platform;
		const port = started.port;
		pin(platform.proc.child.pid, SERVER_CORE);
		pin(gen.child.pid, GENERATOR_CORE);
		await gen.call("init", {
			url: `http://127.0.0.1:${port}`,
			drivers: tokens,
			centre: CENTRE,
			radiusM: RADIUS_M,
			partnerKey: key,
			maxSeconds: opts.smoke ? 120 : 600,
		});
		await gen.call("online", { from: 0, to: driversN });
		await gen.call("policy", { policy: "acceptCancel" });
		await gen.call("polls", { from: 0, to: driversN, waitSeconds: 20 });
		await gen.call("pings", { from: 0, to: driversN, intervalMs: PING_INTERVAL_MS, maxMs: W + 30_000 });
		await gen.call("rides", { rate, ms: 1000 }); // warm-up
		await sleep(opts.smoke ? 1500 : 3000);
		await gen.call("mark");
		await gen.call("rides", { rate, ms: W });
		await sleep(W + (opts.smoke ? 1500 : 3000)); // the last rides' webhooks
		const s = (await gen.call<{ rides: RideStats }>("stats")).rides;
		await gen.call("stopPings");
		const statuses = (t: { byStatus: Record<string, number> }) =>
			Object.entries(t.byStatus)
				.map(([k, n]) => `${n}× ${k}`)
				.join(", ") || "none";
		const pg = await connect(db.url);
		const ended = await pg.query<{ status: string; n: string }>("SELECT status, count(*)::text AS n FROM orders GROUP BY status").finally(() => pg.end());
		const note = `${s.created} rides at ${rate}/s over ${W / 1000} s, ${driversN} scripted drivers (live key, live fleet mode); create-order not 201: ${statuses(s.creates)}; driver steps not 2xx: ${statuses(s.steps)}; cancels not 2xx: ${statuses(s.cancels)}; orders by status at the end: ${ended.rows.map((r) => `${r.n}× ${r.status}`).join(", ")}`;
		return [
			{
				path: "create-order → accepted webhook, the platform's share, 1 process",
				figure: `p50 ${fmt(s.platformAccepted.p50)} ms, p99 ${fmt(s.platformAccepted.p99)} ms`,
				floor: "–",
				ratio: "–",
				goal: "p99 ≤ 300 ms",
				met: s.platformAccepted.n > 0 ? s.platformAccepted.p99 <= 300 : undefined,
				note: `${s.platformAccepted.n} timed; ${note}`,
			},
			{
				path: "cancel → customer_cancelled webhook, 1 process",
				figure: `p50 ${fmt(s.platformCancelled.p50)} ms, p99 ${fmt(s.platformCancelled.p99)} ms`,
				floor: "–",
				ratio: "–",
				goal: "–",
				note: `${s.platformCancelled.n} of ${s.platformCancelled.sent} cancels timed`,
			},
		];
	} finally {
		gen.stop();
		await stopAll(platform?.proc);
		await db.drop();
	}
}
