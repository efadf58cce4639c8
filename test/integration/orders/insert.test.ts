import { randomUUID } from "node:crypto";
import { QueryTypes, Sequelize } from "sequelize";
import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { newOrderFixture } from "../../helpers/order-rows";
import { Db, runMigrations } from "../../../mixins/db.mixin";
import { migrations } from "../../../services/orders/migrations";
import { OrdersRepo, type NewOrder } from "../../../services/orders/orders.repo";
import { IdempotencyRepo, type IdempotencyClaim } from "../../../services/orders/idempotency.repo";
import { answerTemplate } from "../../../services/orders/create-order";
import { toOrder } from "../../../services/orders/order-view";
import { newId } from "../../../lib/ids";
import type { KeyMode } from "../../../contracts/partners";

/**
 * create-order's one-statement insert (orders.repo.ts insertOrder): without
 * a key a single autocommit INSERT; with a key one CTE that inserts the
 * order only while the call still holds its claim and stores the 201 answer
 * in the same statement. The stored answer must equal the answer sent
 * (timestamps rendered in SQL like toISOString()), a claim taken over must
 * insert nothing, and claims never cross partners or modes.
 */

let db: TestDatabase;
let seq: Sequelize;
let orders: OrdersRepo;
let keys: IdempotencyRepo;
const statements: string[] = [];

beforeAll(async () => {
	db = await createTestDatabase("ordinsert");
	seq = new Sequelize(db.url, { logging: (sql) => statements.push(sql), pool: { max: 20 } });
	await runMigrations(seq, { service: "orders", migrations }, db.url);
	const sql = new Db(seq);
	orders = new OrdersRepo(sql);
	keys = new IdempotencyRepo(sql, 60_000);
});

afterAll(async () => {
	await seq?.close();
	await db?.drop();
});

function newOrder(riderId = newId("rdr"), partnerId = "ptn_a", mode: KeyMode = "test"): NewOrder {
	return newOrderFixture({
		id: newId("ord"),
		partnerId,
		mode,
		riderId,
		farePaise: 12345,
		distance: 4200,
		duration: 900,
		metadata: { partnerRef: "b-1", nested: { n: 1.5, list: [1, "x", null] } },
	});
}

async function claimFor(partnerId: string, mode: KeyMode, key = `k-${randomUUID()}`): Promise<IdempotencyClaim> {
	const outcome = await keys.claim(partnerId, mode, key, "hash");
	if (outcome.kind !== "claimed") throw new Error("expected a fresh claim");
	return outcome.claim;
}

async function storedAnswer(claim: IdempotencyClaim) {
	const rows = await seq.query<{ state: string; response_status: number | null; response_body: unknown }>(
		"SELECT state, response_status, response_body FROM idempotency_keys WHERE partner_id = $1 AND mode = $2 AND key = $3",
		{ bind: [claim.partnerId, claim.mode, claim.key], type: QueryTypes.SELECT },
	);
	return rows[0];
}

const countOrders = async (riderId: string) =>
	(await seq.query<{ n: number }>("SELECT count(*)::int AS n FROM orders WHERE rider_id = $1", { bind: [riderId], type: QueryTypes.SELECT }))[0].n;

it("without a key: one INSERT statement, no transaction; a second active ride for the rider and mode yields null", async () => {
	const order = newOrder();
	statements.length = 0;
	const { row, claimLost } = await orders.insertOrder(order, null);
	expect(claimLost).toBe(false);
	expect(row).toMatchObject({ id: order.id, status: "searching", rider_id: order.riderId, mode: "test", fare_paise: 12345 });
	expect(statements).toHaveLength(1);
	expect(statements[0]).toMatch(/INSERT INTO orders/);
	expect(statements.join("\n")).not.toMatch(/START TRANSACTION|BEGIN|COMMIT/);

	expect(await orders.insertOrder(newOrder(order.riderId), null)).toEqual({ row: null, claimLost: false });
	// The other mode is another active-ride slot.
	expect((await orders.insertOrder(newOrder(order.riderId, "ptn_a", "live"), null)).row).not.toBeNull();
});

it("several orders without a key in one statement: each answer is its own order's row (partners and modes apart), null only for a rider already riding in that mode", async () => {
	const riding = newOrder(newId("rdr"), "ptn_b", "live");
	expect((await orders.insertOrder(riding, null)).row).not.toBeNull();
	const rider = newId("rdr");
	const batch = [
		newOrder(rider, "ptn_a", "test"),
		newOrder(rider, "ptn_a", "live"),
		newOrder(newId("rdr"), "ptn_b", "test"),
		newOrder(riding.riderId, "ptn_b", "live"),
		newOrder(riding.riderId, "ptn_b", "test"),
	];
	batch.forEach((o, i) => (o.metadata = { n: i }));
	statements.length = 0;
	const rows = await orders.insertOrders(batch);
	expect(statements).toHaveLength(1);
	expect(statements.join("\n")).not.toMatch(/START TRANSACTION|BEGIN|COMMIT/);
	expect(rows[3]).toBeNull();
	rows.forEach((row, i) => {
		if (i === 3) return;
		expect(row).toMatchObject({
			id: batch[i].id,
			rider_id: batch[i].riderId,
			partner_id: batch[i].partnerId,
			mode: batch[i].mode,
			status: "searching",
			metadata: { n: i },
		});
		// What the single insert returns for the same order, field for field.
		expect(toOrder(row!)).toMatchObject({ pickup: batch[i].pickup, drop: batch[i].drop, distance: 4200, duration: 900, otp: "0421" });
	});
	expect(await countOrders(riding.riderId)).toBe(2);
});

it("with a key: one statement inserts the order and stores the 201 answer, equal to the answer sent (timestamps too)", async () => {
	for (let i = 0; i < 40; i++) {
		const order = newOrder();
		const claim = await claimFor("ptn_a", "test");
		statements.length = 0;
		const { row, claimLost } = await orders.insertOrder(order, claim, answerTemplate(order));
		expect(claimLost).toBe(false);
		expect(statements).toHaveLength(1);
		expect(row).not.toBeNull();
		const stored = await storedAnswer(claim);
		expect(stored.state).toBe("done");
		expect(stored.response_status).toBe(201);
		expect(stored.response_body).toEqual(toOrder(row!));
		expect(row).not.toHaveProperty("claim_held");
	}
});

it("with a key and an active ride: inserts nothing and leaves the claim running (create-order answers the active ride)", async () => {
	const first = newOrder();
	await orders.insertOrder(first, null);
	const claim = await claimFor("ptn_a", "test");
	const second = newOrder(first.riderId);
	expect(await orders.insertOrder(second, claim, answerTemplate(second))).toEqual({ row: null, claimLost: false });
	expect(await countOrders(first.riderId)).toBe(1);
	expect((await storedAnswer(claim)).state).toBe("running");
});

it("a claim taken over (or released) meanwhile inserts nothing and says so", async () => {
	const claim = await claimFor("ptn_a", "test");
	await seq.query("UPDATE idempotency_keys SET claim_token = $4 WHERE partner_id = $1 AND mode = $2 AND key = $3", {
		bind: [claim.partnerId, claim.mode, claim.key, randomUUID()],
	});
	const order = newOrder();
	expect(await orders.insertOrder(order, claim, answerTemplate(order))).toEqual({ row: null, claimLost: true });
	expect(await countOrders(order.riderId)).toBe(0);

	const released = await claimFor("ptn_a", "test");
	await keys.release(released);
	const other = newOrder();
	expect((await orders.insertOrder(other, released, answerTemplate(other))).claimLost).toBe(true);
	expect(await countOrders(other.riderId)).toBe(0);
});

it("a claim never crosses partners or modes: the same key held by another partner or mode does not let the insert through", async () => {
	const key = `shared-${randomUUID()}`;
	const mine = await claimFor("ptn_a", "test", key);
	const otherPartner = await claimFor("ptn_b", "test", key);
	const otherMode = await claimFor("ptn_a", "live", key);
	// A claim naming ptn_a/test with another holder's token is not held.
	for (const token of [otherPartner.token, otherMode.token]) {
		const order = newOrder();
		expect((await orders.insertOrder(order, { ...mine, token }, answerTemplate(order))).claimLost).toBe(true);
	}
	const order = newOrder();
	expect((await orders.insertOrder(order, mine, answerTemplate(order))).row).not.toBeNull();
	expect((await storedAnswer(mine)).state).toBe("done");
	expect((await storedAnswer(otherPartner)).state).toBe("running");
	expect((await storedAnswer(otherMode)).state).toBe("running");
});

it("20 concurrent keyed inserts for one rider: exactly one order, exactly one claim finished", async () => {
	const riderId = newId("rdr");
	const claims = await Promise.all(Array.from({ length: 20 }, () => claimFor("ptn_a", "test")));
	const outcomes = await Promise.all(
		claims.map((claim) => {
			const order = newOrder(riderId);
			return orders.insertOrder(order, claim, answerTemplate(order));
		}),
	);
	expect(outcomes.filter((o) => o.row !== null)).toHaveLength(1);
	expect(outcomes.every((o) => !o.claimLost)).toBe(true);
	expect(await countOrders(riderId)).toBe(1);
	const states = await Promise.all(claims.map(storedAnswer));
	expect(states.filter((s) => s.state === "done")).toHaveLength(1);
});

describe("the Idempotency-Key claim is one statement", () => {
	it("claims a free key, and answers a finished one (replay), a running one (in use) and another body (reused) in one round trip each", async () => {
		const key = `one-${randomUUID()}`;
		statements.length = 0;
		const first = await keys.claim("ptn_a", "test", key, "h1");
		expect(first.kind).toBe("claimed");
		expect(statements).toHaveLength(1);

		statements.length = 0;
		await expect(keys.claim("ptn_a", "test", key, "h1")).rejects.toMatchObject({ code: 409, type: "IDEMPOTENCY_KEY_IN_USE" });
		await expect(keys.claim("ptn_a", "test", key, "h2")).rejects.toMatchObject({ code: 422, type: "IDEMPOTENCY_KEY_REUSED" });
		expect(statements).toHaveLength(2);

		if (first.kind !== "claimed") throw new Error("unreachable");
		await keys.finish(first.claim, 201, { orderId: "ord_x" });
		statements.length = 0;
		expect(await keys.claim("ptn_a", "test", key, "h1")).toEqual({ kind: "replay", status: 201, body: { orderId: "ord_x" } });
		expect(statements).toHaveLength(1);
	});

	it("of 20 concurrent claims of one key exactly one wins; the rest are in use; other partners and modes claim the same key for themselves", async () => {
		const key = `race-${randomUUID()}`;
		const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => keys.claim("ptn_a", "live", key, "h")));
		expect(outcomes.filter((o) => o.status === "fulfilled" && o.value.kind === "claimed")).toHaveLength(1);
		for (const o of outcomes) if (o.status === "rejected") expect(o.reason).toMatchObject({ code: 409, type: "IDEMPOTENCY_KEY_IN_USE" });
		expect(outcomes.filter((o) => o.status === "rejected")).toHaveLength(19);
		// The same key is free for another partner and for the other mode (and never replays across them).
		expect((await keys.claim("ptn_b", "live", key, "h")).kind).toBe("claimed");
		expect((await keys.claim("ptn_a", "test", key, "other-body")).kind).toBe("claimed");
	});
});
