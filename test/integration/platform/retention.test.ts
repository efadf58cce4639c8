import { Sequelize } from "sequelize";
import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { Db, runMigrations } from "../../../mixins/db.mixin";
import { migrations as ordersMigrations } from "../../../services/orders/migrations";
import { migrations as notificationsMigrations } from "../../../services/notifications/migrations";
import { migrations as dispatchMigrations } from "../../../services/dispatch/migrations";
import { OrdersRetentionRepo, type FinishedKey } from "../../../services/orders/retention.repo";
import { removeFinishedOrders } from "../../../services/orders/retention";
import { NotificationsRetentionRepo } from "../../../services/notifications/retention.repo";
import { NotificationsRepo } from "../../../services/notifications/notifications.repo";
import { DispatchRetentionRepo } from "../../../services/dispatch/retention.repo";
import { RetentionPass, type RetentionSettings } from "../../../lib/retention";

/**
 * Retention on real PostgreSQL (lib/retention.ts and each owner's
 * retention.repo.ts): finished rows older than the window go, in batches of
 * RETENTION_BATCH_SIZE, at most RETENTION_MAX_BATCHES per pass; newer rows,
 * open rides, pending offers and pending deliveries stay; a ride with an
 * event still to deliver (pending, or not taken in by notifications) stays
 * until it is delivered or given up; two instances' passes share the work.
 */

let db: TestDatabase;
let seq: Sequelize;
let sql: Client;
let seq2: Sequelize;

const silent = { info: () => undefined, warn: () => undefined };

beforeAll(async () => {
	db = await createTestDatabase("retention");
	seq = new Sequelize(db.url, { logging: false, pool: { max: 5 } });
	seq2 = new Sequelize(db.url, { logging: false, pool: { max: 5 } });
	await runMigrations(seq, { service: "orders", migrations: ordersMigrations }, db.url);
	await runMigrations(seq, { service: "notifications", migrations: notificationsMigrations }, db.url);
	await runMigrations(seq, { service: "dispatch", migrations: dispatchMigrations }, db.url);
	sql = await connect(db.url);
});

afterAll(async () => {
	await sql?.end();
	await seq?.close();
	await seq2?.close();
	await db?.drop();
});

const settings = (batch: number, maxBatches: number, days = 90): RetentionSettings => ({
	retentionDays: days,
	retentionBatchSize: batch,
	retentionMaxBatches: maxBatches,
	retentionIntervalMs: 60_000,
	retentionDuty: 1,
});

let seqNo = 0;

/** A ride `status`, last changed `daysAgo` days ago, with one status event (and its delivery in `delivery` state, if any). */
async function ride(id: string, status: string, daysAgo: number, delivery: "delivered" | "failed" | "pending" | "none" = "delivered"): Promise<void> {
	seqNo++;
	await sql.query(
		`INSERT INTO orders (id, partner_id, rider_id, status, service_type, pickup, "drop", fare_paise, distance, duration, otp, webhook_url, created_at, updated_at)
		 VALUES ($1, 'ptn_r', $2, $3, 'cab', '{}', '{}', 100, 1, 1, '0421', 'https://p.example/h', now() - make_interval(days => $4::int + 1), now() - make_interval(days => $4::int) + make_interval(secs => $5::int))`,
		[id, `rdr_${id}`, status, daysAgo, seqNo],
	);
	await sql.query(
		`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
		 VALUES ($1, $2, 'ptn_r', 1, 'status', $3, 'https://p.example/h', '{}', now())`,
		[`evt_${id}`, id, status === "searching" ? "searching" : status],
	);
	if (status === "dropped") await sql.query("INSERT INTO feedback (order_id, partner_id, rating) VALUES ($1, 'ptn_r', 5)", [id]);
	if (delivery !== "none") {
		await sql.query(
			`INSERT INTO webhook_deliveries (event_id, order_id, partner_id, kind, sequence, event_position, occurred_at, event_created_at, state, finished_at)
			 SELECT e.id, e.order_id, e.partner_id, 'status', 1, e.position, now(), now(), $2, CASE WHEN $2 = 'pending' THEN NULL ELSE now() END
			 FROM ride_events e WHERE e.id = $1`,
			[`evt_${id}`, delivery],
		);
	}
}

/** Moves the safety net's cursor over every ride event so far: all of them taken in. */
async function allTakenIn(): Promise<void> {
	await sql.query("UPDATE webhook_ingest_cursor SET position = (SELECT max(position) FROM ride_events) WHERE name = 'safety_net'");
}

const ids = async (table: string, column = "id"): Promise<string[]> =>
	(await sql.query<{ id: string }>(`SELECT ${column} AS id FROM ${table} ORDER BY 1`)).rows.map((r) => r.id);

function ordersPass(s: Sequelize, st: RetentionSettings): RetentionPass<FinishedKey> {
	const repo = new OrdersRetentionRepo(new Db(s));
	const notifications = new NotificationsRetentionRepo(new Db(s));
	return new RetentionPass<FinishedKey>({
		name: "finished rides",
		settings: st,
		logger: silent,
		removeBatch: (days, limit, after) =>
			removeFinishedOrders({ repo, undeliveredOrders: (orderIds) => notifications.undeliveredOrders(orderIds) }, days, limit, after),
	});
}

describe("orders", () => {
	beforeAll(async () => {
		// Seven old finished rides that may go (delivered, failed = given up, cancelled, no driver).
		for (let i = 0; i < 5; i++) await ride(`ord_old_done_${i}`, "dropped", 120);
		await ride("ord_old_failed", "customer_cancelled", 120, "failed");
		await ride("ord_old_nodriver", "no_driver_found", 120);
		// Old finished rides that must stay: a pending delivery.
		await ride("ord_old_pending", "dropped", 120, "pending");
		// Recent finished, and an old active ride.
		await ride("ord_recent", "dropped", 10);
		await ride("ord_old_active", "searching", 120, "none");
		await allTakenIn();
		// Taken in before the cursor, its delivery row since removed by notifications' retention: may go.
		await sql.query("DELETE FROM webhook_deliveries WHERE event_id = 'evt_ord_old_done_4'");
		// Written after the cursor and not taken in yet: must stay.
		await ride("ord_old_not_ingested", "dropped", 120, "none");
	});

	it("removes finished rides past the window in bounded batches, with their events and feedback; keeps the rest", async () => {
		// Batches of 2, at most 2 per pass: the first pass reads 4 candidates (oldest first) and removes only those.
		const pass = ordersPass(seq, settings(2, 2));
		const first = await pass.run();
		expect(first).toBe(4);
		let total = first;
		for (let i = 0; i < 5; i++) total += await pass.run();
		expect(total).toBe(7);

		expect(await ids("orders")).toEqual(["ord_old_active", "ord_old_not_ingested", "ord_old_pending", "ord_recent"]);
		expect(await ids("ride_events", "order_id")).toEqual(["ord_old_active", "ord_old_not_ingested", "ord_old_pending", "ord_recent"]);
		expect(await ids("feedback", "order_id")).toEqual(["ord_old_not_ingested", "ord_old_pending", "ord_recent"]);
	});

	it("keeps a ride with an undelivered webhook until it is delivered or given up", async () => {
		const pass = ordersPass(seq, settings(10, 5));
		expect(await pass.run()).toBe(0);
		await sql.query("UPDATE webhook_deliveries SET state = 'failed', finished_at = now() WHERE order_id = 'ord_old_pending'");
		expect(await pass.run()).toBe(1);
		// Taken in, delivered: may go too.
		await sql.query(
			`INSERT INTO webhook_deliveries (event_id, order_id, partner_id, kind, sequence, event_position, occurred_at, event_created_at, state, finished_at)
			 SELECT id, order_id, partner_id, 'status', 1, position, now(), now(), 'delivered', now() FROM ride_events WHERE order_id = 'ord_old_not_ingested'`,
		);
		expect(await pass.run()).toBe(1);
		expect(await ids("orders")).toEqual(["ord_old_active", "ord_recent"]);
	});

	it("removes nothing when notifications cannot answer", async () => {
		await ride("ord_old_unasked", "dropped", 120);
		await allTakenIn();
		const repo = new OrdersRetentionRepo(new Db(seq));
		const pass = new RetentionPass<FinishedKey>({
			name: "finished rides",
			settings: settings(10, 5),
			logger: silent,
			removeBatch: (days, limit, after) =>
				removeFinishedOrders({ repo, undeliveredOrders: () => Promise.reject(new Error("notifications unavailable")) }, days, limit, after),
		});
		expect(await pass.run()).toBe(0);
		expect(await ids("orders")).toContain("ord_old_unasked");
		expect(await ordersPass(seq, settings(10, 5)).run()).toBe(1);
	});

	it("two instances' passes share the work: every removable ride removed once, no errors", async () => {
		for (let i = 0; i < 40; i++) await ride(`ord_many_${i}`, "dropped", 100);
		await allTakenIn();
		const warnings: string[] = [];
		const logger = { info: () => undefined, warn: (m: string) => void warnings.push(m) };
		const mk = (s: Sequelize) => {
			const repo = new OrdersRetentionRepo(new Db(s));
			const n = new NotificationsRetentionRepo(new Db(s));
			return new RetentionPass<FinishedKey>({
				name: "finished rides",
				settings: settings(5, 100),
				logger,
				removeBatch: (days, limit, after) => removeFinishedOrders({ repo, undeliveredOrders: (o) => n.undeliveredOrders(o) }, days, limit, after),
			});
		};
		const [a, b] = await Promise.all([mk(seq).run(), mk(seq2).run()]);
		expect(a + b).toBe(40);
		expect(warnings).toEqual([]);
		expect(await ids("orders")).toEqual(["ord_old_active", "ord_recent"]);
	});
});

describe("notifications", () => {
	beforeAll(async () => {
		await sql.query("TRUNCATE webhook_deliveries CASCADE");
		await sql.query("DELETE FROM feedback");
		await sql.query("DELETE FROM ride_events");
		await sql.query("DELETE FROM orders");
	});

	async function delivery(id: string, state: string, finishedDaysAgo: number | null, attempts = 2): Promise<void> {
		seqNo++;
		await sql.query(
			`INSERT INTO webhook_deliveries (event_id, order_id, partner_id, kind, sequence, event_position, occurred_at, event_created_at, state, finished_at)
			 VALUES ($1, 'ord_x', 'ptn_r', 'status', 1, $2, now(), now(), $3, now() - make_interval(days => $4::int))`,
			[id, seqNo, state, finishedDaysAgo ?? 0],
		);
		if (finishedDaysAgo === null)
			await sql.query("UPDATE webhook_deliveries SET finished_at = NULL, event_created_at = now() - interval '60 days' WHERE event_id = $1", [id]);
		for (let i = 1; i <= attempts; i++) {
			await sql.query(
				"INSERT INTO webhook_attempts (id, event_id, attempt, started_at, duration_ms, outcome, instance) VALUES ($1, $2, $3, now() - interval '40 days', 5, 'HTTP_5XX', 'i')",
				[`att_${id}_${i}`, id, i],
			);
		}
	}

	it("removes finished deliveries past the window with their attempts, in batches; keeps pending and recent ones", async () => {
		for (const [i, state] of ["delivered", "failed", "superseded", "expired", "delivered"].entries()) await delivery(`evt_old_${i}`, state, 40);
		await delivery("evt_old_pending", "pending", null);
		await delivery("evt_recent", "delivered", 3);
		const repo = new NotificationsRetentionRepo(new Db(seq));
		const pass = new RetentionPass<undefined>({
			name: "webhook deliveries",
			settings: settings(2, 2, 30),
			logger: silent,
			removeBatch: async (days, limit) => {
				const removed = await repo.removeFinished(days, limit);
				return { removed, scanned: removed, next: undefined };
			},
		});
		expect(await pass.run()).toBe(4);
		expect(await pass.run()).toBe(1);
		expect(await pass.run()).toBe(0);
		expect(await ids("webhook_deliveries", "event_id")).toEqual(["evt_old_pending", "evt_recent"]);
		expect(await ids("webhook_attempts", "event_id")).toEqual(["evt_old_pending", "evt_old_pending", "evt_recent", "evt_recent"]);
	});

	it("a restart after removal does not take old ride events in again (the seed includes the safety net's cursor)", async () => {
		await sql.query("TRUNCATE webhook_deliveries CASCADE");
		await ride("ord_sent_long_ago", "dropped", 40, "delivered");
		await allTakenIn();
		await sql.query("UPDATE webhook_deliveries SET finished_at = now() - interval '40 days', ingested_at = now() - interval '40 days'");
		const repo = new NotificationsRetentionRepo(new Db(seq));
		expect(await repo.removeFinished(30, 100)).toBe(1);

		const delivery = new NotificationsRepo(new Db(seq));
		const floor = await delivery.seedPosition(10_000);
		expect(floor).toBeGreaterThan(0);
		expect(await delivery.ingest(floor, 500, 120_000)).toBe(0);
		expect(await ids("webhook_deliveries", "event_id")).toEqual([]);
	});
});

describe("dispatch", () => {
	beforeAll(async () => {
		const ride = (id: string, state: string, daysAgo: number) =>
			sql.query(
				`INSERT INTO dispatch_rides (order_id, service_type, pickup_lat, pickup_lng, drop_lat, drop_lng, state, order_status, updated_at)
				 VALUES ($1, 'cab', 12.9, 77.5, 12.95, 77.6, $2, 'dropped', now() - make_interval(days => $3::int))`,
				[id, state, daysAgo],
			);
		const offer = (id: string, orderId: string, driverId: string, state: string, daysAgo: number) =>
			sql.query(
				`INSERT INTO dispatch_offers (id, order_id, driver_id, state, distance_m, eta, expires_at, created_at)
				 VALUES ($1, $2, $3, $4, 100, 60, now(), now() - make_interval(days => $5::int))`,
				[id, orderId, driverId, state, daysAgo],
			);
		for (let i = 0; i < 3; i++) await ride(`ord_closed_${i}`, "closed", 40);
		await ride("ord_closed_recent", "closed", 5);
		await ride("ord_open_old", "assigned", 40);
		await ride("ord_closed_held", "closed", 40);
		await sql.query(
			`INSERT INTO drivers (id, name, phone, vehicle_number, service_type, status, order_id, lat, lng)
			 VALUES ('drv_held', 'D', '+910000000001', 'KA01', 'cab', 'on_trip', 'ord_closed_held', 12.9, 77.5)`,
		);
		for (let i = 0; i < 3; i++) await offer(`off_old_${i}`, `ord_closed_${i}`, "drv_x", i === 0 ? "accepted" : "declined", 40);
		await offer("off_old_pending", "ord_open_old", "drv_y", "pending", 40);
		await offer("off_recent", "ord_closed_recent", "drv_x", "expired", 5);
	});

	it("removes old finished offers and closed rides in batches; keeps pending offers, open, recent and held rides", async () => {
		const repo = new DispatchRetentionRepo(new Db(seq));
		const pass = new RetentionPass<undefined>({
			name: "offers and closed rides",
			settings: settings(2, 1, 30),
			logger: silent,
			removeBatch: async (days, limit) => ({ ...(await repo.removeBatch(days, limit)), next: undefined }),
		});
		expect(await pass.run()).toBe(4);
		expect(await pass.run()).toBe(2);
		expect(await pass.run()).toBe(0);
		expect(await ids("dispatch_offers")).toEqual(["off_old_pending", "off_recent"]);
		expect(await ids("dispatch_rides", "order_id")).toEqual(["ord_closed_held", "ord_closed_recent", "ord_open_old"]);
	});
});

it("a window of 0 keeps everything: the pass does nothing", async () => {
	const pass = new RetentionPass<undefined>({
		name: "x",
		settings: settings(10, 10, 0),
		logger: silent,
		removeBatch: () => Promise.reject(new Error("must not run")),
	});
	expect(pass.enabled).toBe(false);
	expect(await pass.run()).toBe(0);
});
