import { Sequelize } from "sequelize";
import type { Client } from "pg";
import { Db, runMigrations } from "../../../mixins/db.mixin";
import { migrations } from "../../../services/notifications/migrations";
import { NotificationsRepo, type AttemptRecord } from "../../../services/notifications/notifications.repo";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";

/**
 * Tries are recorded in groups (one RECORD_SQL statement for the tries that
 * ended together). One group mixing two partners, two hosts, a success, a
 * retry and a try whose lease was lost meanwhile: every row gets exactly its
 * own outcome, the ride's later events follow only their own ride, only the
 * host that answered has its breaker closed, and a group written again after
 * a lost answer changes nothing.
 */

let db: TestDatabase;
let sequelize: Sequelize;
let pg: Client;
let repo: NotificationsRepo;

const TOKEN_A = "00000000-0000-4000-8000-00000000000a";
const TOKEN_B = "00000000-0000-4000-8000-00000000000b";
const TOKEN_OTHER = "00000000-0000-4000-8000-0000000000ff";

beforeAll(async () => {
	db = await createTestDatabase("whrecordbatch");
	sequelize = new Sequelize(db.url, { dialect: "postgres", logging: false, pool: { max: 2 } });
	await runMigrations(sequelize, { service: "notifications", migrations }, db.url);
	pg = await connect(db.url);
	repo = new NotificationsRepo(new Db(sequelize));
});

afterAll(async () => {
	await pg?.end();
	await sequelize?.close();
	await db?.drop();
});

async function delivery(eventId: string, partnerId: string, orderId: string, sequence: number, host: string, lease: string | null): Promise<void> {
	await pg.query(
		`INSERT INTO webhook_deliveries (event_id, order_id, partner_id, kind, sequence, event_position, occurred_at, event_created_at, host, lease_token, lease_owner, lease_until)
		 VALUES ($1, $2, $3, 'status', $4, $5, now(), now(), $6, $7::uuid, CASE WHEN $7::uuid IS NULL THEN NULL ELSE 'someone' END, CASE WHEN $7::uuid IS NULL THEN NULL ELSE now() + interval '1 minute' END)`,
		[eventId, orderId, partnerId, sequence, Math.floor(Math.random() * 1e9), host, lease],
	);
}

function attempt(eventId: string, leaseToken: string, partnerId: string, host: string, over: Partial<AttemptRecord>): AttemptRecord {
	const now = new Date().toISOString();
	return {
		eventId,
		leaseToken,
		state: "delivered",
		nextAttemptAt: null,
		startedAt: now,
		httpStatus: 200,
		outcome: "delivered",
		durationMs: 3,
		snippet: `answer of ${eventId}`,
		attemptId: `att_${eventId}`,
		attempt: 1,
		instance: "test/1",
		firstAttemptAt: now,
		host,
		partnerId,
		...over,
	};
}

it("records a mixed group of tries, each on its own row only", async () => {
	// Partner A: ride oA, first event failing (timeout), second waiting behind it. Partner B: ride oB, first delivered, second waiting.
	// Partner B again: ride oC, whose lease was taken over by another claim meanwhile.
	await delivery("evt_a1", "ptn_a", "ord_a", 1, "a.example:443", TOKEN_A);
	await delivery("evt_a2", "ptn_a", "ord_a", 2, "a.example:443", null);
	await delivery("evt_b1", "ptn_b", "ord_b", 1, "b.example:443", TOKEN_B);
	await delivery("evt_b2", "ptn_b", "ord_b", 2, "b.example:443", null);
	await delivery("evt_c1", "ptn_b", "ord_c", 1, "b.example:443", TOKEN_OTHER);
	await pg.query("UPDATE webhook_deliveries SET next_attempt_at = now() + interval '1 hour' WHERE event_id = 'evt_b2'");
	// Breakers are per (partner, host): partner A fails on B's receiver too, and B's answers there do not heal A.
	await pg.query(
		"INSERT INTO webhook_partner_hosts (partner_id, host, failures, opens) VALUES ('ptn_a', 'a.example:443', 2, 0), ('ptn_b', 'b.example:443', 3, 1), ('ptn_a', 'b.example:443', 4, 1)",
	);

	const retryAt = new Date(Date.now() + 5 * 60_000).toISOString();
	const group = [
		attempt("evt_a1", TOKEN_A, "ptn_a", "a.example:443", { state: "pending", nextAttemptAt: retryAt, httpStatus: null, outcome: "TIMEOUT", snippet: "" }),
		attempt("evt_b1", TOKEN_B, "ptn_b", "b.example:443", {}),
		// Our try of c1 outlived its lease: the attempt row is kept, the state belongs to the new holder.
		attempt("evt_c1", TOKEN_B, "ptn_b", "b.example:443", {}),
	];
	const updated = await repo.recordAttempts(group);
	expect([...updated].sort()).toEqual(["evt_a1", "evt_b1"]);

	const rows = new Map(
		(
			await pg.query("SELECT event_id, state, attempts, round_attempts, last_error, last_status, lease_token, next_attempt_at FROM webhook_deliveries")
		).rows.map((r) => [r.event_id, r]),
	);
	expect(rows.get("evt_a1")).toMatchObject({ state: "pending", attempts: 1, round_attempts: 1, last_error: "TIMEOUT", last_status: null, lease_token: null });
	expect(new Date(rows.get("evt_a1").next_attempt_at).toISOString()).toBe(retryAt);
	// A's next event waits for A's retry; B's next event is due now that B's first is delivered.
	expect(new Date(rows.get("evt_a2").next_attempt_at).getTime()).toBeGreaterThanOrEqual(Date.parse(retryAt));
	expect(new Date(rows.get("evt_b2").next_attempt_at).getTime()).toBeLessThanOrEqual(Date.now() + 1_000);
	expect(rows.get("evt_b1")).toMatchObject({ state: "delivered", attempts: 1, last_status: 200, last_error: null, lease_token: null });
	expect(rows.get("evt_c1")).toMatchObject({ state: "pending", attempts: 0, lease_token: TOKEN_OTHER });

	const attempts = (await pg.query("SELECT event_id, outcome, http_status, response_snippet FROM webhook_attempts ORDER BY event_id")).rows;
	expect(attempts).toEqual([
		{ event_id: "evt_a1", outcome: "TIMEOUT", http_status: null, response_snippet: "" },
		{ event_id: "evt_b1", outcome: "delivered", http_status: 200, response_snippet: "answer of evt_b1" },
		{ event_id: "evt_c1", outcome: "delivered", http_status: 200, response_snippet: "answer of evt_c1" },
	]);
	// Only the (partner, host) that answered closes its breaker.
	const hosts = new Map(
		(await pg.query("SELECT partner_id, host, failures, opens FROM webhook_partner_hosts")).rows.map((r) => [`${r.partner_id} ${r.host}`, r]),
	);
	expect(hosts.get("ptn_a a.example:443")).toMatchObject({ failures: 2 });
	expect(hosts.get("ptn_b b.example:443")).toMatchObject({ failures: 0, opens: 0 });
	expect(hosts.get("ptn_a b.example:443")).toMatchObject({ failures: 4, opens: 1 });

	// The same group again (its commit went through, the answer was lost): nothing changes, no error.
	expect((await repo.recordAttempts(group)).size).toBe(0);
	expect((await pg.query("SELECT count(*)::int AS n FROM webhook_attempts")).rows[0].n).toBe(3);
	expect((await pg.query("SELECT attempts FROM webhook_deliveries WHERE event_id = 'evt_a1'")).rows[0].attempts).toBe(1);
});
