import type { DeliveryState, RideEventKind } from "../../contracts/notifications";
import type { KeyMode } from "../../contracts/partners";

/** The rows and arguments of notifications.repo.ts's statements, typed. */

/** A leased event as the claim returns it, with what its try needs. */
export interface ClaimedRow {
	event_id: string;
	order_id: string;
	partner_id: string;
	/** The ride's mode: which of the partner's secrets signs, and the payload's and `Ride-Mode`'s value. */
	mode: KeyMode;
	kind: RideEventKind;
	/** host:port of the webhook URL (per-host cap, circuit breaker). */
	host: string;
	sequence: number;
	attempts: number;
	round_attempts: number;
	first_attempt_at: Date | null;
	occurred_at: Date;
	event_created_at: Date;
	webhook_url: string;
	payload: Record<string, unknown>;
}

export interface DeliveryStateRow {
	event_id: string;
	state: DeliveryState;
	attempts: number;
	last_status: number | null;
	last_error: string | null;
	last_attempt_at: Date | null;
}

export interface StateCountRow {
	state: DeliveryState;
	n: number;
	oldest_age_s: number | null;
	in_flight: number;
}

/** One finished try, as RECORD_SQL writes it. */
export interface AttemptRecord {
	eventId: string;
	leaseToken: string;
	state: DeliveryState;
	/** ISO time of the next try, or null to keep the current one. */
	nextAttemptAt: string | null;
	startedAt: string;
	httpStatus: number | null;
	outcome: string;
	durationMs: number;
	snippet: string;
	attemptId: string;
	attempt: number;
	instance: string;
	/** ISO time of the first try of this round. */
	firstAttemptAt: string;
	/** The host tried: an answer (httpStatus set) closes the circuit breaker of (partnerId, host). */
	host: string;
	partnerId: string;
}

/** The caps shared by every instance: tries in flight per partner and per (partner, host), each per kind. */
export interface ClaimCaps {
	partnerCap: number;
	hostCap: number;
}

/** One page of the safety net: whether this instance moved the cursor, and the events it ingested. */
export interface SweepResult {
	moved: boolean;
	events: Array<{ event_id: string; order_id: string; sequence: number }>;
}

/** Where the database is at one look. */
export interface SnapshotPoint {
	/** Largest visible ride_events position. */
	maxPosition: number;
	/** pg_current_snapshot(): the oldest running transaction id and the next one to be handed out. */
	xmin: bigint;
	xmax: bigint;
}
