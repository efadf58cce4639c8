import { randomUUID } from "node:crypto";
import { apiVersionsOf } from "../../lib/api-versions";
import type { Context, Service, ServiceSchema } from "moleculer";
import {
	DELIVERY_STATES,
	deliveryStatesParams,
	undeliveredOrdersParams,
	replayFailedParams,
	replayParams,
	type DeliveryState,
	type DeliveryStatesParams,
	type DeliveryStatesResult,
	type ReplayFailedParams,
	type ReplayFailedResult,
	type ReplayParams,
	type ReplayResult,
	type StatsResult,
	type UndeliveredOrdersParams,
	type UndeliveredOrdersResult,
} from "../../contracts/notifications";
import type { RideEventRecordedEvent } from "../../contracts/orders";
import type { PartnerSigning, PartnersChangedEvent, SigningSecretParams } from "../../contracts/partners";
import { ApiError } from "../../lib/errors";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { DeliveryLoop } from "./delivery-loop";
import { DeliveryMetrics } from "./delivery-metrics";
import { migrations } from "./migrations";
import { NotificationsRepo } from "./notifications.repo";
import { NotificationsRetentionRepo } from "./retention.repo";
import { RetentionPass } from "../../lib/retention";
import { readNotificationsSettings, type NotificationsSettings } from "./notifications.settings";
import { OutageWarnings } from "./outage-warnings";
import { createWebhookClient, type WebhookClient } from "./webhook-client";
import { serviceEnv, useServiceSettings } from "../../lib/settings";
import { webhookDnsResolver } from "../../lib/dns-resolver";

/**
 * Notifications: delivers webhooks from the transactional outbox
 * (`ride_events`, written by orders in the ride's own transaction) with
 * DeliveryLoop. Work is claimed in PostgreSQL with a lease, so any number of
 * instances share the load, and a crashed instance's claims come back when
 * the lease runs out. The actions answer orders (delivery states) and
 * operators (replay, stats). See docs/ARCHITECTURE.md, "Webhook delivery".
 */

/** How often the backlog gauges are refreshed (metrics on only). */
const GAUGES_EVERY_MS = 5_000;

interface NotificationsLocal {
	instanceId: string;
	repo: NotificationsRepo;
	client: WebhookClient;
	loop: DeliveryLoop;
	warnings: OutageWarnings;
	metrics?: DeliveryMetrics;
	gaugeTimer?: NodeJS.Timeout;
	retentionRepo: NotificationsRetentionRepo;
	retention: RetentionPass<undefined>;
}

type NotificationsMethods = Record<string, never>;

type NotificationsThis = Service<NotificationsSettings> & NotificationsLocal & DbThis;

const NotificationsService: ServiceSchema<NotificationsSettings, NotificationsMethods, NotificationsLocal & DbThis> = {
	name: "notifications",
	mixins: [DbMixin({ service: "notifications", migrations })],

	actions: {
		/** Delivery state per event (orders' /ride/events). Unknown or not yet ingested ids are `pending` with no tries. */
		deliveryStates: {
			access: "internal",
			params: deliveryStatesParams,
			async handler(this: NotificationsThis, ctx: Context<DeliveryStatesParams>): Promise<DeliveryStatesResult> {
				const ids = [...new Set(ctx.params.eventIds)];
				const result: DeliveryStatesResult = {};
				for (const id of ids) result[id] = { state: "pending", attempts: 0, lastStatus: null, lastError: null, lastAttemptAt: null };
				if (ids.length === 0) return result;
				for (const r of await this.repo.states(ids)) {
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

		/**
		 * Orders' retention pass: which of these rides still have an event to
		 * deliver (pending, or not taken in yet). Those are kept.
		 */
		undeliveredOrders: {
			access: "internal",
			params: undeliveredOrdersParams,
			async handler(this: NotificationsThis, ctx: Context<UndeliveredOrdersParams>): Promise<UndeliveredOrdersResult> {
				return { orderIds: await this.retentionRepo.undeliveredOrders([...new Set(ctx.params.orderIds)]) };
			},
		},

		/** Operators: one retention pass now (WEBHOOK_RETENTION_DAYS). REPL: `call notifications.runRetention` */
		runRetention: {
			access: "internal",
			async handler(this: NotificationsThis): Promise<{ removed: number }> {
				return { removed: await this.retention.run() };
			},
		},

		/** Operators: send one status event again from the start of the schedule. REPL: `call notifications.replay --eventId evt_…` */
		replay: {
			access: "internal",
			params: replayParams,
			async handler(this: NotificationsThis, ctx: Context<ReplayParams>): Promise<ReplayResult> {
				const { eventId } = ctx.params;
				if (await this.repo.replay(eventId)) {
					this.logger.info(`Replay of ${eventId} requested`);
					this.loop.requestTick();
					return { eventId, replayed: true, state: "pending" };
				}
				const current = await this.repo.delivery(eventId);
				if (!current) throw new ApiError("NOT_FOUND", "Unknown event (or not picked up for delivery yet)");
				if (current.kind === "location") {
					throw new ApiError("CONFLICT", "Location events are only worth their newest value and are not replayed");
				}
				return { eventId, replayed: false, state: current.state };
			},
		},

		/** Operators: replay every failed status event of a partner that occurred since a time. REPL: `call notifications.replayFailed --partnerId ptn_… --since 2026-01-01T00:00:00Z` */
		replayFailed: {
			access: "internal",
			params: replayFailedParams,
			async handler(this: NotificationsThis, ctx: Context<ReplayFailedParams>): Promise<ReplayFailedResult> {
				const { partnerId } = ctx.params;
				const since = new Date(ctx.params.since).toISOString();
				const eventIds = await this.repo.replayFailed(partnerId, since);
				this.logger.info(`Replay of ${eventIds.length} failed event(s) of ${partnerId} since ${since} requested`);
				if (eventIds.length > 0) this.loop.requestTick();
				return { partnerId, since, replayed: eventIds.length, eventIds };
			},
		},

		/** Operators: delivery backlog and recent outcomes. REPL: `call notifications.stats` */
		stats: {
			access: "internal",
			async handler(this: NotificationsThis): Promise<StatsResult> {
				const counts = await this.repo.countsByState();
				const attempts = await this.repo.recentAttempts();
				const states = Object.fromEntries(DELIVERY_STATES.map((s) => [s, 0])) as Record<DeliveryState, number>;
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
					instance: { id: this.instanceId, inFlight: this.loop.inFlightCount },
				};
			},
		},
	},

	events: {
		/** A hint from orders after its commit: ingest that event by id and claim now instead of at the next poll. */
		"orders.rideEventRecorded": {
			handler(this: NotificationsThis, ctx: Context<RideEventRecordedEvent>) {
				if (typeof ctx.params?.eventId === "string") this.loop.hint(ctx.params.eventId);
				else this.loop.requestTick();
			},
		},
		/** A partner's secrets or API version pin changed: sign and render with the new ones from the next try on. */
		"partners.changed"(this: NotificationsThis, ctx: Context<PartnersChangedEvent>) {
			this.loop.forgetSigningSecret(ctx.params.partnerId);
		},
	},

	created(this: NotificationsThis) {
		useServiceSettings(this, readNotificationsSettings);
		this.instanceId = `${this.broker.nodeID}/${randomUUID().slice(0, 8)}`;
		this.repo = new NotificationsRepo(this.db);
		this.retentionRepo = new NotificationsRetentionRepo(this.db);
		this.retention = new RetentionPass({
			name: "webhook deliveries",
			settings: this.settings,
			logger: this.logger,
			removeBatch: async (days, limit) => {
				const removed = await this.retentionRepo.removeFinished(days, limit);
				return { removed, scanned: removed, next: undefined };
			},
		});
		this.client = createWebhookClient({
			allowPrivate: this.settings.allowPrivate,
			ports: this.settings.ports,
			timeoutMs: this.settings.timeoutMs,
			resolveAll: webhookDnsResolver(serviceEnv(this)),
		});
		this.warnings = new OutageWarnings(this.logger);
		this.metrics = this.broker.isMetricsEnabled() ? new DeliveryMetrics(this.broker.metrics) : undefined;
		this.loop = new DeliveryLoop({
			repo: this.repo,
			client: this.client,
			settings: this.settings,
			instanceId: this.instanceId,
			logger: this.logger,
			warnings: this.warnings,
			metrics: this.metrics,
			fetchSigningSecret: async (partnerId, mode) => {
				const answer = await this.broker.call<PartnerSigning, SigningSecretParams>("partners.signingSecret", { partnerId, mode });
				return { secrets: answer.webhookSecrets, apiVersion: answer.apiVersion };
			},
			apiVersions: apiVersionsOf(this),
		});
	},

	async started(this: NotificationsThis) {
		this.retention.start();
		const metrics = this.metrics;
		if (metrics) {
			this.gaugeTimer = setInterval(() => {
				this.repo
					.pendingGauges()
					.then((g) => metrics.backlog(g.pending, g.oldestAgeSeconds))
					.catch((err: unknown) => this.warnings.warn("gauges", "Updating delivery gauges failed", err));
			}, GAUGES_EVERY_MS);
			this.gaugeTimer.unref();
		}
		const s = this.settings;
		this.logger.info(
			`Webhook delivery ${this.instanceId}: poll ${s.pollMs} ms, ${s.concurrency} status + ${s.locationConcurrency} location tries in flight ` +
				`(per partner ${s.partnerConcurrency}, per host ${s.hostConcurrency} of each kind), timeout ${s.timeoutMs} ms, ` +
				`private targets ${s.allowPrivate ? "allowed" : "refused"}, retries at ${s.retryScheduleMs.length} offsets, ` +
				`location events dropped after ${s.locationTtlMs} ms`,
		);
		this.loop.start();
	},

	/** Runs before the DB mixin closes the pool: the loop drains its tries and gives back its claims first. */
	async stopped(this: NotificationsThis) {
		if (this.gaugeTimer) clearInterval(this.gaugeTimer);
		await this.retention.stop();
		await this.loop.stop();
		this.client.close();
	},
};

export default NotificationsService;
