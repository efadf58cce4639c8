/**
 * The create-order ceiling of the stack itself: a bare moleculer-web with one
 * route POST /ride/create-order → bench.create, a fastest-validator action
 * that inserts ONE row per request through Sequelize (the pool and driver the
 * platform uses, DB_POOL_MAX connections) into a table shaped like pgbench's
 * (a partial unique index), and answers the new id. No authentication, no
 * second table, no event: whatever the platform does per order comes on top.
 *
 * CEILING=contract: the least an order must write, in one statement (one
 * round trip, one implicit transaction): the rider, upserted by phone into
 * a table with a unique index, and the order, referencing it, into the
 * table above. What no create-order can undercut while it keeps riders and
 * orders (the contract's two records) in PostgreSQL.
 *
 * DATABASE_URL names the (throw-away) database. Prints "listening <port>".
 */
import { ServiceBroker } from "moleculer";
import { QueryTypes, Sequelize } from "sequelize";
import { bareApiService, listeningPort } from "./bare-api";

const sequelize = new Sequelize(process.env.DATABASE_URL!, {
	dialect: "postgres",
	logging: false,
	pool: { max: Number(process.env.DB_POOL_MAX || 10), min: 0, idle: 10_000, acquire: 30_000 },
});
const contract = process.env.CEILING === "contract";
const CONTRACT_INSERT = `WITH rider AS (
	INSERT INTO bench_riders (phone, name) VALUES ($1, $2)
	ON CONFLICT (phone) DO UPDATE SET name = EXCLUDED.name
	RETURNING id
)
INSERT INTO bench_orders (rider) SELECT id::text FROM rider RETURNING id`;
const point = { type: "object", props: { lat: { type: "number", min: -90, max: 90 }, lng: { type: "number", min: -180, max: 180 } } };

const broker = new ServiceBroker({ nodeID: `bench-insert-${process.pid}`, logger: false });
broker.createService({
	name: "bench",
	actions: {
		create: {
			params: {
				user: { type: "object", props: { name: { type: "string", max: 100 }, phone: { type: "string", max: 20 } } },
				serviceType: { type: "enum", values: ["scooty", "cab"] },
				pickup: point,
				drop: point,
				webhookURL: { type: "string", max: 2048 },
				metadata: { type: "object", optional: true },
			},
			async handler(ctx: { params: { user: { name: string; phone: string } } }) {
				const { name, phone } = ctx.params.user;
				const rows = await sequelize.query<{ id: string }>(contract ? CONTRACT_INSERT : "INSERT INTO bench_orders (rider) VALUES ($1) RETURNING id", {
					bind: contract ? [phone, name] : [phone],
					type: QueryTypes.SELECT,
				});
				return { orderId: rows[0].id };
			},
		},
	},
});
broker.createService(bareApiService({ "POST create-order": "bench.create" }));

void (async () => {
	await sequelize.query(
		"CREATE TABLE IF NOT EXISTS bench_orders (id bigserial PRIMARY KEY, rider text NOT NULL, active boolean NOT NULL DEFAULT true, created_at timestamptz NOT NULL DEFAULT now())",
	);
	await sequelize.query("CREATE UNIQUE INDEX IF NOT EXISTS bench_orders_one_active ON bench_orders (rider) WHERE active");
	await sequelize.query("CREATE TABLE IF NOT EXISTS bench_riders (id bigserial PRIMARY KEY, phone text NOT NULL UNIQUE, name text NOT NULL)");
	await broker.start();
	console.log(`listening ${listeningPort(broker)}`);
})();
process.on(
	"SIGTERM",
	() =>
		void broker
			.stop()
			.then(() => sequelize.close())
			.then(() => process.exit(0)),
);
