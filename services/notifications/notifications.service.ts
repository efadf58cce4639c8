import { randomUUID } from "node:crypto";
import type { Context, Service, ServiceSchema } from "moleculer";
import { QueryTypes } from "sequelize";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { ApiError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { readSettings } from "../../lib/settings";
import { migrations } from "./migrations";
import { DEFAULT_RETRY_SCHEDULE_MS } from "./retry-schedule";
import { afterAttempt, LOCATION_TTL_MS, type DeliveryState } from "./delivery-policy";
import { signedHeaders, webhookBody } from "./signing";
import { createWebhookClient, type AttemptResult, type WebhookClient } from "./webhook-client";
import { IngestWindow } from "./ingest-window";
import {
	CLAIM_SQL,
	COUNTS_SQL,
	INGEST_SQL,
	MARK_DELIVERED_SQL,
	MAX_POSITION_SQL,
	PENDING_GAUGES_SQL,
	RECENT_ATTEMPTS_SQL,
	RECORD_SQL,
	RELEASE_OWNER_SQL,
	RELEASE_SQL,
	REPLAY_FAILED_SQL,
	REPLAY_SQL,
	SEED_POSITION_SQL,
	SETTLE_LOCATIONS_SQL,
	STATES_SQL,
} from "./delivery-sql";

/**
 * Notifications: delivers webhooks from the transactional outbox
 * (`ride_events`, written by orders in the ride's own transaction). Broker
 * events only wake it up; it also polls, so a lost hint costs latency, never
 * an event. Work is claimed in PostgreSQL with a lease, so any number of
 * instances share the load, and a crashed instance's claims come back when
 * the lease runs out. See docs/ARCHITECTURE.md, "Webhook delivery".
 */

// ---- action parameters and results -------------------------------------------------

export interface DeliveryStatesParams {
	eventIds: string[];
}
export interface EventDeliveryState {
	/** `pending` | `delivered` | `failed`; location events may also end `superseded` or `expired` (never sent, by design). */
	state: DeliveryState;
	attempts: number;
	lastStatus: number | null;
	/** Error class of the last failed try: TIMEOUT, CONNECTION, DNS, BLOCKED_ADDRESS, HTTP_3XX, HTTP_4XX, HTTP_5XX. */
	lastError: string | null;
	lastAttemptAt: string | null;
}
export type DeliveryStatesResult = Record<string, EventDeliveryState>;

export interface ReplayParams {
	eventId: string;
}
export interface ReplayResult {
	eventId: string;
	replayed: boolean;
	state: DeliveryState;
}
export interface ReplayFailedParams {
	partnerId: string;
	since: Date;
}
export interface ReplayFailedResult {
	partnerId: string;
	since: string;
	replayed: number;
	eventIds: string[];
}
export interface StatsResult {
	states: Record<DeliveryState, number>;
	inFlight: number;
	oldestPendingAgeSeconds: number | null;
	attemptsLastHour: Record<string, number>;
	instance: { id: string; inFlight: number };
}

interface RideEventRecordedEvent {
	orderId: string;
	eventId: string;
	kind: "status" | "location";
}

// ---- internals ---------------------------------------------------------------------

interface ClaimedRow {
	event_id: string;
	order_id: string;
	partner_id: string;
	kind: "status" | "location";
	sequence: number;
	attempts: number;
	round_attempts: number;
	first_attempt_at: Date | null;
	occurred_at: Date;
	event_created_at: Date;
	webhook_url: string;
	payload: Record<string, unknown>;
}

interface NotificationsSettings {
	/** Poll interval; broker hints make it faster, never required. */
	pollMs: number;
	/** Deliveries in flight per instance. */
	concurrency: number;
	/** How long a claim is ours; must outlast one try (timeout) plus recording it. */
	leaseMs: number;
	/** Per-try deadline (contract: 10 s). */
	timeoutMs: number;
	/** Ride-event rows read per ingest statement. */
	ingestBatch: number;
	/** See ingest-window.ts. */
	ingestWindowMs: number;
	/** How long a partner's signing secret is trusted without asking partners again. */
	secretCacheMs: number;
	/** How long a stopping instance waits for its tries in flight. */
	stopGraceMs: number;
	/** Retry schedule: offsets after the first try. */
	retryScheduleMs: number[];
	/** A location event is dropped this long after it was made (contract: 120 s; `WEBHOOK_LOCATION_TTL_MS`). */
	locationTtlMs: number;
	allowPrivate: boolean;
}

interface InFlight {
	promise: Promise<void>;
}

interface NotificationsLocal {
	instanceId: string;
	client: WebhookClient;
	window: IngestWindow | undefined;
	lastObservedAt: number;
	inFlight: Map<string, InFlight>;
	secrets: Map<string, { secret: string; expires: number }>;
	pollTimer?: NodeJS.Timeout;
	gaugeTimer?: NodeJS.Timeout;
	ticking: boolean;
	tickAgain: boolean;
	tickScheduled: boolean;
	stopping: boolean;
	stopAbort: AbortController;
	lastSettleAt: number;
	lastWarnAt: Map<string, number>;
	metricsOn: boolean;
}

interface NotificationsMethods {
	requestTick(): void;
	tick(): Promise<void>;
	ingest(): Promise<number>;
	settleLocations(): Promise<void>;
	claim(limit: number, leaseToken: string): Promise<ClaimedRow[]>;
	deliver(row: ClaimedRow, leaseToken: string): Promise<void>;
	signingSecret(partnerId: string): Promise<string>;
	record(row: ClaimedRow, leaseToken: string, result: AttemptResult, startedAt: number): Promise<void>;
	release(eventId: string, leaseToken: string, delayMs: number): Promise<void>;
	withRetries<T>(what: string, fn: () => Promise<T>, budgetMs: number): Promise<T>;
	updateGauges(): Promise<void>;
	warnThrottled(key: string, message: string, err?: unknown): void;
}

type NotificationsThis = Service<NotificationsSettings> & NotificationsMethods & NotificationsLocal & DbThis;

const METRIC_ATTEMPTS = "webhook.attempts.total";
const METRIC_LATENCY = "webhook.delivery.latency";
const METRIC_PENDING = "webhook.pending.count";
const METRIC_OLDEST = "webhook.pending.oldest.age";

const ALL_STATES: DeliveryState[] = ["pending", "delivered", "failed", "superseded", "expired"];

function positiveNumber(value: string | undefined, fallback: number): number {
	const n = Number(value);
	return value !== undefined && value !== "" && Number.isFinite(n) && n > 0 ? n : fallback;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const NotificationsService: ServiceSchema<NotificationsSettings, NotificationsMethods, NotificationsLocal & DbThis> = {
	name: "notifications",
	mixins: [DbMixin({ service: "notifications", migrations })],
	settings: {
		pollMs: 1_000,
		concurrency: 64,
		leaseMs: 45_000,
		timeoutMs: 10_000,
		ingestBatch: 500,
		ingestWindowMs: 120_000,
		secretCacheMs: 60_000,
		stopGraceMs: 12_000,
		retryScheduleMs: [...DEFAULT_RETRY_SCHEDULE_MS],
		locationTtlMs: LOCATION_TTL_MS,
		allowPrivate: false,
	},

	actions: {
		/** Delivery state per event (orders' /ride/events). Unknown or not yet ingested ids are `pending` with no tries. */
		deliveryStates: {
			access: "internal",
			params: { eventIds: { type: "array", items: { type: "string", min: 1, max: 100 }, max: 10_000 } },
			async handler(this: NotificationsThis, ctx: Context<DeliveryStatesParams>): Promise<DeliveryStatesResult> {
				const ids = [...new Set(ctx.params.eventIds)];
				const result: DeliveryStatesResult = {};
				for (const id of ids) result[id] = { state: "pending", attempts: 0, lastStatus: null, lastError: null, lastAttemptAt: null };
				if (ids.length === 0) return result;
				const rows = await this.sequelize.query<{
					event_id: string;
					state: DeliveryState;
					attempts: number;
					last_status: number | null;
					last_error: string | null;
					last_attempt_at: Date | null;
				}>(STATES_SQL, { bind: [ids], type: QueryTypes.SELECT });
				for (const r of rows) {
					result[r.event_id] = {
						state: r.state,
						attempts: r.attempts,
						lastStatus: r.last_status,
						lastError: r.last_error,
						lastAttemptAt: r.last_attempt_at ? new Date(r.last_attempt_at).toISOString() : null,
					};
				}
				return result;
			},
		},

		/** Operators: send one status event again from the start of the schedule. REPL: `call notifications.replay --eventId evt_…` */
		replay: {
			access: "internal",
			params: { eventId: { type: "string", min: 1, max: 100 } },
			async handler(this: NotificationsThis, ctx: Context<ReplayParams>): Promise<ReplayResult> {
				const rows = await this.sequelize.query<{ event_id: string }>(REPLAY_SQL, { bind: [ctx.params.eventId], type: QueryTypes.SELECT });
				if (rows.length > 0) {
					this.logger.info(`Replay of ${ctx.params.eventId} requested`);
					this.requestTick();
					return { eventId: ctx.params.eventId, replayed: true, state: "pending" };
				}
				const current = await this.sequelize.query<{ state: DeliveryState; kind: string }>(
					"SELECT state, kind FROM webhook_deliveries WHERE event_id = $1",
					{ bind: [ctx.params.eventId], type: QueryTypes.SELECT },
				);
				if (!current[0]) throw new ApiError(404, "NOT_FOUND", "Unknown event (or not picked up for delivery yet)");
				if (current[0].kind === "location") {
					throw new ApiError(409, "CONFLICT", "Location events are only worth their newest value and are not replayed");
				}
				return { eventId: ctx.params.eventId, replayed: false, state: current[0].state };
			},
		},

		/** Operators: replay every failed status event of a partner that occurred since a time. REPL: `call notifications.replayFailed --partnerId ptn_… --since 2026-01-01T00:00:00Z` */
		replayFailed: {
			access: "internal",
			params: {
				partnerId: { type: "string", min: 1, max: 100 },
				since: { type: "date", convert: true },
			},
			async handler(this: NotificationsThis, ctx: Context<ReplayFailedParams>): Promise<ReplayFailedResult> {
				const since = new Date(ctx.params.since);
				const rows = await this.sequelize.query<{ event_id: string }>(REPLAY_FAILED_SQL, {
					bind: [ctx.params.partnerId, since.toISOString()],
					type: QueryTypes.SELECT,
				});
				this.logger.info(`Replay of ${rows.length} failed event(s) of ${ctx.params.partnerId} since ${since.toISOString()} requested`);
				if (rows.length > 0) this.requestTick();
				return { partnerId: ctx.params.partnerId, since: since.toISOString(), replayed: rows.length, eventIds: rows.map((r) => r.event_id) };
			},
		},

		/** Operators: delivery backlog and recent outcomes. REPL: `call notifications.stats` */
		stats: {
			access: "internal",
			async handler(this: NotificationsThis): Promise<StatsResult> {
				const counts = await this.sequelize.query<{ state: DeliveryState; n: number; oldest_age_s: number | null; in_flight: number }>(COUNTS_SQL, {
					type: QueryTypes.SELECT,
				});
				const attempts = await this.sequelize.query<{ outcome: string; n: number }>(RECENT_ATTEMPTS_SQL, { type: QueryTypes.SELECT });
				const states = Object.fromEntries(ALL_STATES.map((s) => [s, 0])) as Record<DeliveryState, number>;
				let inFlight = 0;
				let oldest: number | null = null;
				for (const c of counts) {
					states[c.state] = c.n;
					if (c.state === "pending") {
						inFlight = c.in_flight;
						oldest = c.oldest_age_s === null ? null : Math.round(c.oldest_age_s);
					}
				}
				return {
					states,
					inFlight,
					oldestPendingAgeSeconds: oldest,
					attemptsLastHour: Object.fromEntries(attempts.map((a) => [a.outcome, a.n])),
					instance: { id: this.instanceId, inFlight: this.inFlight.size },
				};
			},
		},
	},

	events: {
		/** A hint from orders after its commit: look now instead of at the next poll. */
		"orders.rideEventRecorded": {
			handler(this: NotificationsThis, ctx: Context<RideEventRecordedEvent>) {
				void ctx;
				this.requestTick();
			},
		},
	},

	methods: {
		/** Coalesces wake-ups: one tick at a time, and one more if asked while running. */
		requestTick(this: NotificationsThis) {
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
		},

		async tick(this: NotificationsThis) {
			if (this.stopping || this.ticking) return;
			this.ticking = true;
			try {
				try {
					await this.ingest();
				} catch (err) {
					this.warnThrottled("ingest", "Ingest of ride events failed (will retry)", err);
				}
				if (Date.now() - this.lastSettleAt >= 2_000) {
					this.lastSettleAt = Date.now();
					await this.settleLocations().catch((err: unknown) => this.warnThrottled("settle", "Settling location events failed", err));
				}
				while (!this.stopping) {
					const free = this.settings.concurrency - this.inFlight.size;
					if (free <= 0) break;
					let rows: ClaimedRow[];
					const token = randomUUID();
					try {
						rows = await this.claim(free, token);
					} catch (err) {
						this.warnThrottled("claim", "Claiming webhook deliveries failed (will retry)", err);
						break;
					}
					for (const row of rows) {
						const promise = this.deliver(row, token)
							// Never an unhandled rejection: whatever went wrong, the lease runs out and the event is tried again.
							.catch((err: unknown) => this.warnThrottled("deliver", `Delivery of ${row.event_id} failed unexpectedly; it will be retried after its lease`, err))
							.finally(() => {
								this.inFlight.delete(row.event_id);
								// A finished try may unblock the ride's next event: look again at once.
								this.requestTick();
							});
						this.inFlight.set(row.event_id, { promise });
					}
					if (rows.length < free) break;
				}
			} finally {
				this.ticking = false;
				if (this.tickAgain) {
					this.tickAgain = false;
					this.requestTick();
				}
			}
		},

		/** Copies new ride events into webhook_deliveries (see ingest-window.ts for the window). */
		async ingest(this: NotificationsThis): Promise<number> {
			if (!this.window) {
				const seed = await this.sequelize.query<{ max_position: string }>(SEED_POSITION_SQL, {
					bind: [this.settings.ingestWindowMs],
					type: QueryTypes.SELECT,
				});
				this.window = new IngestWindow(this.settings.ingestWindowMs, Number(seed[0]?.max_position ?? 0));
			}
			const now = Date.now();
			const lower = this.window.lowerBound(now);
			let total = 0;
			for (let round = 0; round < 20; round++) {
				const rows = await this.sequelize.query<{ event_id: string }>(INGEST_SQL, {
					bind: [lower, this.settings.ingestBatch, this.settings.locationTtlMs],
					type: QueryTypes.SELECT,
				});
				total += rows.length;
				if (rows.length < this.settings.ingestBatch) break;
			}
			// Observe at most twice a second: fewer observations only make the bound more conservative.
			if (now - this.lastObservedAt >= 500) {
				const max = await this.sequelize.query<{ max_position: string }>(MAX_POSITION_SQL, { type: QueryTypes.SELECT });
				this.window.observe(now, Number(max[0]?.max_position ?? 0));
				this.lastObservedAt = now;
			}
			return total;
		},

		async settleLocations(this: NotificationsThis) {
			await this.sequelize.query(SETTLE_LOCATIONS_SQL, { bind: [this.settings.locationTtlMs] });
		},

		/** Leases up to `limit` due events to this instance (CLAIM_SQL); committed before any HTTP call. */
		async claim(this: NotificationsThis, limit: number, leaseToken: string): Promise<ClaimedRow[]> {
			return this.sequelize.query<ClaimedRow>(CLAIM_SQL, {
				bind: [limit, leaseToken, this.instanceId, this.settings.leaseMs, this.settings.locationTtlMs],
				type: QueryTypes.SELECT,
			});
		},

		/** One try of one claimed event: sign, send, record. */
		async deliver(this: NotificationsThis, row: ClaimedRow, leaseToken: string) {
			let secret: string;
			try {
				secret = await this.signingSecret(row.partner_id);
			} catch (err) {
				// Not a try: nothing was sent. Give the claim back and look again shortly.
				this.warnThrottled(`secret:${row.partner_id}`, `No signing secret for ${row.partner_id} right now; delivery postponed`, err);
				await this.release(row.event_id, leaseToken, 5_000).catch(() => undefined);
				return;
			}
			const body = webhookBody(row.payload);
			const startedAt = Date.now();
			const headers = signedHeaders(secret, row.event_id, body, startedAt);
			const result = await this.client.send(row.webhook_url, { ...headers }, body, this.stopAbort.signal);
			if (this.stopAbort.signal.aborted && result.outcome !== "delivered") {
				// Cut short by a stop past its grace period: not the partner's fault, not a try.
				await this.release(row.event_id, leaseToken, 0).catch(() => undefined);
				return;
			}
			if (this.metricsOn) {
				this.broker.metrics.increment(METRIC_ATTEMPTS, { outcome: result.outcome, kind: row.kind });
				if (result.outcome === "delivered") {
					this.broker.metrics.observe(METRIC_LATENCY, (Date.now() - new Date(row.occurred_at).getTime()) / 1000, { kind: row.kind });
				}
			}
			if (result.outcome !== "delivered") {
				this.logger.debug(`Webhook ${row.event_id} (${row.order_id} #${row.sequence}) try failed: ${result.outcome} ${result.status ?? ""}`);
			}
			await this.record(row, leaseToken, result, startedAt);
		},

		async signingSecret(this: NotificationsThis, partnerId: string): Promise<string> {
			const now = Date.now();
			const cached = this.secrets.get(partnerId);
			if (cached && cached.expires > now) return cached.secret;
			const answer = await this.broker.call<{ partnerId: string; webhookSecret: string }, { partnerId: string }>("partners.signingSecret", { partnerId });
			if (this.secrets.size > 10_000) this.secrets.clear();
			this.secrets.set(partnerId, { secret: answer.webhookSecret, expires: now + this.settings.secretCacheMs });
			return answer.webhookSecret;
		},

		async record(this: NotificationsThis, row: ClaimedRow, leaseToken: string, result: AttemptResult, startedAt: number) {
			const decision = afterAttempt({
				kind: row.kind,
				outcome: result.outcome,
				roundAttemptsBefore: row.round_attempts,
				firstAttemptAt: row.first_attempt_at ? new Date(row.first_attempt_at).getTime() : undefined,
				attemptStartedAt: startedAt,
				eventCreatedAt: new Date(row.event_created_at).getTime(),
				locationTtlMs: this.settings.locationTtlMs,
				now: Date.now(),
				schedule: this.settings.retryScheduleMs,
				random: Math.random(),
				retryAfterMs: result.retryAfterMs,
			});
			const next = decision.state === "pending" ? new Date(decision.nextAttemptAt).toISOString() : null;
			const startedIso = new Date(startedAt).toISOString();
			const firstIso = row.first_attempt_at ? new Date(row.first_attempt_at).toISOString() : startedIso;
			const attemptId = newId("att");
			// The database may be briefly away (restart, cut connections): keep trying while the lease is still ours.
			const updated = await this.withRetries(
				`recording ${row.event_id}`,
				async () => {
					const rows = await this.sequelize.query<{ updated: number }>(RECORD_SQL, {
						bind: [
							row.event_id,
							leaseToken,
							decision.state,
							next,
							startedIso,
							result.status,
							result.outcome,
							Math.round(result.durationMs),
							result.snippet.slice(0, 1024).replace(/\u0000/g, ""),
							attemptId,
							row.attempts + 1,
							this.instanceId,
							firstIso,
						],
						type: QueryTypes.SELECT,
					});
					return rows[0]?.updated ?? 0;
				},
				this.settings.leaseMs - (Date.now() - startedAt) - 1_000,
			).catch((err: unknown) => {
				// Unrecorded: the lease runs out and the event is tried again (at least once).
				this.warnThrottled("record", `Could not record the try of ${row.event_id}; it will be retried after its lease`, err);
				return -1;
			});
			if (updated === 0 && decision.state === "delivered") {
				await this.sequelize
					.query(MARK_DELIVERED_SQL, { bind: [row.event_id, result.status, startedIso] })
					.catch((err: unknown) => this.warnThrottled("record", `Could not mark ${row.event_id} delivered`, err));
			}
			if (decision.state === "failed") {
				this.logger.warn(`Webhook ${row.event_id} of ${row.order_id} failed after its last try (${result.outcome}); replay with notifications.replay`);
			}
		},

		async release(this: NotificationsThis, eventId: string, leaseToken: string, delayMs: number) {
			await this.sequelize.query(RELEASE_SQL, { bind: [eventId, leaseToken, delayMs] });
		},

		async withRetries<T>(this: NotificationsThis, what: string, fn: () => Promise<T>, budgetMs: number): Promise<T> {
			const deadline = Date.now() + Math.max(budgetMs, 0);
			let wait = 200;
			for (;;) {
				try {
					return await fn();
				} catch (err) {
					if (Date.now() + wait > deadline) throw err;
					this.warnThrottled(`retry:${what}`, `${what} failed, retrying`, err);
					await sleep(wait);
					wait = Math.min(wait * 2, 3_000);
				}
			}
		},

		async updateGauges(this: NotificationsThis) {
			const rows = await this.sequelize.query<{ pending: number; oldest_age_s: number }>(PENDING_GAUGES_SQL, { type: QueryTypes.SELECT });
			this.broker.metrics.set(METRIC_PENDING, rows[0]?.pending ?? 0);
			this.broker.metrics.set(METRIC_OLDEST, rows[0]?.oldest_age_s ?? 0);
		},

		/** Outages make every tick fail the same way: say it once per 30 s, without SQL or secrets. */
		warnThrottled(this: NotificationsThis, key: string, message: string, err?: unknown) {
			const now = Date.now();
			if ((this.lastWarnAt.get(key) ?? 0) > now - 30_000) return;
			this.lastWarnAt.set(key, now);
			const e = err as { name?: string; original?: { code?: string }; parent?: { code?: string }; code?: string } | undefined;
			const code = e?.original?.code ?? e?.parent?.code ?? e?.code;
			if (code === "42P01") {
				// ride_events is orders' table: before orders has migrated there is simply nothing to deliver yet.
				this.logger.info(`${message}: ride_events does not exist yet (orders not migrated); waiting`);
				return;
			}
			this.logger.warn(err ? `${message}: ${e?.name ?? "Error"}${code ? ` (${code})` : ""}` : message);
		},
	},

	created(this: NotificationsThis) {
		const env = process.env;
		const settings = readSettings(env);
		this.settings.allowPrivate = settings.webhookAllowPrivate;
		if (settings.webhookRetryScheduleMs) this.settings.retryScheduleMs = settings.webhookRetryScheduleMs;
		this.settings.timeoutMs = positiveNumber(env.WEBHOOK_TIMEOUT_MS, this.settings.timeoutMs);
		this.settings.pollMs = positiveNumber(env.WEBHOOK_POLL_MS, this.settings.pollMs);
		this.settings.concurrency = Math.floor(positiveNumber(env.WEBHOOK_CONCURRENCY, this.settings.concurrency));
		this.settings.ingestWindowMs = positiveNumber(env.WEBHOOK_INGEST_WINDOW_MS, this.settings.ingestWindowMs);
		this.settings.locationTtlMs = positiveNumber(env.WEBHOOK_LOCATION_TTL_MS, this.settings.locationTtlMs);
		// A claim must outlive one try plus its bookkeeping.
		this.settings.leaseMs = Math.max(positiveNumber(env.WEBHOOK_LEASE_MS, this.settings.leaseMs), this.settings.timeoutMs + 5_000);
		this.settings.stopGraceMs = this.settings.timeoutMs + 2_000;

		this.instanceId = `${this.broker.nodeID}/${randomUUID().slice(0, 8)}`;
		this.client = createWebhookClient({ allowPrivate: this.settings.allowPrivate, timeoutMs: this.settings.timeoutMs });
		this.window = undefined;
		this.lastObservedAt = 0;
		this.inFlight = new Map();
		this.secrets = new Map();
		this.ticking = false;
		this.tickAgain = false;
		this.tickScheduled = false;
		this.stopping = false;
		this.stopAbort = new AbortController();
		this.lastSettleAt = 0;
		this.lastWarnAt = new Map();

		this.metricsOn = this.broker.isMetricsEnabled();
		if (this.metricsOn) {
			const m = this.broker.metrics;
			if (!m.hasMetric(METRIC_ATTEMPTS)) {
				m.register({ type: "counter", name: METRIC_ATTEMPTS, labelNames: ["outcome", "kind"], description: "Webhook tries by outcome (delivered or error class)" });
				m.register({
					type: "histogram",
					name: METRIC_LATENCY,
					labelNames: ["kind"],
					unit: "second",
					buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 86400],
					description: "End-to-end webhook latency, event occurred → delivered",
				});
				m.register({ type: "gauge", name: METRIC_PENDING, description: "Webhook events not delivered yet" });
				m.register({ type: "gauge", name: METRIC_OLDEST, unit: "second", description: "Age of the oldest undelivered webhook event" });
			}
		}
	},

	async started(this: NotificationsThis) {
		this.pollTimer = setInterval(() => this.requestTick(), this.settings.pollMs);
		this.pollTimer.unref();
		if (this.metricsOn) {
			this.gaugeTimer = setInterval(() => {
				this.updateGauges().catch((err: unknown) => this.warnThrottled("gauges", "Updating delivery gauges failed", err));
			}, 5_000);
			this.gaugeTimer.unref();
		}
		this.logger.info(
			`Webhook delivery ${this.instanceId}: poll ${this.settings.pollMs} ms, ${this.settings.concurrency} in flight, timeout ${this.settings.timeoutMs} ms, ` +
				`private targets ${this.settings.allowPrivate ? "allowed" : "refused"}, retries at ${this.settings.retryScheduleMs.length} offsets, ` +
				`location events dropped after ${this.settings.locationTtlMs} ms`,
		);
		this.requestTick();
	},

	/**
	 * Graceful stop (runs before the DB mixin closes the pool): no new claims,
	 * let tries in flight finish and be recorded (bounded by the timeout),
	 * cut the rest short, and give back every claim that did not get its try.
	 */
	async stopped(this: NotificationsThis) {
		this.stopping = true;
		if (this.pollTimer) clearInterval(this.pollTimer);
		if (this.gaugeTimer) clearInterval(this.gaugeTimer);
		const waitTicks = Date.now() + 5_000;
		while (this.ticking && Date.now() < waitTicks) await sleep(20);
		const pending = [...this.inFlight.values()].map((f) => f.promise);
		if (pending.length > 0) {
			this.logger.info(`Waiting for ${pending.length} webhook tries in flight`);
			const grace = sleep(this.settings.stopGraceMs).then(() => "timeout");
			const outcome = await Promise.race([Promise.allSettled(pending).then(() => "done"), grace]);
			if (outcome === "timeout") {
				this.stopAbort.abort();
				await Promise.race([Promise.allSettled(pending), sleep(2_000)]);
			}
		}
		try {
			const released = await this.sequelize.query<{ event_id: string }>(RELEASE_OWNER_SQL, { bind: [this.instanceId], type: QueryTypes.SELECT });
			if (released.length > 0) this.logger.info(`Released ${released.length} unfinished webhook claim(s)`);
		} catch (err) {
			this.warnThrottled("release", "Could not release claims at stop; their leases will expire", err);
		}
		this.client.close();
	},
};

export default NotificationsService;
