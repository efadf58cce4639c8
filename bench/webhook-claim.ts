/**
 * The cost of one claim and one ingest of webhook delivery at a given backlog
 * (prints figures, asserts nothing):
 *
 *   flock /tmp/bench.lock npx tsx bench/webhook-claim.ts [backlog=5000] [rides=500]
 *
 * A throw-away database on the server PostgreSQL; partners, riders, pricing
 * and orders in this process create the rides, the notifications migrations
 * are applied by hand (no notifications service runs, nothing is sent). The
 * backlog is written as ride_events rows (status events, sequence = version,
 * as orders writes them) and ingested. Then, each inside a transaction that
 * is rolled back (so every round sees the same backlog):
 *   - EXPLAIN (ANALYZE) of the claim statement: planning and execution time
 *     (since migration 003 the statement is a call of webhook_claim_v1, whose
 *     inner plan is cached per session, so its first call is planned here);
 *   - N claims through NotificationsRepo, wall time per call (what the
 *     delivery loop pays, round trips included), for both kinds, and with
 *     every pending event leased (nothing to take: the tick after a try).
 */
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Sequelize, QueryTypes } from "sequelize";
import { Db, runMigrations } from "../mixins/db.mixin";
import { migrations } from "../services/notifications/migrations";
import { CLAIM_SQL, NotificationsRepo } from "../services/notifications/notifications.repo";
import { createTestDatabase, TEST_NATS_URL } from "../test/helpers/db";
import { startTestNode, uniqueNamespace } from "../test/helpers/node";
import { createPartner, createRide } from "../test/helpers/webhooks";

const BACKLOG = Number(process.argv[2] || 5000);
const RIDES = Number(process.argv[3] || 500);
const ROUNDS = 30;

async function main(): Promise<void> {
	void TEST_NATS_URL;
	const db = await createTestDatabase("benchclaim");
	const node = await startTestNode({
		databaseUrl: db.url,
		services: ["partners", "riders", "pricing", "orders"],
		nats: { namespace: uniqueNamespace("claim") },
		env: { LOGLEVEL: "warn" },
	});
	const sequelize = new Sequelize(db.url, { dialect: "postgres", logging: false, pool: { max: 4 } });
	try {
		await runMigrations(sequelize, { service: "notifications", migrations }, db.url);
		const partner = await createPartner(node.broker);
		for (let i = 0; i < RIDES; i += 50) {
			await Promise.all(Array.from({ length: Math.min(50, RIDES - i) }, () => createRide(node.broker, partner, "http://127.0.0.1:9/hooks")));
		}
		// BACKLOG status events spread over the rides, in sequence per ride (after whatever orders.create wrote).
		await sequelize.query(
			`WITH o AS (SELECT id, partner_id, webhook_url, version, row_number() OVER (ORDER BY id) - 1 AS k FROM orders),
			      n AS (SELECT g FROM generate_series(0, $1::int - 1) g)
			 INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
			 SELECT 'evt_b' || n.g, o.id, o.partner_id, o.version + 1 + n.g / $2::int, 'status', 'accepted', o.webhook_url,
			        jsonb_build_object('eventId', 'evt_b' || n.g, 'orderId', o.id, 'status', 'accepted', 'sequence', o.version + 1 + n.g / $2::int), now()
			 FROM n JOIN o ON o.k = n.g % $2::int`,
			{ bind: [BACKLOG, RIDES] },
		);
		const repo = new NotificationsRepo(new Db(sequelize));
		let ingested = 0;
		for (;;) {
			const n = await repo.ingest(0, 500, 120_000);
			ingested += n;
			if (n < 500) break;
		}
		await sequelize.query("ANALYZE");
		console.log(`webhook-claim: ${RIDES} rides, ${ingested} pending status events`);

		const args = (kind: string) => [
			kind === "status" ? 64 : 0,
			kind === "location" ? 64 : 0,
			"00000000-0000-0000-0000-000000000000",
			"bench",
			45_000,
			120_000,
			64,
			64,
		];
		for (const kind of ["status", "location"]) {
			const t = await sequelize.transaction();
			const rows = await sequelize.query<Record<string, string>>(`EXPLAIN (ANALYZE, SUMMARY) ${CLAIM_SQL}`, {
				bind: args(kind),
				type: QueryTypes.SELECT,
				transaction: t,
			});
			await t.rollback();
			const plan = rows.map((r) => r["QUERY PLAN"]);
			console.log(`  EXPLAIN ${kind}: ${plan.filter((l) => /Planning Time|Execution Time/.test(l)).join(", ")}`);
		}
		for (const kind of ["status", "location"] as const) {
			const times: number[] = [];
			let got = 0;
			for (let i = 0; i < ROUNDS; i++) {
				const t0 = performance.now();
				const rows = await repo.claim(kind === "status" ? 64 : 0, kind === "location" ? 64 : 0, randomUUID(), "bench", 45_000, 120_000, {
					partnerCap: 64,
					hostCap: 64,
				});
				times.push(performance.now() - t0);
				got = rows.length;
				// Give the claims back so every round sees the same backlog.
				await sequelize.query("UPDATE webhook_deliveries SET lease_token = NULL, lease_owner = NULL, lease_until = NULL WHERE lease_owner = 'bench'");
			}
			times.sort((a, b) => a - b);
			console.log(
				`  repo.claim ${kind}: ${got} rows, median ${times[Math.floor(ROUNDS / 2)].toFixed(2)} ms, min ${times[0].toFixed(2)} ms, max ${times[ROUNDS - 1].toFixed(2)} ms (${ROUNDS} calls)`,
			);
		}
		{
			// Everything pending is in flight (leased): what the tick after a finished try costs when there is nothing to take.
			await sequelize.query(
				"UPDATE webhook_deliveries SET lease_token = gen_random_uuid(), lease_owner = 'other', lease_until = now() + interval '1 hour' WHERE state = 'pending'",
			);
			const times: number[] = [];
			for (let i = 0; i < ROUNDS; i++) {
				const t0 = performance.now();
				await repo.claim(64, 32, randomUUID(), "bench", 45_000, 120_000, { partnerCap: 64, hostCap: 64 });
				times.push(performance.now() - t0);
			}
			await sequelize.query("UPDATE webhook_deliveries SET lease_token = NULL, lease_owner = NULL, lease_until = NULL WHERE lease_owner = 'other'");
			times.sort((a, b) => a - b);
			console.log(
				`  repo.claim, every pending event leased (nothing to take): median ${times[Math.floor(ROUNDS / 2)].toFixed(2)} ms, min ${times[0].toFixed(2)} ms`,
			);
		}
		const times: number[] = [];
		for (let i = 0; i < ROUNDS; i++) {
			const t0 = performance.now();
			await repo.ingest(0, 500, 120_000);
			times.push(performance.now() - t0);
		}
		times.sort((a, b) => a - b);
		console.log(`  repo.ingest over the whole window (nothing new): median ${times[Math.floor(ROUNDS / 2)].toFixed(2)} ms, min ${times[0].toFixed(2)} ms`);
	} finally {
		await sequelize.close();
		await node.stop();
		// BENCH_KEEP_DB=1: keep the database to look at plans by hand.
		if (process.env.BENCH_KEEP_DB === "1") console.log(`  kept ${db.url}`);
		else await db.drop();
	}
}

main().catch((err: unknown) => {
	console.error(err);
	process.exit(1);
});
