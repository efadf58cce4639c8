import { Sequelize } from "sequelize";
import { createTestDatabase } from "../../helpers/db";
import { runMigrations } from "../../../mixins/db.mixin";
import { migrations as ordersMigrations } from "../../../services/orders/migrations";
import { migrations as partnersMigrations } from "../../../services/partners/migrations";

/**
 * Key modes on a database that already has data (orders/003, partners/003):
 * existing keys and orders become test, a rider's active test ride still
 * blocks a second test ride but not a live one, and Idempotency-Keys are per
 * mode. Then down, and the old shape is back.
 */
const ACTIVE_RULE = { parent: { constraint: "orders_one_active_per_rider" } };

it("orders/003 and partners/003 make existing orders and keys test, and scope the active-ride rule and Idempotency-Keys by mode", async () => {
	const db = await createTestDatabase("modemig");
	const seq = new Sequelize(db.url, { logging: false });
	const insertOrder = (id: string, mode?: string) =>
		seq.query(
			`INSERT INTO orders (id, partner_id, rider_id, status, service_type, pickup, "drop", fare_paise, distance, duration, otp, webhook_url${mode ? ", mode" : ""})
			 VALUES ($1, 'ptn_a', 'rdr_1', 'searching', 'cab', '{}', '{}', 100, 1, 1, '1234', 'https://x.example'${mode ? ", $2" : ""})`,
			{ bind: mode ? [id, mode] : [id] },
		);
	try {
		await runMigrations(seq, { service: "orders", migrations: ordersMigrations.slice(0, 2) }, db.url);
		await runMigrations(seq, { service: "partners", migrations: partnersMigrations.slice(0, 2) }, db.url);
		await insertOrder("ord_old");
		await seq.query("INSERT INTO idempotency_keys (partner_id, key, request_hash, state, claim_token) VALUES ('ptn_a', 'k1', 'h', 'done', 't')");
		await seq.query("INSERT INTO partners (id, name) VALUES ('ptn_a', 'A')");
		await seq.query("INSERT INTO api_keys (id, partner_id, key_hash, label) VALUES ('key_a', 'ptn_a', 'h1', 'initial')");

		await runMigrations(seq, { service: "orders", migrations: ordersMigrations }, db.url);
		await runMigrations(seq, { service: "partners", migrations: partnersMigrations }, db.url);

		expect((await seq.query("SELECT id, mode FROM orders"))[0]).toEqual([{ id: "ord_old", mode: "test" }]);
		expect((await seq.query("SELECT key, mode FROM idempotency_keys"))[0]).toEqual([{ key: "k1", mode: "test" }]);
		expect((await seq.query("SELECT id, mode FROM api_keys"))[0]).toEqual([{ id: "key_a", mode: "test" }]);

		// One active ride per rider and mode.
		await expect(insertOrder("ord_test2", "test")).rejects.toMatchObject(ACTIVE_RULE);
		await insertOrder("ord_live", "live");
		await expect(insertOrder("ord_live2", "live")).rejects.toMatchObject(ACTIVE_RULE);
		await expect(insertOrder("ord_bad", "prod")).rejects.toThrow(/check/i);
		// The same Idempotency-Key of the partner, once per mode.
		await seq.query(
			"INSERT INTO idempotency_keys (partner_id, key, request_hash, state, claim_token, mode) VALUES ('ptn_a', 'k1', 'h', 'done', 't', 'live')",
		);
		await expect(
			seq.query(
				"INSERT INTO idempotency_keys (partner_id, key, request_hash, state, claim_token, mode) VALUES ('ptn_a', 'k1', 'h', 'done', 't', 'live')",
			),
		).rejects.toMatchObject({
			parent: { constraint: "idempotency_keys_pkey" },
		});

		// Down: live rows are dropped from the key table, the column goes, the old rule is back.
		await seq.query("DELETE FROM orders WHERE mode = 'live'");
		await ordersMigrations[2].down!(seq.getQueryInterface(), seq);
		await partnersMigrations[2].down!(seq.getQueryInterface(), seq);
		expect(
			(
				await seq.query(
					"SELECT column_name FROM information_schema.columns WHERE table_name IN ('orders', 'idempotency_keys', 'api_keys') AND column_name = 'mode'",
				)
			)[0],
		).toEqual([]);
		expect((await seq.query("SELECT partner_id, key FROM idempotency_keys"))[0]).toEqual([{ partner_id: "ptn_a", key: "k1" }]);
		await expect(insertOrder("ord_again")).rejects.toMatchObject(ACTIVE_RULE);
	} finally {
		await seq.close();
		await db.drop();
	}
});
