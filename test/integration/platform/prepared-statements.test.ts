import type { Sequelize } from "sequelize";
import { QueryTypes } from "sequelize";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { acquireSequelize, Db, preparedStatements, releaseSequelize, runMigrations } from "../../../mixins/db.mixin";
import { migrations } from "../../../services/dispatch/migrations";
import { DispatchRepo } from "../../../services/dispatch/dispatch.repo";
import { destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import { newId } from "../../../lib/ids";

/**
 * Prepared statements (mixins/db.mixin.ts, issue 9): each autocommit
 * statement with parameters is prepared once per connection, so PostgreSQL
 * neither parses nor (once a generic plan is chosen) plans it again; inside
 * a transaction statements go unnamed as before; a plan made stale by a
 * migration that adds a column is retried unnamed instead of failing; the
 * setting turns it off. One pooled connection per database here, so the
 * session that `pg_prepared_statements` describes is the one that ran the
 * statements.
 */

interface Prepared {
	statement: string;
	generic_plans: string;
	custom_plans: string;
}

const dbs: TestDatabase[] = [];
const pools: Sequelize[] = [];

async function pool(env: Record<string, string> = {}): Promise<{ seq: Sequelize; db: TestDatabase }> {
	const db = await createTestDatabase("prepared");
	dbs.push(db);
	const seq = acquireSequelize(db.url, { DB_POOL_MAX: "1", ...env });
	pools.push(seq);
	return { seq, db };
}

/** The statements this session has prepared (no parameters: itself never prepared). */
async function preparedOf(seq: Sequelize): Promise<Prepared[]> {
	return seq.query<Prepared>("SELECT statement, generic_plans::text, custom_plans::text FROM pg_prepared_statements", { type: QueryTypes.SELECT });
}

afterAll(async () => {
	for (const seq of pools) await releaseSequelize(seq);
	for (const db of dbs) await db.drop();
});

it("reads DB_PREPARED_STATEMENTS as on by default, and on/off words otherwise", () => {
	expect(preparedStatements({})).toBe(true);
	expect(preparedStatements({ DB_PREPARED_STATEMENTS: "off" })).toBe(false);
	expect(preparedStatements({ DB_PREPARED_STATEMENTS: "false" })).toBe(false);
	expect(preparedStatements({ DB_PREPARED_STATEMENTS: "ON" })).toBe(true);
	expect(() => preparedStatements({ DB_PREPARED_STATEMENTS: "sometimes" })).toThrow(/DB_PREPARED_STATEMENTS/);
});

it("prepares an autocommit statement with parameters once and reuses it; a transaction's statements go unnamed", async () => {
	const { seq } = await pool();
	const select = "SELECT $1::int + 1 AS n";
	for (const n of [1, 2, 3]) {
		const rows = await seq.query<{ n: number }>(select, { bind: [n], type: QueryTypes.SELECT });
		expect(rows).toEqual([{ n: n + 1 }]);
	}
	const inTransaction = "SELECT $1::int * 2 AS doubled";
	await seq.transaction(async (t) => {
		const rows = await seq.query<{ doubled: number }>(inTransaction, { bind: [21], type: QueryTypes.SELECT, transaction: t });
		expect(rows).toEqual([{ doubled: 42 }]);
	});
	const prepared = await preparedOf(seq);
	expect(prepared.map((p) => p.statement)).toEqual([select]);
	// Three executions of one prepared statement, not three statements.
	expect(Number(prepared[0].generic_plans) + Number(prepared[0].custom_plans)).toBe(3);
});

it("prepares nothing with DB_PREPARED_STATEMENTS=off", async () => {
	const { seq } = await pool({ DB_PREPARED_STATEMENTS: "off" });
	const rows = await seq.query<{ n: number }>("SELECT $1::int AS n", { bind: [7], type: QueryTypes.SELECT });
	expect(rows).toEqual([{ n: 7 }]);
	expect(await preparedOf(seq)).toEqual([]);
});

it("answers with the new column when a migration elsewhere adds one under a prepared SELECT * (retried unnamed, not an error)", async () => {
	const { seq, db } = await pool();
	await seq.query("CREATE TABLE rides_seen (id int PRIMARY KEY, name text NOT NULL)");
	await seq.query("INSERT INTO rides_seen VALUES (1, 'one')");
	const select = "SELECT * FROM rides_seen WHERE id = $1";
	expect(await seq.query(select, { bind: [1], type: QueryTypes.SELECT })).toEqual([{ id: 1, name: "one" }]);

	// Another instance's migration, on its own connection.
	const other = await connect(db.url);
	try {
		await other.query("ALTER TABLE rides_seen ADD COLUMN colour text NOT NULL DEFAULT 'blue'");
	} finally {
		await other.end();
	}

	expect(await seq.query(select, { bind: [1], type: QueryTypes.SELECT })).toEqual([{ id: 1, name: "one", colour: "blue" }]);
	expect(await seq.query(select, { bind: [1], type: QueryTypes.SELECT })).toEqual([{ id: 1, name: "one", colour: "blue" }]);
});

it("plans dispatch's batched new-ride insert once: PostgreSQL settles on a generic plan for it", async () => {
	const { seq, db } = await pool();
	await runMigrations(seq, { service: "dispatch", migrations }, db.url);
	const repo = new DispatchRepo(new Db(seq));
	const pickup: Point = { lat: 12.9716, lng: 77.5946 };
	const ride = () => ({
		orderId: newId("ord"),
		partnerId: "ptn_prepared",
		mode: "live" as const,
		serviceType: "cab" as const,
		pickup,
		drop: destinationPoint(pickup, 90, 3000),
		sandbox: null,
		seen: { version: 1, updatedAt: new Date().toISOString() },
	});
	for (let batch = 0; batch < 8; batch++) {
		const rides = Array.from({ length: 1 + (batch % 3) }, ride);
		expect(await repo.mirror.insertNewRides(rides, { retryMatchMs: 1000, dispatchTimeoutMs: 120_000, radiusM: 3000 })).toEqual(rides.map(() => true));
	}
	const insert = (await preparedOf(seq)).find((p) => p.statement.startsWith("INSERT INTO dispatch_rides"));
	// PostgreSQL tries five custom plans first; a generic plan that looked
	// dearer (the arrays' lengths unknown) would keep it planning every batch.
	expect(insert).toBeDefined();
	expect(Number(insert!.generic_plans)).toBeGreaterThan(0);
});
