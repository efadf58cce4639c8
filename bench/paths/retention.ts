/**
 * Path: retention does not slow the hot paths. The platform in one process
 * (gateway, partners, riders, pricing, orders, dispatch; live fleet mode, no
 * driver, its own retention off) on a throw-away database holding a backlog
 * of old finished rides (each with a ride event, a delivered webhook and its
 * attempt, a closed dispatch ride and a declined offer) and a backlog of
 * pending webhooks of recent rides.
 *
 * Two hot paths are measured in alternating rounds, without and with
 * removal running (off/on, on/off, …; medians of the rounds):
 *   - POST /ride/create-order, a distinct rider per request, 32 connections
 *     (autocannon in this process): orders/s;
 *   - the webhook claim (`webhook_claim_v2`, as the delivery loop calls it,
 *     each in a transaction rolled back so every claim sees the same
 *     backlog), one client back to back: claims/s.
 * "With removal running" is the three owners' retention passes
 * (lib/retention.ts with the same repos and statements the services run:
 * orders asking notifications' question through its repo) with the shipped
 * batch size, batches per pass and duty cycle (RETENTION_DUTY 0.25), run
 * back to back from this process for the whole round, without the 10
 * minutes between passes: far more removal than the shipped cadence, so the
 * ratio is a worst case. The ratio is with/without; goal ≥ 0.90.
 */
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Sequelize } from "sequelize";
import { connect, createTestDatabase } from "../../test/helpers/db";
import { freePort } from "../../test/helpers/http";
import { Db, runMigrations } from "../../mixins/db.mixin";
import { migrations as notificationsMigrations } from "../../services/notifications/migrations";
import { CLAIM_SQL } from "../../services/notifications/notifications.repo";
import { OrdersRetentionRepo, type FinishedKey } from "../../services/orders/retention.repo";
import { removeFinishedOrders } from "../../services/orders/retention";
import { NotificationsRetentionRepo } from "../../services/notifications/retention.repo";
import { DispatchRetentionRepo } from "../../services/dispatch/retention.repo";
import { DEFAULT_RETENTION_DUTY, RetentionPass, type RetentionSettings } from "../../lib/retention";
import { apiKey, fmt, load, okPerSecond, sleep, startPlatformProcess, stopAll, type BenchOptions, type Row } from "../lib/common";
import { orderBody } from "./create-order";

const CONNECTIONS = 32;
const quiet = { info: () => undefined, warn: (m: string) => console.error(`  retention: ${m}`) };

const median = (xs: number[]): number => {
	const s = [...xs].sort((a, b) => a - b);
	return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Old finished rides with everything retention removes, and pending webhooks of recent rides for the claim. */
async function seed(pg: import("pg").Client, old: number, pending: number): Promise<void> {
	const q = (text: string, values: unknown[] = []) => pg.query(text, values);
	await q(
		`INSERT INTO orders (id, partner_id, rider_id, status, service_type, pickup, "drop", fare_paise, distance, duration, otp, webhook_url, created_at, updated_at, mode)
		 SELECT 'ord_old_' || g, 'ptn_old', 'rdr_old_' || g, 'dropped', 'cab', '{}', '{}', 100, 1, 1, '0421', 'http://127.0.0.1:9/h',
		        now() - interval '200 days', now() - interval '200 days' + g * interval '1 ms', 'live'
		 FROM generate_series(1, $1::int) g`,
		[old],
	);
	await q(
		`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at, created_at)
		 SELECT 'evt_old_' || g, 'ord_old_' || g, 'ptn_old', 1, 'status', 'dropped', 'http://127.0.0.1:9/h', '{}', now() - interval '200 days', now() - interval '200 days'
		 FROM generate_series(1, $1::int) g`,
		[old],
	);
	await q(
		`INSERT INTO orders (id, partner_id, rider_id, status, service_type, pickup, "drop", fare_paise, distance, duration, otp, webhook_url, mode)
		 SELECT 'ord_new_' || g, 'ptn_c' || (g % 100), 'rdr_new_' || g, 'dropped', 'cab', '{}', '{}', 100, 1, 1, '0421', 'http://h' || (g % 50) || '.example/h', 'live'
		 FROM generate_series(1, $1::int) g`,
		[pending],
	);
	await q(
		`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
		 SELECT 'evt_new_' || g, 'ord_new_' || g, 'ptn_c' || (g % 100), 1, 'status', 'dropped', 'http://h' || (g % 50) || '.example/h', '{}', now()
		 FROM generate_series(1, $1::int) g`,
		[pending],
	);
	await q(
		`INSERT INTO webhook_deliveries (event_id, order_id, partner_id, kind, sequence, event_position, occurred_at, event_created_at, state, finished_at, host)
		 SELECT e.id, e.order_id, e.partner_id, 'status', 1, e.position, e.occurred_at, e.created_at,
		        CASE WHEN e.id LIKE 'evt_old_%' THEN 'delivered' ELSE 'pending' END,
		        CASE WHEN e.id LIKE 'evt_old_%' THEN now() - interval '200 days' END,
		        substring(e.webhook_url from '://([^/]*)')
		 FROM ride_events e`,
	);
	await q(
		`INSERT INTO webhook_attempts (id, event_id, attempt, started_at, duration_ms, outcome, instance)
		 SELECT 'att_' || event_id, event_id, 1, now() - interval '200 days', 5, 'delivered', 'seed' FROM webhook_deliveries WHERE state = 'delivered'`,
	);
	await q("UPDATE webhook_ingest_cursor SET position = (SELECT max(position) FROM ride_events) WHERE name = 'safety_net'");
	await q(
		`INSERT INTO dispatch_rides (order_id, service_type, pickup_lat, pickup_lng, drop_lat, drop_lng, state, order_status, updated_at)
		 SELECT 'ord_old_' || g, 'cab', 12.9, 77.5, 12.95, 77.6, 'closed', 'dropped', now() - interval '200 days' FROM generate_series(1, $1::int) g`,
		[old],
	);
	await q(
		`INSERT INTO dispatch_offers (id, order_id, driver_id, state, distance_m, eta, expires_at, created_at)
		 SELECT 'off_old_' || g, 'ord_old_' || g, 'drv_gone', 'declined', 100, 60, now(), now() - interval '200 days' FROM generate_series(1, $1::int) g`,
		[old],
	);
	await q("ANALYZE");
}

/** The three owners' passes back to back until `stop` resolves: rows removed. */
function removalLoop(seq: Sequelize): { stop: () => Promise<number> } {
	const db = new Db(seq);
	const st = (days: number): RetentionSettings => ({
		retentionDays: days,
		retentionBatchSize: 500,
		retentionMaxBatches: 20,
		retentionIntervalMs: 60_000,
		retentionDuty: DEFAULT_RETENTION_DUTY,
	});
	const ordersRepo = new OrdersRetentionRepo(db);
	const notifications = new NotificationsRetentionRepo(db);
	const dispatch = new DispatchRetentionRepo(db);
	const passes = [
		new RetentionPass<FinishedKey>({
			name: "finished rides",
			settings: st(90),
			logger: quiet,
			removeBatch: (days, limit, after) =>
				removeFinishedOrders({ repo: ordersRepo, undeliveredOrders: (ids) => notifications.undeliveredOrders(ids) }, days, limit, after),
		}),
		new RetentionPass<undefined>({
			name: "webhook deliveries",
			settings: st(30),
			logger: quiet,
			removeBatch: async (days, limit) => {
				const removed = await notifications.removeFinished(days, limit);
				return { removed, scanned: removed, next: undefined };
			},
		}),
		new RetentionPass<undefined>({
			name: "offers and closed rides",
			settings: st(30),
			logger: quiet,
			removeBatch: async (days, limit) => ({ ...(await dispatch.removeBatch(days, limit)), next: undefined }),
		}),
	];
	let running = true;
	let removed = 0;
	const done = (async () => {
		while (running) {
			let round = 0;
			for (const p of passes) round += await p.run();
			removed += round;
			if (round === 0) await sleep(50); // backlog gone: the note says so
		}
	})();
	return {
		stop: async () => {
			running = false;
			await done;
			return removed;
		},
	};
}

/** Claims per second for `ms`, one client back to back, each claim rolled back. */
async function claimRate(pg: import("pg").Client, ms: number): Promise<number> {
	const end = performance.now() + ms;
	let n = 0;
	const t0 = performance.now();
	while (performance.now() < end) {
		await pg.query("BEGIN");
		await pg.query(CLAIM_SQL, [64, 0, randomUUID(), "bench", 45_000, 120_000, 16, 16]);
		await pg.query("ROLLBACK");
		n++;
	}
	return n / ((performance.now() - t0) / 1000);
}

export async function retention(opts: BenchOptions): Promise<Row[]> {
	const db = await createTestDatabase("benchret");
	const pg = await connect(db.url);
	const claimer = await connect(db.url);
	const seq = new Sequelize(db.url, { dialect: "postgres", logging: false, pool: { max: 2 } });
	const key = apiKey();
	const OLD = opts.smoke ? 5_000 : 200_000;
	const PENDING = opts.smoke ? 1_000 : 5_000;
	const ROUNDS = opts.smoke ? 1 : 3;
	let platform;
	try {
		const port = await freePort();
		platform = await startPlatformProcess("platform", {
			DATABASE_URL: db.url,
			PORT: String(port),
			SERVICES: "gateway,partners,riders,pricing,orders,dispatch",
			BOOTSTRAP_PARTNER_KEY: key,
			BOOTSTRAP_PARTNER_MODE: "live",
			FLEET_MODE: "live",
			DISPATCH_TIMEOUT_MS: "3600000",
			ORDERS_RETENTION_DAYS: "0",
			DISPATCH_RETENTION_DAYS: "0",
		});
		await runMigrations(seq, { service: "notifications", migrations: notificationsMigrations }, db.url);
		const t0 = Date.now();
		await seed(pg, OLD, PENDING);
		console.log(`  seeded ${OLD} old finished rides (5 rows each) and ${PENDING} pending webhooks in ${((Date.now() - t0) / 1000).toFixed(0)} s`);

		const url = `http://127.0.0.1:${port}/ride/create-order`;
		const spec = { url, connections: CONNECTIONS, seconds: opts.seconds, headers: { authorization: `Bearer ${key}` }, bodyFn: orderBody };
		await load({ ...spec, seconds: opts.smoke ? 1 : 3 }); // warm-up
		const off = { orders: [] as number[], claims: [] as number[] };
		const on = { orders: [] as number[], claims: [] as number[] };
		let removed = 0;
		let removingMs = 0;
		for (let r = 0; r < ROUNDS; r++) {
			for (const removing of r % 2 === 0 ? [false, true] : [true, false]) {
				const loop = removing ? removalLoop(seq) : undefined;
				const started = Date.now();
				const orders = okPerSecond(await load(spec));
				const claims = await claimRate(claimer, opts.seconds * 1000);
				if (loop) {
					removed += await loop.stop();
					removingMs += Date.now() - started;
				}
				(removing ? on : off).orders.push(orders);
				(removing ? on : off).claims.push(claims);
			}
		}
		const left = (await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM orders WHERE id LIKE 'ord_old_%'")).rows[0].n;
		const note = `${ROUNDS} round(s) of ${opts.seconds} s each, alternating; removal ran at ${fmt(removed / Math.max(1, removingMs / 1000))} rows/s (${removed} rows, ${left} old rides left${left === 0 ? ": backlog ran out, later rounds removed less" : ""})`;
		const row = (path: string, unit: string, withIt: number[], without: number[]): Row => {
			const ratio = median(withIt) / Math.max(1e-9, median(without));
			return {
				path,
				figure: `${fmt(median(withIt), 1)} ${unit} removing`,
				floor: `${fmt(median(without), 1)} ${unit} not removing`,
				ratio: fmt(ratio, 2),
				goal: "≥ 0.90",
				met: opts.smoke ? undefined : ratio >= 0.9,
				note,
			};
		};
		return [row("retention: create-order", "orders/s", on.orders, off.orders), row("retention: webhook claim", "claims/s", on.claims, off.claims)];
	} finally {
		await stopAll(platform?.proc);
		await seq.close();
		await claimer.end();
		await pg.end();
		await db.drop();
	}
}
