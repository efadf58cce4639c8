import { randomUUID } from "node:crypto";
import type { Logger } from "moleculer";
import { newId } from "../../lib/ids";
import type { RideEventKind } from "../../contracts/notifications";
import { afterAttempt } from "./delivery-policy";
import type { DeliveryMetrics } from "./delivery-metrics";
import { afterHostFailure, hostVerdict } from "./host-breaker";
import { IngestWindow } from "./ingest-window";
import type { AttemptRecord, ClaimedRow, NotificationsRepo } from "./notifications.repo";
import type { NotificationsSettings } from "./notifications.settings";
import type { OutageWarnings } from "./outage-warnings";
import { SafetyNet } from "./safety-net";
import { signedHeaders, webhookBody, type SigningSecret } from "./signing";
import { KEY_MODES, type KeyMode } from "../../contracts/partners";
import type { AttemptResult, WebhookClient } from "./webhook-client";
import { WriteBatcher } from "./write-batcher";
import { API_VERSIONS, type ApiVersionTable, type JsonObject } from "../../contracts/versions";
import { servedVersion, webhookFromCore } from "../../lib/api-versions";

/**
 * The delivery cycle of one notifications instance: ingest new ride events
 * into `webhook_deliveries`, claim due ones with a lease, send each (signed),
 * record the try, and keep the tries in flight so a stop can drain them.
 *
 * The tick (on a hint, a finished try, or the poll) is kept short because
 * everything waiting for delivery waits for it: ingest of the hinted events by
 * id, then one claim for both kinds. The window scan, the safety net and the
 * location housekeeping run beside it on the poll (housekeeping), so their
 * cost, which grows with the ingest window, never delays a claim. Broker
 * events only speed things up: the poll's window scan ingests every event
 * whose hint was lost (a lost hint costs latency, never an event). Tries are
 * recorded in groups (write-batcher.ts). Status and location events have
 * their own slots (so neither kind starves the other), and the claim shares
 * them out fairly between partners and hosts (notifications.repo.ts,
 * CLAIM_SQL). See docs/ARCHITECTURE.md, "Webhook delivery".
 */

export interface DeliveryLoopDeps {
	repo: NotificationsRepo;
	client: WebhookClient;
	settings: NotificationsSettings;
	/** Owner of this instance's leases. */
	instanceId: string;
	logger: Logger;
	warnings: OutageWarnings;
	/** The partner's webhook signing secret(s) of one mode (partners.signingSecret; several during a rotation) and its pinned API version. */
	fetchSigningSecret(partnerId: string, mode: KeyMode): Promise<PartnerWebhookSigning>;
	/** The API versions webhooks are rendered in (contracts/versions.ts); this release's when absent. */
	apiVersions?: ApiVersionTable;
	/** Absent when the broker has metrics off. */
	metrics?: DeliveryMetrics;
}

/** How a partner's webhooks are signed and rendered, cached per (partner, mode) and dropped on partners.changed. */
export interface PartnerWebhookSigning {
	secrets: readonly SigningSecret[];
	/** The partner's pinned API version; absent (a partners instance older than versions): the first one. */
	apiVersion?: string;
}

/** Window-scan ingest statements per housekeeping round at most; the rest waits for the next round. */
const INGEST_ROUNDS = 20;
/** The window scan leaves events younger than the poll interval, at most this, to their hints. */
const FRESH_MAX_MS = 1_000;
/** Hinted event ids per ingest statement at most (the rest go in the next tick). */
const MAX_HINTED_PER_TICK = 1_000;
/** Hinted ids kept at most while ticks cannot keep up; past it they are dropped (the window scan finds those events). */
const MAX_HINTED = 20_000;
/** Tries recorded per statement at most. */
const RECORD_BATCH = 256;
/** The largest ingested position is observed at most this often (fewer observations only make the window bound more conservative). */
const OBSERVE_EVERY_MS = 500;
/** Location housekeeping at most this often; the claim applies the same rules, so nothing depends on it. */
const SETTLE_EVERY_MS = 2_000;
/** The secrets cache holds each (partner, mode) apart: one mode's secrets never sign the other's webhooks. */
const secretCacheKey = (partnerId: string, mode: KeyMode): string => `${partnerId}\u0000${mode}`;

/** A claim without a signing secret comes back this much later. */
const NO_SECRET_DELAY_MS = 5_000;
/** Cached signing secrets at most; the cache starts over past it. */
const MAX_CACHED_SECRETS = 10_000;
/** Snippet bytes kept with an attempt. */
const SNIPPET_CHARS = 1024;
/** How long a stop waits for a running tick to end. */
const STOP_TICK_WAIT_MS = 5_000;
/** How long a stop waits for tries it cut short to end. */
const STOP_ABORT_WAIT_MS = 2_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class DeliveryLoop {
	private window: IngestWindow | undefined;
	private lastObservedAt = 0;
	private lastSettleAt = 0;
	private lastSafetyNetAt = 0;
	private safetyNet: SafetyNet | undefined;
	/** Events named by hints, not yet ingested by this instance. */
	private hinted = new Set<string>();
	private housekeeping: Promise<void> | undefined;
	private readonly records: WriteBatcher<AttemptRecord, boolean>;
	private readonly inFlight = new Map<string, Promise<void>>();
	/** Tries in flight by kind (each kind has its own slots). */
	private readonly busy: Record<RideEventKind, number> = { status: 0, location: 0 };
	private readonly secrets = new Map<string, { signing: PartnerWebhookSigning; expires: number }>();
	private readonly apiVersions: ApiVersionTable;
	private pollTimer?: NodeJS.Timeout;
	private ticking = false;
	private tickAgain = false;
	private tickScheduled = false;
	private stopping = false;
	private readonly stopAbort = new AbortController();

	constructor(private readonly deps: DeliveryLoopDeps) {
		this.apiVersions = deps.apiVersions ?? API_VERSIONS;
		this.records = new WriteBatcher(async (batch) => {
			const updated = await deps.repo.recordAttempts(batch);
			return batch.map((a) => updated.has(a.eventId));
		}, RECORD_BATCH);
	}

	/** orders.rideEventRecorded: ingest this event in the next tick (by id) and claim it there. */
	hint(eventId: string): void {
		if (this.hinted.size < MAX_HINTED) this.hinted.add(eventId);
		this.requestTick();
	}

	/** partners.changed: the next try of this partner fetches its secrets and API version again (both modes). */
	forgetSigningSecret(partnerId: string): void {
		for (const mode of KEY_MODES) this.secrets.delete(secretCacheKey(partnerId, mode));
	}

	/** Tries of this instance in flight now. */
	get inFlightCount(): number {
		return this.inFlight.size;
	}

	start(): void {
		this.pollTimer = setInterval(() => this.poll(), this.deps.settings.pollMs);
		this.pollTimer.unref();
		this.poll();
	}

	/** The poll: housekeeping (window scan, safety net, locations) if the last round has ended, and a tick (retries that came due). */
	private poll(): void {
		if (this.stopping) return;
		this.housekeeping ??= this.housekeep().finally(() => {
			this.housekeeping = undefined;
		});
		this.requestTick();
	}

	private async housekeep(): Promise<void> {
		const { settings, warnings } = this.deps;
		try {
			// Events found here (their hint was lost, or they were written with none) are claimed by a tick at once.
			await this.ingestWindow();
		} catch (err) {
			warnings.warn("ingest", "Ingest of ride events failed (will retry)", err);
		}
		if (Date.now() - this.lastSettleAt >= SETTLE_EVERY_MS) {
			this.lastSettleAt = Date.now();
			await this.deps.repo
				.settleLocations(settings.locationTtlMs)
				.catch((err: unknown) => warnings.warn("settle", "Settling location events failed", err));
		}
	}

	/** Coalesces wake-ups: one tick at a time, and one more if asked while running. */
	requestTick(): void {
		if (this.stopping) return;
		if (this.ticking) {
			this.tickAgain = true;
			return;
		}
		if (this.tickScheduled) return;
		this.tickScheduled = true;
		setImmediate(() => {
			this.tickScheduled = false;
			void this.tick();
		});
	}

	private async tick(): Promise<void> {
		if (this.stopping || this.ticking) return;
		const { settings, warnings } = this.deps;
		this.ticking = true;
		try {
			if (this.hinted.size > 0) {
				const ids = [...this.hinted].slice(0, MAX_HINTED_PER_TICK);
				for (const id of ids) this.hinted.delete(id);
				if (this.hinted.size > 0) this.tickAgain = true;
				// An id not committed yet, or already ingested by another instance, copies nothing; the window scan is the net.
				await this.deps.repo
					.ingestIds(ids, settings.locationTtlMs)
					.catch((err: unknown) => warnings.warn("ingest", "Ingest of hinted ride events failed (will retry)", err));
			}
			await this.claimAndSend();
		} finally {
			this.ticking = false;
			if (this.tickAgain) {
				this.tickAgain = false;
				this.requestTick();
			}
		}
	}

	/** Claims due events of both kinds up to this instance's free slots of each, and starts their tries. */
	private async claimAndSend(): Promise<void> {
		const { settings, warnings } = this.deps;
		const free: Record<RideEventKind, number> = {
			status: settings.concurrency - this.busy.status,
			location: settings.locationConcurrency - this.busy.location,
		};
		if (this.stopping || (free.status <= 0 && free.location <= 0)) return;
		let rows: ClaimedRow[];
		const token = randomUUID();
		try {
			// Committed before any HTTP call is made.
			rows = await this.deps.repo.claim(
				Math.max(0, free.status),
				Math.max(0, free.location),
				token,
				this.deps.instanceId,
				settings.leaseMs,
				settings.locationTtlMs,
				{
					partnerCap: settings.partnerConcurrency,
					hostCap: settings.hostConcurrency,
				},
			);
		} catch (err) {
			warnings.warn("claim", "Claiming webhook deliveries failed (will retry)", err);
			return;
		}
		for (const row of rows) {
			const kind = row.kind;
			this.busy[kind] += 1;
			const promise = this.deliver(row, token)
				// Never an unhandled rejection: whatever went wrong, the lease runs out and the event is tried again.
				.catch((err: unknown) => warnings.warn("deliver", `Delivery of ${row.event_id} failed unexpectedly; it will be retried after its lease`, err))
				.finally(() => {
					this.inFlight.delete(row.event_id);
					this.busy[kind] -= 1;
					// A finished try may unblock the ride's next event: look again at once.
					this.requestTick();
				});
			this.inFlight.set(row.event_id, promise);
		}
	}

	/** Copies new ride events into webhook_deliveries by re-reading the window (see ingest-window.ts), and runs the safety net. */
	private async ingestWindow(): Promise<number> {
		const { repo, settings } = this.deps;
		this.window ??= new IngestWindow(settings.ingestWindowMs, await repo.seedPosition(settings.ingestWindowMs));
		const now = Date.now();
		const lower = this.window.lowerBound(now);
		let total = 0;
		for (let round = 0; round < INGEST_ROUNDS; round++) {
			// Events younger than a poll are left to their hints (and to the next scan, if the hint was lost).
			const copied = await repo.ingest(lower, settings.ingestBatch, settings.locationTtlMs, Math.min(settings.pollMs, FRESH_MAX_MS));
			total += copied;
			// What this round copied can be claimed while the next round reads on.
			if (copied > 0) this.requestTick();
			if (copied < settings.ingestBatch) break;
		}
		if (now - this.lastObservedAt >= OBSERVE_EVERY_MS) {
			this.window.observe(now, await repo.maxPosition());
			this.lastObservedAt = now;
		}
		if (now - this.lastSafetyNetAt >= settings.safetyNetMs) {
			this.lastSafetyNetAt = now;
			this.safetyNet ??= new SafetyNet({
				repo,
				logger: this.deps.logger,
				ingestWindowMs: settings.ingestWindowMs,
				locationTtlMs: settings.locationTtlMs,
				metrics: this.deps.metrics,
			});
			const late = await this.safetyNet.run(this.window.lowerBound(now));
			if (late > 0) this.requestTick();
			total += late;
		}
		return total;
	}

	/** One try of one claimed event: sign, send, record. */
	private async deliver(row: ClaimedRow, leaseToken: string): Promise<void> {
		const { repo, warnings } = this.deps;
		let signing: PartnerWebhookSigning;
		try {
			// The ride's mode picks the secrets: a test ride's webhook never verifies with the live secret.
			signing = await this.signingSecret(row.partner_id, row.mode);
		} catch (err) {
			// Not a try: nothing was sent. Give the claim back and look again shortly.
			warnings.warn(`secret:${row.partner_id}`, `No ${row.mode} signing secret for ${row.partner_id} right now; delivery postponed`, err);
			await repo.release(row.event_id, leaseToken, NO_SECRET_DELAY_MS).catch(() => undefined);
			return;
		}
		// Rendered in the partner's pinned version as it is now (a re-pin applies to the next try), which the signed body names.
		const version = servedVersion(this.apiVersions, undefined, signing.apiVersion);
		const body = webhookBody(webhookFromCore(this.apiVersions, version, row.payload as JsonObject), row.mode, version);
		const startedAt = Date.now();
		const headers = signedHeaders(signing.secrets, row.event_id, body, startedAt, row.mode, version);
		const result = await this.deps.client.send(row.webhook_url, { ...headers }, body, this.stopAbort.signal);
		if (this.stopAbort.signal.aborted && result.outcome !== "delivered") {
			// Cut short by a stop past its grace period: not the partner's fault, not a try.
			await repo.release(row.event_id, leaseToken, 0).catch(() => undefined);
			return;
		}
		this.deps.metrics?.attempt(row.kind, result.outcome, row.occurred_at);
		if (result.outcome !== "delivered") {
			this.deps.logger.debug(`Webhook ${row.event_id} (${row.order_id} #${row.sequence}) try failed: ${result.outcome} ${result.status ?? ""}`);
		}
		await this.record(row, leaseToken, result, startedAt);
	}

	private async signingSecret(partnerId: string, mode: KeyMode): Promise<PartnerWebhookSigning> {
		const now = Date.now();
		const key = secretCacheKey(partnerId, mode);
		const cached = this.secrets.get(key);
		if (cached && cached.expires > now) return cached.signing;
		const signing = await this.deps.fetchSigningSecret(partnerId, mode);
		if (this.secrets.size > MAX_CACHED_SECRETS) this.secrets.clear();
		this.secrets.set(key, { signing, expires: now + this.deps.settings.secretCacheMs });
		return signing;
	}

	private async record(row: ClaimedRow, leaseToken: string, result: AttemptResult, startedAt: number): Promise<void> {
		const { repo, settings, warnings } = this.deps;
		const decision = afterAttempt({
			kind: row.kind,
			outcome: result.outcome,
			roundAttemptsBefore: row.round_attempts,
			firstAttemptAt: row.first_attempt_at ? new Date(row.first_attempt_at).getTime() : undefined,
			attemptStartedAt: startedAt,
			eventCreatedAt: new Date(row.event_created_at).getTime(),
			locationTtlMs: settings.locationTtlMs,
			now: Date.now(),
			schedule: settings.retryScheduleMs,
			random: Math.random(),
			retryAfterMs: result.retryAfterMs,
		});
		const startedIso = new Date(startedAt).toISOString();
		const attempt = {
			eventId: row.event_id,
			leaseToken,
			state: decision.state,
			nextAttemptAt: decision.state === "pending" ? new Date(decision.nextAttemptAt).toISOString() : null,
			startedAt: startedIso,
			httpStatus: result.status,
			outcome: result.outcome,
			durationMs: Math.round(result.durationMs),
			// PostgreSQL text cannot hold U+0000.
			// eslint-disable-next-line no-control-regex
			snippet: result.snippet.slice(0, SNIPPET_CHARS).replace(/\u0000/g, ""),
			attemptId: newId("att"),
			attempt: row.attempts + 1,
			instance: this.deps.instanceId,
			firstAttemptAt: row.first_attempt_at ? new Date(row.first_attempt_at).toISOString() : startedIso,
			host: row.host,
			partnerId: row.partner_id,
		};
		// The database may be briefly away (restart, cut connections): keep trying while the lease is still ours.
		const updated = await this.withRetries(
			`recording ${row.event_id}`,
			() => this.records.submit(attempt),
			settings.leaseMs - (Date.now() - startedAt) - 1_000,
		).catch((err: unknown) => {
			// Unrecorded: the lease runs out and the event is tried again (at least once).
			warnings.warn("record", `Could not record the try of ${row.event_id}; it will be retried after its lease`, err);
			return undefined;
		});
		if (updated === false && decision.state === "delivered") {
			// A 2xx is the truth even when our lease was lost meanwhile.
			await repo
				.markDelivered(row.event_id, result.status, startedIso)
				.catch((err: unknown) => warnings.warn("record", `Could not mark ${row.event_id} delivered`, err));
		}
		if (hostVerdict(result.outcome) === "failure") await this.hostFailed(row.partner_id, row.host);
		if (decision.state === "failed") {
			this.deps.logger.warn(`Webhook ${row.event_id} of ${row.order_id} failed after its last try (${result.outcome}); replay with notifications.replay`);
		}
	}

	/**
	 * The circuit breaker of `partnerId`'s deliveries to `host` (host-breaker.ts); state in PostgreSQL, so every
	 * instance pauses them together. Per (partner, host): other partners on the same receiver are not paused.
	 */
	private async hostFailed(partnerId: string, host: string): Promise<void> {
		const { settings } = this.deps;
		const rules = { failureThreshold: settings.breakerFailures, openMs: settings.breakerOpenMs, maxOpenMs: settings.breakerMaxOpenMs };
		try {
			const next = await this.deps.repo.hostFailed(partnerId, host, (state) => afterHostFailure(state, rules));
			if (next.openForMs !== null) {
				this.deps.metrics?.breakerOpened();
				this.deps.logger.warn(
					`Webhook host ${host} failed ${next.failures} time(s) in a row for partner ${partnerId}: that partner's deliveries to it paused for ${next.openForMs} ms (circuit open), then one probe`,
				);
			}
		} catch (err) {
			this.deps.warnings.warn("breaker", `Could not update the circuit breaker of ${host} (partner ${partnerId})`, err);
		}
	}

	private async withRetries<T>(what: string, fn: () => Promise<T>, budgetMs: number): Promise<T> {
		const deadline = Date.now() + Math.max(budgetMs, 0);
		let wait = 200;
		for (;;) {
			try {
				return await fn();
			} catch (err) {
				if (Date.now() + wait > deadline) throw err;
				this.deps.warnings.warn(`retry:${what}`, `${what} failed, retrying`, err);
				await sleep(wait);
				wait = Math.min(wait * 2, 3_000);
			}
		}
	}

	/**
	 * Graceful stop: no new claims, let tries in flight finish and be recorded
	 * (bounded by the grace period), cut the rest short, and give back every
	 * claim that did not get its try.
	 */
	async stop(): Promise<void> {
		const { logger, settings, warnings } = this.deps;
		this.stopping = true;
		if (this.pollTimer) clearInterval(this.pollTimer);
		const waitTicks = Date.now() + STOP_TICK_WAIT_MS;
		while ((this.ticking || this.housekeeping) && Date.now() < waitTicks) await sleep(20);
		const pending = [...this.inFlight.values()];
		if (pending.length > 0) {
			logger.info(`Waiting for ${pending.length} webhook tries in flight`);
			const grace = sleep(settings.stopGraceMs).then(() => "timeout");
			const outcome = await Promise.race([Promise.allSettled(pending).then(() => "done"), grace]);
			if (outcome === "timeout") {
				this.stopAbort.abort();
				await Promise.race([Promise.allSettled(pending), sleep(STOP_ABORT_WAIT_MS)]);
			}
		}
		try {
			const released = await this.deps.repo.releaseOwner(this.deps.instanceId);
			if (released.length > 0) logger.info(`Released ${released.length} unfinished webhook claim(s)`);
		} catch (err) {
			warnings.warn("release", "Could not release claims at stop; their leases will expire", err);
		}
	}
}
