import type { Db } from "../../mixins/db.mixin";
import type { DeliveryState, RideEventKind } from "../../contracts/notifications";
import type { AttemptRecord, ClaimCaps, ClaimedRow, DeliveryStateRow, SnapshotPoint, StateCountRow, SweepResult } from "./delivery-rows";
import type { HostBreakerState } from "./host-breaker";

export type { AttemptRecord, ClaimCaps, ClaimedRow, DeliveryStateRow, StateCountRow, SweepResult } from "./delivery-rows";

/**
 * Every statement of webhook delivery, in one place so the design is
 * readable (docs/ARCHITECTURE.md, "Webhook delivery"). `ride_events` is
 * orders' table and is only read; `webhook_deliveries`/`webhook_attempts`
 * are ours. The statements come first, then NotificationsRepo, which runs
 * them with typed arguments and rows.
 */

/**
 * Location events older than the location lifetime are never sent (API.md:
 * dropped 120 s after they were made; `WEBHOOK_LOCATION_TTL_MS`). The
 * lifetime is a bind parameter in ms; this turns parameter `$n` into an interval.
 */
function locationTtl(n: number): string {
	return `make_interval(secs => $${n}::double precision / 1000)`;
}

/**
 * The host a delivery counts against (per-host cap, circuit breaker): the
 * webhook URL's host:port, lower-cased, without user info. The same
 * expression is in migration 002 for rows ingested before it.
 */
const WEBHOOK_HOST_SQL = "lower(COALESCE(substring(e.webhook_url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?([^/?#]*)'), ''))";

/** The columns an ingest writes, from ride event `e`; $n is the location lifetime ms. */
function ingestColumns(n: number): string {
	return `
INSERT INTO webhook_deliveries (event_id, order_id, partner_id, mode, kind, sequence, event_position, occurred_at, event_created_at, state, finished_at, host)
SELECT e.id, e.order_id, e.partner_id, e.mode, e.kind, e.sequence, e.position, e.occurred_at, e.created_at,
       CASE WHEN e.kind = 'location' AND e.created_at < now() - ${locationTtl(n)} THEN 'expired' ELSE 'pending' END,
       CASE WHEN e.kind = 'location' AND e.created_at < now() - ${locationTtl(n)} THEN now() END,
       ${WEBHOOK_HOST_SQL}`;
}

/**
 * Ingest: copy new ride events into the delivery table. Re-reads a window of
 * positions (see ingest-window.ts) and skips what is already there; with
 * several instances ON CONFLICT settles who inserted a row. Location events
 * already past their lifetime arrive as `expired`. Events made less than $4
 * ms ago are left to their hints (INGEST_IDS_SQL) and to the next scan: this
 * scan inserting the same fresh rows as a tick's hinted ingest made one wait
 * for the other's commit (a unique-index wait, seen in pg_stat_activity at
 * 500 events/s), and the tick is what deliveries wait for. A row that
 * commits late has an old created_at (its transaction's start), so it is
 * never left out because of this.
 * $1 lower bound (exclusive), $2 batch size, $3 location lifetime ms, $4 ms.
 */
const INGEST_SQL = `${ingestColumns(3)}
FROM ride_events e
WHERE e.position > $1
  AND e.created_at < now() - make_interval(secs => $4::double precision / 1000)
  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
ORDER BY e.position
LIMIT $2
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id`;

/**
 * Ingest of the events named by `orders.rideEventRecorded` hints: the same
 * copy, by primary key, so a hinted event is claimable at once without
 * re-reading the window (the window scan runs on the poll and catches every
 * event whose hint was lost). $1 event ids, $2 location lifetime ms.
 * Every ingest inserts in position order: two ingests inserting the same
 * rows in different orders each waited for the other's uncommitted row
 * (deadlocks in the soak, a window scan against a hinted ingest); in one
 * order, the one that is behind waits for the other to commit.
 */
const INGEST_IDS_SQL = `${ingestColumns(2)}
FROM ride_events e
WHERE e.id = ANY($1::text[])
  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
ORDER BY e.position
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id`;

/**
 * Largest ingested position now, and (start-up seed) the largest one
 * ingested more than $1 ms ago, or the safety net's cursor when that is
 * larger: everything at or below the cursor was swept once and for all. The
 * cursor is what keeps a restart from re-reading (and re-sending) old ride
 * events whose delivery rows retention has removed (retention.repo.ts).
 */
const MAX_POSITION_SQL = "SELECT COALESCE(max(event_position), 0) AS max_position FROM webhook_deliveries";
const SEED_POSITION_SQL = `
SELECT GREATEST(
  (SELECT COALESCE(max(event_position), 0) FROM webhook_deliveries
   WHERE ingested_at < now() - make_interval(secs => $1::double precision / 1000)),
  (SELECT COALESCE(max(position), 0) FROM webhook_ingest_cursor WHERE name = 'safety_net')) AS max_position`;

/**
 * Safety net (safety-net.ts): one look at where the database is, and one
 * page of a final range swept once: ride events with position in ($1, $2]
 * and no delivery row are ingested, in the same statement that moves the
 * shared cursor from $1 to $2 (compare-and-set: if another instance moved it,
 * nothing happens). $3 location lifetime ms.
 */
const SNAPSHOT_POINT_SQL = `
SELECT (SELECT COALESCE(max(position), 0) FROM ride_events) AS max_position,
       pg_snapshot_xmin(pg_current_snapshot())::text AS xmin, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax`;
const SAFETY_CURSOR_SQL = "SELECT position AS max_position FROM webhook_ingest_cursor WHERE name = 'safety_net'";
const SWEEP_LATE_SQL = `
WITH cur AS (
  UPDATE webhook_ingest_cursor SET position = $2 WHERE name = 'safety_net' AND position = $1 RETURNING position
), late AS (${ingestColumns(3)}
  FROM ride_events e, cur
  WHERE e.position > $1 AND e.position <= $2
    AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
  ORDER BY e.position
  ON CONFLICT (event_id) DO NOTHING
  RETURNING event_id, order_id, sequence
)
SELECT (SELECT count(*) FROM cur)::int AS moved, NULL AS event_id, NULL AS order_id, NULL::int AS sequence
UNION ALL SELECT NULL, event_id, order_id, sequence FROM late`;

/**
 * Location housekeeping: a pending location event that is not in flight is
 * `superseded` once any newer event of its ride exists (a newer position, or
 * a status event, which carries the latest position too) and `expired` once
 * past its lifetime. Keeps the pending count honest; the claim applies the
 * same rules, so nothing depends on this having run.
 * $1 location lifetime ms.
 */
const SETTLE_LOCATIONS_SQL = `
UPDATE webhook_deliveries d
SET state = CASE WHEN EXISTS (SELECT 1 FROM ride_events n WHERE n.order_id = d.order_id AND n.sequence > d.sequence)
                 THEN 'superseded' ELSE 'expired' END,
    finished_at = now(), lease_token = NULL, lease_owner = NULL, lease_until = NULL
WHERE d.state = 'pending' AND d.kind = 'location'
  AND (d.lease_until IS NULL OR d.lease_until < now())
  AND (d.event_created_at < now() - ${locationTtl(1)}
       OR EXISTS (SELECT 1 FROM ride_events n WHERE n.order_id = d.order_id AND n.sequence > d.sequence))
RETURNING d.event_id, d.state`;

/**
 * The claim: pick due events fairly and lease them to this instance,
 * committed before any HTTP call is made. It is the function
 * `webhook_claim_v4` (migrations/index.ts, 003, 004, 005 and 006), called as one
 * statement in its own transaction: when nothing is due and free for a kind
 * with free slots it answers at once (most calls: the tick after each
 * finished try); else it takes the claim lock (pg_advisory_xact_lock, one
 * claim at a time across instances, so in-flight counts are exact), then per
 * kind (status, then location; a kind with no free slot or nothing due and
 * free is skipped) runs the claim statement with a plan cached per session. One round
 * trip and no planning per call; the statement inline was four round trips
 * and re-planned every time (3-14 ms of planning, the bulk of a tick).
 *
 *  - fairness: the (partner, mode, host) triples with pending events of the
 *    kind are walked through the index (a loose index scan: one probe per
 *    triple, never the backlog). Each gets at most its (partner, mode)'s and
 *    its (partner, host)'s free room (the caps minus the leases in flight of
 *    that kind, counted over every instance); a (partner, host) whose breaker
 *    is open gets nothing, a half-open one a single probe. The host share and
 *    the breaker are per (partner, host): on a receiver shared by several
 *    partners, one partner's failing or slow path never pauses or fills it for
 *    another. The picks are ranked within each (partner, mode) and taken
 *    round-robin (every one's first, then every one's second, …), so a
 *    partner with a deep or slow backlog never holds all the slots, and a
 *    partner's test deliveries never take its live ones' slots (a test load
 *    test, a hanging test endpoint);
 *  - due: pending, next try time reached, not leased (or the lease expired:
 *    that instance died, so its events come back);
 *  - order: no earlier status event of the same ride is still undelivered,
 *    which is checked against ride_events itself (LEFT JOIN), so an earlier
 *    event that is not even ingested yet holds back the later ones too.
 *    `failed` counts as settled and no longer holds anything back; and no
 *    older location event of the ride is in flight (a position never
 *    reaches the partner after a later status event; the wait is one try);
 *  - location events: only while they are the newest event of their ride
 *    and younger than their lifetime (120 s by default; never sent after a
 *    newer one);
 *  - FOR UPDATE SKIP LOCKED: a row being recorded meanwhile is skipped, and
 *    READ COMMITTED re-checks the lease on the locked row.
 *
 * $1 status slots free, $2 location slots free, $3 lease token, $4 lease
 * owner, $5 lease ms, $6 location lifetime ms, $7 per-(partner, mode) cap,
 * $8 per-host cap (both per kind).
 */
export const CLAIM_SQL = "SELECT * FROM webhook_claim_v4($1::int, $2::int, $3::uuid, $4::text, $5::double precision, $6::double precision, $7::int, $8::int)";

/**
 * The circuit breaker of one partner's deliveries to one host
 * (host-breaker.ts has the rules; webhook_partner_hosts, migration 005). A
 * try that failed reads the row locked, the rules decide, and
 * HOST_FAILED_SQL writes it; an answer closes it in RECORD_SQL (no
 * statement of its own). Keyed by (partner, host) so that a partner whose
 * path on a shared receiver fails never pauses another partner's deliveries there.
 * $1 partner, $2 host; HOST_FAILED_SQL: $3 failures, $4 opens, $5 open for ms (null keeps open_until).
 */
const HOST_ENSURE_SQL = "INSERT INTO webhook_partner_hosts (partner_id, host) VALUES ($1, $2) ON CONFLICT (partner_id, host) DO NOTHING";
const HOST_READ_SQL = `
SELECT failures, opens, CASE WHEN open_until IS NULL THEN 'closed' WHEN open_until > now() THEN 'open' ELSE 'half-open' END AS phase
FROM webhook_partner_hosts WHERE partner_id = $1 AND host = $2 FOR UPDATE`;
const HOST_FAILED_SQL = `
UPDATE webhook_partner_hosts SET failures = $3::int, opens = $4::int, updated_at = now(),
  open_until = CASE WHEN $5::double precision IS NULL THEN open_until ELSE now() + make_interval(secs => $5::double precision / 1000) END
WHERE partner_id = $1 AND host = $2`;

/**
 * Records finished tries, many in one statement (the delivery loop groups
 * the tries that end while the previous group is being written: one
 * transaction and one WAL flush for all of them instead of one each, and one
 * pooled connection instead of one per try). Per try: the attempt row
 * always (visibility), and the event's new state only if this instance still
 * holds the claim (fencing by lease token: a try that outlived its lease must
 * not overwrite the newer claimer's bookkeeping). Every value is per try, so
 * tries of different partners, hosts and kinds share a group without
 * touching each other's rows. Returns the events whose state was updated.
 * $1 … $15 arrays, one element per try: event, lease token, new state, next
 * try (null = keep), try started, http status, outcome, duration ms, snippet,
 * attempt id, attempt number, first try of the round, host, instance, partner.
 */
const RECORD_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::int[], $7::text[], $8::int[],
                       $9::text[], $10::text[], $11::int[], $12::timestamptz[], $13::text[], $14::text[], $15::text[])
    AS i(event_id, lease_token, state, next_attempt_at, started_at, http_status, outcome, duration_ms,
         snippet, attempt_id, attempt, first_attempt_at, host, instance, partner_id)
), upd AS (
  UPDATE webhook_deliveries w SET
    attempts = w.attempts + 1,
    round_attempts = w.round_attempts + 1,
    first_attempt_at = COALESCE(w.first_attempt_at, i.first_attempt_at),
    last_attempt_at = i.started_at,
    last_status = i.http_status,
    last_error = CASE WHEN i.outcome = 'delivered' THEN NULL ELSE i.outcome END,
    state = i.state,
    next_attempt_at = COALESCE(i.next_attempt_at, w.next_attempt_at),
    delivered_at = CASE WHEN i.state = 'delivered' THEN now() ELSE w.delivered_at END,
    finished_at = CASE WHEN i.state = 'pending' THEN NULL ELSE now() END,
    lease_token = NULL, lease_owner = NULL, lease_until = NULL
  FROM input i
  WHERE w.event_id = i.event_id AND w.lease_token = i.lease_token
  RETURNING w.event_id, w.order_id, w.sequence, w.kind, i.state AS new_state, i.next_attempt_at AS new_next
), followers AS (
  -- Later events of the same ride wait for this one: not due before its next try
  -- (so the claim does not re-read a blocked backlog every poll), and due at once
  -- when it is settled. Only untried ones: a replayed event keeps its own schedule.
  -- Never one of the rows of upd: while a status event is in flight, no later
  -- event of its ride is (status events go in order, locations wait for status).
  UPDATE webhook_deliveries f
  SET next_attempt_at = CASE WHEN u.new_state = 'pending' THEN GREATEST(f.next_attempt_at, u.new_next)
                             ELSE LEAST(f.next_attempt_at, now()) END
  FROM upd u
  WHERE u.kind = 'status' AND f.order_id = u.order_id AND f.sequence > u.sequence
    AND f.state = 'pending' AND f.round_attempts = 0
), healed AS (
  -- The host answered (any HTTP status): the circuit breaker of this partner's deliveries to it, if any, closes.
  UPDATE webhook_partner_hosts h SET failures = 0, opens = 0, open_until = NULL, updated_at = now()
  WHERE (h.partner_id, h.host) IN (SELECT i.partner_id, i.host FROM input i WHERE i.http_status IS NOT NULL)
    AND (h.failures > 0 OR h.open_until IS NOT NULL)
), att AS (
  INSERT INTO webhook_attempts (id, event_id, attempt, started_at, duration_ms, http_status, outcome, response_snippet, instance)
  SELECT i.attempt_id, i.event_id, i.attempt, i.started_at, i.duration_ms, i.http_status, i.outcome, i.snippet, i.instance FROM input i
  -- A retry of a group whose commit went through but whose answer was lost: the rows are there already.
  ON CONFLICT (id) DO NOTHING
)
SELECT event_id FROM upd`;

/** A 2xx is the truth even when our lease was lost meanwhile (the event was delivered). */
const MARK_DELIVERED_SQL = `
WITH done AS (
  UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now(), finished_at = now(),
    last_status = $2::int, last_error = NULL, last_attempt_at = $3::timestamptz
  WHERE event_id = $1 AND state = 'pending'
  RETURNING order_id, sequence, kind
)
UPDATE webhook_deliveries f SET next_attempt_at = LEAST(f.next_attempt_at, now())
FROM done
WHERE done.kind = 'status' AND f.order_id = done.order_id AND f.sequence > done.sequence
  AND f.state = 'pending' AND f.round_attempts = 0`;

/** Gives a claim back without a try (no signing secret right now, or service stop). */
const RELEASE_SQL = `
UPDATE webhook_deliveries SET lease_token = NULL, lease_owner = NULL, lease_until = NULL,
  next_attempt_at = GREATEST(next_attempt_at, now() + make_interval(secs => $3::double precision / 1000))
WHERE event_id = $1 AND lease_token = $2::uuid`;

/** Service stop: every claim of this instance that did not get its try. */
const RELEASE_OWNER_SQL = `
UPDATE webhook_deliveries SET lease_token = NULL, lease_owner = NULL, lease_until = NULL
WHERE lease_owner = $1 AND state = 'pending'
RETURNING event_id`;

/**
 * Operators: send a status event again from the start of the schedule. Only
 * while orders still keeps the ride event (retention may have removed it:
 * there is nothing left to send).
 */
const REPLAY_SQL = `
UPDATE webhook_deliveries SET state = 'pending', round_attempts = 0, first_attempt_at = NULL,
  next_attempt_at = now(), finished_at = NULL
WHERE event_id = $1 AND kind = 'status' AND state <> 'pending'
  AND EXISTS (SELECT 1 FROM ride_events e WHERE e.id = webhook_deliveries.event_id)
RETURNING event_id`;

const REPLAY_FAILED_SQL = `
UPDATE webhook_deliveries SET state = 'pending', round_attempts = 0, first_attempt_at = NULL,
  next_attempt_at = now(), finished_at = NULL
WHERE partner_id = $1 AND state = 'failed' AND kind = 'status' AND occurred_at >= $2::timestamptz
  AND EXISTS (SELECT 1 FROM ride_events e WHERE e.id = webhook_deliveries.event_id)
RETURNING event_id`;

/** The delivery of one event, whatever its state. */
const DELIVERY_SQL = "SELECT state, kind FROM webhook_deliveries WHERE event_id = $1";

const STATES_SQL = `
SELECT event_id, state, attempts, last_status, last_error, last_attempt_at
FROM webhook_deliveries WHERE event_id = ANY($1::text[])`;

const COUNTS_SQL = `
SELECT state, count(*)::int AS n,
       EXTRACT(EPOCH FROM (now() - min(event_created_at)))::float AS oldest_age_s,
       count(*) FILTER (WHERE lease_until > now())::int AS in_flight
FROM webhook_deliveries GROUP BY state`;

/** Oldest pending age and pending count for the gauges (the partial index keeps it cheap). */
const PENDING_GAUGES_SQL = `
SELECT count(*)::int AS pending, COALESCE(EXTRACT(EPOCH FROM (now() - min(event_created_at))), 0)::float AS oldest_age_s
FROM webhook_deliveries WHERE state = 'pending'`;

const RECENT_ATTEMPTS_SQL = `
SELECT outcome, count(*)::int AS n FROM webhook_attempts WHERE started_at > now() - interval '1 hour' GROUP BY outcome`;

// ---- typed access (row types in delivery-rows.ts) ------------------------------------

/** Positions are bigserials: PostgreSQL sends them as strings. */
function position(rows: Array<{ max_position: string }>): number {
	return Number(rows[0]?.max_position ?? 0);
}

export class NotificationsRepo {
	constructor(private readonly db: Db) {}

	private async eventIds(sql: string, bind: unknown[]): Promise<string[]> {
		const rows = await this.db.rows<{ event_id: string }>(sql, bind);
		return rows.map((r) => r.event_id);
	}

	/** INGEST_SQL: how many ride events above `lowerBound`, made at least `minAgeMs` ago, were copied (at most `batch`). */
	async ingest(lowerBound: number, batch: number, locationTtlMs: number, minAgeMs = 0): Promise<number> {
		return (await this.eventIds(INGEST_SQL, [lowerBound, batch, locationTtlMs, minAgeMs])).length;
	}

	/** INGEST_IDS_SQL: how many of these ride events were copied (the others were already, or are not committed yet). */
	async ingestIds(eventIds: string[], locationTtlMs: number): Promise<number> {
		return (await this.eventIds(INGEST_IDS_SQL, [eventIds, locationTtlMs])).length;
	}

	async maxPosition(): Promise<number> {
		return position(await this.db.rows(MAX_POSITION_SQL));
	}

	/** Start-up seed of the ingest window: the largest position ingested more than `windowMs` ago. */
	async seedPosition(windowMs: number): Promise<number> {
		return position(await this.db.rows(SEED_POSITION_SQL, [windowMs]));
	}

	async settleLocations(locationTtlMs: number): Promise<void> {
		await this.db.run(SETTLE_LOCATIONS_SQL, [locationTtlMs]);
	}

	/** CLAIM_SQL: leases up to `statusLimit` status and `locationLimit` location events to `owner`, committed when it returns. */
	claim(
		statusLimit: number,
		locationLimit: number,
		leaseToken: string,
		owner: string,
		leaseMs: number,
		locationTtlMs: number,
		caps: ClaimCaps,
	): Promise<ClaimedRow[]> {
		return this.db.rows<ClaimedRow>(CLAIM_SQL, [statusLimit, locationLimit, leaseToken, owner, leaseMs, locationTtlMs, caps.partnerCap, caps.hostCap]);
	}

	/** A try of `partnerId`'s event to `host` failed: `decide` (host-breaker.ts) turns the locked state into the new one. Returns the decision. */
	hostFailed<T extends { failures: number; opens: number; openForMs: number | null }>(
		partnerId: string,
		host: string,
		decide: (state: HostBreakerState) => T,
	): Promise<T> {
		return this.db.tx(async (t) => {
			await this.db.run(HOST_ENSURE_SQL, [partnerId, host], t);
			const state = await this.db.row<HostBreakerState>(HOST_READ_SQL, [partnerId, host], t);
			const next = decide(state ?? { failures: 0, opens: 0, phase: "closed" });
			await this.db.run(HOST_FAILED_SQL, [partnerId, host, next.failures, next.opens, next.openForMs], t);
			return next;
		});
	}

	async snapshotPoint(): Promise<SnapshotPoint> {
		const [row] = await this.db.rows<{ max_position: string; xmin: string; xmax: string }>(SNAPSHOT_POINT_SQL);
		return { maxPosition: Number(row.max_position), xmin: BigInt(row.xmin), xmax: BigInt(row.xmax) };
	}

	async safetyNetCursor(): Promise<number> {
		return position(await this.db.rows(SAFETY_CURSOR_SQL));
	}

	/** SWEEP_LATE_SQL: ingests what is missing in positions (from, to] if the cursor is still at `from`. */
	async sweepLate(from: number, to: number, locationTtlMs: number): Promise<SweepResult> {
		const rows = await this.db.rows<{ moved: number | null; event_id: string | null; order_id: string | null; sequence: number | null }>(SWEEP_LATE_SQL, [
			from,
			to,
			locationTtlMs,
		]);
		const events = rows.filter((r) => r.event_id !== null).map((r) => ({ event_id: r.event_id!, order_id: r.order_id!, sequence: r.sequence! }));
		return { moved: rows.some((r) => r.moved !== null && r.moved > 0), events };
	}

	/** RECORD_SQL: records every try of `batch`; the ids of the events whose state was updated (the lease was still ours). */
	async recordAttempts(batch: readonly AttemptRecord[]): Promise<Set<string>> {
		const col = <K extends keyof AttemptRecord>(key: K) => batch.map((a) => a[key]);
		const ids = await this.eventIds(RECORD_SQL, [
			col("eventId"),
			col("leaseToken"),
			col("state"),
			col("nextAttemptAt"),
			col("startedAt"),
			col("httpStatus"),
			col("outcome"),
			col("durationMs"),
			col("snippet"),
			col("attemptId"),
			col("attempt"),
			col("firstAttemptAt"),
			col("host"),
			col("instance"),
			col("partnerId"),
		]);
		return new Set(ids);
	}

	async markDelivered(eventId: string, httpStatus: number | null, startedAt: string): Promise<void> {
		await this.db.run(MARK_DELIVERED_SQL, [eventId, httpStatus, startedAt]);
	}

	async release(eventId: string, leaseToken: string, delayMs: number): Promise<void> {
		await this.db.run(RELEASE_SQL, [eventId, leaseToken, delayMs]);
	}

	/** Gives back every claim of `owner` still pending; the ids released. */
	releaseOwner(owner: string): Promise<string[]> {
		return this.eventIds(RELEASE_OWNER_SQL, [owner]);
	}

	/** True when the status event was settled and is pending again. */
	async replay(eventId: string): Promise<boolean> {
		return (await this.eventIds(REPLAY_SQL, [eventId])).length > 0;
	}

	/** The failed status events of a partner since `since` (ISO), pending again. */
	replayFailed(partnerId: string, since: string): Promise<string[]> {
		return this.eventIds(REPLAY_FAILED_SQL, [partnerId, since]);
	}

	async delivery(eventId: string): Promise<{ state: DeliveryState; kind: RideEventKind } | undefined> {
		return this.db.row<{ state: DeliveryState; kind: RideEventKind }>(DELIVERY_SQL, [eventId]);
	}

	states(eventIds: string[]): Promise<DeliveryStateRow[]> {
		return this.db.rows<DeliveryStateRow>(STATES_SQL, [eventIds]);
	}

	countsByState(): Promise<StateCountRow[]> {
		return this.db.rows<StateCountRow>(COUNTS_SQL);
	}

	recentAttempts(): Promise<Array<{ outcome: string; n: number }>> {
		return this.db.rows(RECENT_ATTEMPTS_SQL);
	}

	async pendingGauges(): Promise<{ pending: number; oldestAgeSeconds: number }> {
		const row = await this.db.row<{ pending: number; oldest_age_s: number }>(PENDING_GAUGES_SQL);
		return { pending: row?.pending ?? 0, oldestAgeSeconds: row?.oldest_age_s ?? 0 };
	}
}
