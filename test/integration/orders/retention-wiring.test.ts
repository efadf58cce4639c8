import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { startTestNode, type TestNode } from "../../helpers/node";

/**
 * Orders' retention pass as the services run it: `orders.runRetention` asks
 * `notifications.undeliveredOrders` over the broker and keeps what it names;
 * with no notifications to ask, it removes nothing; a bad retention setting
 * refuses start-up. (The batches, windows
 * and rules themselves: test/integration/platform/retention.test.ts.)
 */

let db: TestDatabase;
let node: TestNode | undefined;
let sql: Client;

beforeAll(async () => {
	db = await createTestDatabase("retwiring");
	// Both services once, so both migrate; then each test starts what it needs.
	const first = await startTestNode({ databaseUrl: db.url, services: ["orders", "notifications"] });
	await first.stop();
	sql = await connect(db.url);
	for (const [id, delivery] of [
		["ord_gone", "delivered"],
		["ord_owed", "pending"],
	] as const) {
		await sql.query(
			`INSERT INTO orders (id, partner_id, rider_id, status, service_type, pickup, "drop", fare_paise, distance, duration, otp, webhook_url, updated_at)
			 VALUES ($1, 'ptn_w', $1, 'dropped', 'cab', '{}', '{}', 100, 1, 1, '0421', 'https://p.example/h', now() - interval '100 days')`,
			[id],
		);
		await sql.query(
			`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
			 VALUES ($1, $2, 'ptn_w', 1, 'status', 'dropped', 'https://p.example/h', '{}', now())`,
			[`evt_${id}`, id],
		);
		await sql.query(
			`INSERT INTO webhook_deliveries (event_id, order_id, partner_id, kind, sequence, event_position, occurred_at, event_created_at, state, finished_at, next_attempt_at)
			 SELECT id, order_id, partner_id, 'status', 1, position, now(), now(), $2, CASE WHEN $2 = 'pending' THEN NULL ELSE now() END, now() + interval '1 day'
			 FROM ride_events WHERE id = $1`,
			[`evt_${id}`, delivery],
		);
	}
	await sql.query("UPDATE webhook_ingest_cursor SET position = (SELECT max(position) FROM ride_events) WHERE name = 'safety_net'");
}, 60_000);

afterEach(async () => {
	await node?.stop();
	node = undefined;
});

afterAll(async () => {
	await sql?.end();
	await db?.drop();
});

const orderIds = async () => (await sql.query<{ id: string }>("SELECT id FROM orders ORDER BY id")).rows.map((r) => r.id);

it("without notifications to ask, nothing is removed", async () => {
	node = await startTestNode({ databaseUrl: db.url, services: ["orders"] });
	await expect(node.broker.call("orders.runRetention")).resolves.toEqual({ removed: 0 });
	expect(await orderIds()).toEqual(["ord_gone", "ord_owed"]);
});

it("asks notifications over the broker: the ride with a pending webhook stays, the other goes", async () => {
	node = await startTestNode({ databaseUrl: db.url, services: ["orders", "notifications"], env: { WEBHOOK_POLL_MS: "3600000" } });
	await expect(node.broker.call("notifications.undeliveredOrders", { orderIds: ["ord_gone", "ord_owed", "ord_unknown"] })).resolves.toEqual({
		orderIds: ["ord_owed"],
	});
	await expect(node.broker.call("orders.runRetention")).resolves.toEqual({ removed: 1 });
	expect(await orderIds()).toEqual(["ord_owed"]);
	expect((await sql.query("SELECT order_id FROM ride_events")).rows).toEqual([{ order_id: "ord_owed" }]);
});

it.each([
	["orders", "ORDERS_RETENTION_DAYS", "-1"],
	["notifications", "WEBHOOK_RETENTION_DAYS", "thirty"],
	["dispatch", "DISPATCH_RETENTION_DAYS", "1.5"],
	["orders", "RETENTION_BATCH_SIZE", "0"],
] as const)("%s refuses to start with %s=%s, naming the setting", async (service, name, value) => {
	await expect(startTestNode({ databaseUrl: db.url, services: [service], env: { [name]: value } })).rejects.toThrow(name);
});
