import type { Transaction } from "sequelize";
import type { SandboxScenario } from "../../contracts/dispatch";
import type { Db } from "../../mixins/db.mixin";
import { DEADLINE, EXCLUDE, MS, NO_DRIVER_NEAR, type RideRow } from "./ride-mirror.repo";
import { haversineSql } from "./driven-distance";

/**
 * Matching's SQL (matching.ts): which searching rides are due a look and
 * when each looks again (`next_match_at`), `dispatch_offers`, the moving
 * rides due a location event, and the simulated fleet's inbox.
 */

export interface OfferRow {
	id: string;
	driver_id: string;
	state: string;
	distance_m: number;
	eta: number;
	created_at: Date;
	expires_at: Date;
	responded_at: Date | null;
}

export class MatchingRepo {
	constructor(private readonly db: Db) {}

	// ---- searching rides ----

	/** A searching ride due for matching, locked (SKIP LOCKED: another instance on it means skip), with its deadline state. */
	async lockDueSearch(orderId: string, dispatchTimeoutMs: number, t: Transaction) {
		const rows = await this.db.rows<RideRow & { timed_out: boolean; pending_expiry: Date | null }>(
			`SELECT r.*, (${DEADLINE("r.", "$2")} <= now()) AS timed_out,
				(SELECT o.expires_at FROM dispatch_offers o WHERE o.order_id = r.order_id AND o.state = 'pending') AS pending_expiry
			 FROM dispatch_rides r WHERE r.order_id = $1 AND r.state = 'searching' AND r.next_match_at <= now() FOR UPDATE SKIP LOCKED`,
			[orderId, dispatchTimeoutMs],
			t,
		);
		return rows[0];
	}

	async matchAgainAt(orderId: string, at: Date, t: Transaction): Promise<void> {
		await this.db.rows("UPDATE dispatch_rides SET next_match_at = $2, updated_at = now() WHERE order_id = $1", [orderId, at], t);
	}

	/**
	 * Nobody to offer the ride to: look again after a wait as long as the ride
	 * has been searching (so 1, 2, 4, 8 … s: exponential), at least `minMs`, at
	 * most `maxMs`, and never past its dispatch deadline (it ends on time; a scheduled ride's
	 * comes before its pickup time, `DEADLINE`).
	 * Something that changes its chances (a driver freed, online or moving
	 * near, an offer ending) wakes it earlier (`wakeSearches`, `excludeAndRematch`).
	 */
	async matchAgainBackoff(orderId: string, minMs: number, maxMs: number, dispatchTimeoutMs: number, t: Transaction): Promise<void> {
		await this.db.rows(
			`UPDATE dispatch_rides SET next_match_at = LEAST(
				now() + GREATEST($2::double precision, LEAST($3::double precision, EXTRACT(EPOCH FROM now() - search_started_at) * 1000)) ${MS},
				${DEADLINE("", "$4")})
			 WHERE order_id = $1`,
			[orderId, minMs, maxMs, dispatchTimeoutMs],
			t,
		);
	}

	/** Searching rides (of these) waiting out a backoff with no open offer are due now: a driver came within reach. Returns how many. */
	async wakeSearches(orderIds: string[]): Promise<number> {
		const rows = await this.db.rows<{ order_id: string }>(
			`UPDATE dispatch_rides r SET next_match_at = now()
			 WHERE r.order_id = ANY($1::text[]) AND r.state = 'searching' AND r.next_match_at > now()
			 AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = r.order_id AND o.state = 'pending')
			 RETURNING r.order_id`,
			[orderIds],
		);
		return rows.length;
	}

	/** The ride goes to the next driver, never to `driverId` again. */
	async excludeAndRematch(orderId: string, driverId: string, t: Transaction): Promise<void> {
		await this.db.rows(`UPDATE dispatch_rides SET next_match_at = now(), updated_at = now(), ${EXCLUDE("$2")} WHERE order_id = $1`, [orderId, driverId], t);
	}

	/**
	 * Up to `limit` searching rides due a look, in one statement that also
	 * backs off (as `matchAgainBackoff`) every one of them nobody could be
	 * offered: no available driver of its mode and type, not excluded for it,
	 * inside the search radius' bounding box, no pending offer, and its
	 * deadline not reached. Those come back `backed_off`; the rest (a driver
	 * near, an offer to settle, time to end it) are matched one by one. A
	 * backlog of rides nobody is near thus costs one statement per pass, not a
	 * transaction per ride. The rows are locked SKIP LOCKED for the statement,
	 * so instances share the work; a driver committing meanwhile wakes the
	 * rides near it (`wakeSearches`) after this statement's lock is gone.
	 */
	async dueSearches(
		limit: number,
		b: { minMs: number; maxMs: number; dispatchTimeoutMs: number; radiusM: number },
	): Promise<Array<{ order_id: string; backed_off: boolean }>> {
		return this.db.rows(
			`WITH due AS (
				SELECT order_id, mode, service_type, pickup_lat, pickup_lng, excluded_driver_ids, search_started_at, search_until, sandbox, next_match_at
				FROM dispatch_rides WHERE state = 'searching' AND next_match_at <= now()
				ORDER BY next_match_at LIMIT $1 FOR UPDATE SKIP LOCKED
			 ), nobody AS (
				UPDATE dispatch_rides r SET next_match_at = LEAST(
					now() + GREATEST($2::double precision, LEAST($3::double precision, EXTRACT(EPOCH FROM now() - r.search_started_at) * 1000)) ${MS},
					${DEADLINE("r.", "$4")})
				FROM due
				WHERE r.order_id = due.order_id
				AND ${DEADLINE("due.", "$4")} > now()
				AND due.sandbox IS DISTINCT FROM 'no_driver_found'
				AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = due.order_id AND o.state = 'pending')
				AND ${NO_DRIVER_NEAR({ mode: "due.mode", serviceType: "due.service_type", lat: "due.pickup_lat", lng: "due.pickup_lng", excluded: "due.excluded_driver_ids" }, "$5")}
				RETURNING r.order_id
			 )
			 SELECT due.order_id, (nobody.order_id IS NOT NULL) AS backed_off
			 FROM due LEFT JOIN nobody ON nobody.order_id = due.order_id ORDER BY due.next_match_at`,
			[limit, b.minMs, b.maxMs, b.dispatchTimeoutMs, b.radiusM / 111_320],
		);
	}

	/**
	 * Claims the moving rides due a location event by pushing their next due
	 * time forward (SKIP LOCKED: instances share the work); live rides at
	 * their own (real-time) cadence. The due rows come from a CTE, not an
	 * `IN (subquery)`: with the subquery, a planner without fresh statistics
	 * hash-joined it against every ride, closed ones included (1,470 rows read
	 * for 1 due); the CTE's at most 200 rows are joined by primary key.
	 * A started ride's driver position is sampled in the same update: the leg
	 * from the last sample (the pickup at first) is added to its driven
	 * distance (driven-distance.ts).
	 */
	async claimDueLocations(intervalMs: number, liveIntervalMs: number) {
		const started = "r.order_status = 'started' AND d.lat IS NOT NULL AND d.lng IS NOT NULL";
		const leg = haversineSql("COALESCE(r.driven_lat, r.pickup_lat)", "COALESCE(r.driven_lng, r.pickup_lng)", "d.lat", "d.lng");
		return this.db.rows<RideRow & { d_lat: number | null; d_lng: number | null; d_heading: number | null }>(
			`WITH due AS (
				SELECT order_id FROM dispatch_rides WHERE state = 'assigned' AND next_location_at <= now()
				ORDER BY next_location_at LIMIT 200 FOR UPDATE SKIP LOCKED
			 )
			 UPDATE dispatch_rides r SET next_location_at = now() + (CASE WHEN r.mode = 'live' THEN $2::double precision ELSE $1::double precision END) ${MS},
			   driven_m = CASE WHEN ${started} THEN r.driven_m + ${leg} ELSE r.driven_m END,
			   driven_lat = CASE WHEN ${started} THEN d.lat ELSE r.driven_lat END,
			   driven_lng = CASE WHEN ${started} THEN d.lng ELSE r.driven_lng END
			 FROM due, drivers d
			 WHERE r.order_id = due.order_id AND d.id = r.driver_id
			 RETURNING r.*, d.lat AS d_lat, d.lng AS d_lng, d.heading AS d_heading`,
			[intervalMs, liveIntervalMs],
		);
	}

	// ---- offers ----

	async insertOffer(o: { id: string; orderId: string; driverId: string; distanceM: number; eta: number; timeoutMs: number }, t: Transaction): Promise<Date> {
		const rows = await this.db.rows<{ expires_at: Date }>(
			`INSERT INTO dispatch_offers (id, order_id, driver_id, state, distance_m, eta, expires_at)
			 VALUES ($1, $2, $3, 'pending', $4, $5, now() + $6 ${MS}) RETURNING expires_at`,
			[o.id, o.orderId, o.driverId, o.distanceM, o.eta, o.timeoutMs],
			t,
		);
		return rows[0].expires_at;
	}

	/** The driver's open (pending, unexpired) offer of the ride is accepted. */
	async acceptOffer(orderId: string, driverId: string, t: Transaction): Promise<boolean> {
		const rows = await this.db.rows(
			`UPDATE dispatch_offers SET state = 'accepted', responded_at = now()
			 WHERE order_id = $1 AND driver_id = $2 AND state = 'pending' AND expires_at > now() RETURNING id`,
			[orderId, driverId],
			t,
		);
		return rows.length > 0;
	}

	/** Ends the driver's pending offer of the ride as declined, expired or cancelled. */
	async endOffer(orderId: string, driverId: string, how: "declined" | "expired" | "cancelled", t: Transaction): Promise<boolean> {
		const rows = await this.db.rows(
			"UPDATE dispatch_offers SET state = $3, responded_at = now() WHERE order_id = $1 AND driver_id = $2 AND state = 'pending' RETURNING id",
			[orderId, driverId, how],
			t,
		);
		return rows.length > 0;
	}

	/** Ends the ride's pending offers: `acceptedDriverId`'s as accepted, the others cancelled. */
	async settleOffers(orderId: string, t: Transaction, acceptedDriverId: string | null = null): Promise<void> {
		await this.db.rows(
			`UPDATE dispatch_offers SET state = CASE WHEN driver_id = $2 THEN 'accepted' ELSE 'cancelled' END, responded_at = now()
			 WHERE order_id = $1 AND state = 'pending'`,
			[orderId, acceptedDriverId],
			t,
		);
	}

	async expiredOffers(): Promise<Array<{ order_id: string; driver_id: string }>> {
		return this.db.rows("SELECT order_id, driver_id FROM dispatch_offers WHERE state = 'pending' AND expires_at <= now() ORDER BY expires_at LIMIT 200");
	}

	async offersOfRide(orderId: string): Promise<OfferRow[]> {
		return this.db.rows<OfferRow>("SELECT * FROM dispatch_offers WHERE order_id = $1 ORDER BY created_at, id", [orderId]);
	}

	/** The driver's pending offer with its ride. */
	async openOfferOf(driverId: string) {
		const rows = await this.db.rows<RideRow & { expires_at: Date; distance_m: number; eta: number }>(
			`SELECT r.*, o.expires_at, o.distance_m, o.eta FROM dispatch_offers o JOIN dispatch_rides r ON r.order_id = o.order_id
			 WHERE o.driver_id = $1 AND o.state = 'pending'`,
			[driverId],
		);
		return rows[0];
	}

	// ---- the simulated fleet's inbox (manual sandbox rides move only when advanced: sandbox-steps.ts) ----

	async simulatedOffers() {
		return this.db.rows<{ driver_id: string; order_id: string; created_at: Date; expires_at: Date; sandbox: SandboxScenario | null }>(
			`SELECT o.driver_id, o.order_id, o.created_at, o.expires_at, r.sandbox
			 FROM dispatch_offers o JOIN drivers d ON d.id = o.driver_id JOIN dispatch_rides r ON r.order_id = o.order_id
			 WHERE o.state = 'pending' AND d.simulated AND o.expires_at > now() AND r.sandbox IS DISTINCT FROM 'manual'`,
		);
	}

	async simulatedRides(): Promise<RideRow[]> {
		return this.db.rows<RideRow>(
			`SELECT r.* FROM dispatch_rides r JOIN drivers d ON d.id = r.driver_id
			 WHERE r.state = 'assigned' AND d.simulated AND d.status = 'on_trip' AND d.order_id = r.order_id AND r.sandbox IS DISTINCT FROM 'manual'`,
		);
	}

	/** Searching test-mode rides with no offer out, oldest first (the sandbox never serves live rides). */
	async unofferedSearches(): Promise<RideRow[]> {
		return this.db.rows<RideRow>(
			`SELECT r.* FROM dispatch_rides r WHERE r.state = 'searching' AND r.mode = 'test' AND r.sandbox IS DISTINCT FROM 'manual'
			 AND NOT EXISTS (SELECT 1 FROM dispatch_offers o WHERE o.order_id = r.order_id AND o.state = 'pending')
			 ORDER BY r.created_at LIMIT 500`,
		);
	}
}
