import type { MetricRegistry } from "moleculer";
import type { RideEventKind } from "../../contracts/notifications";
import type { AttemptOutcome } from "./webhook-client";

/** Metric names are part of the operations contract (docs/OPERATIONS.md): do not rename. */
const METRIC_ATTEMPTS = "webhook.attempts.total";
const METRIC_LATENCY = "webhook.delivery.latency";
const METRIC_PENDING = "webhook.pending.count";
const METRIC_OLDEST = "webhook.pending.oldest.age";
const METRIC_LATE = "webhook.ingest.late.total";
const METRIC_BREAKER = "webhook.breaker.opened.total";

/** Prometheus figures of webhook delivery (only when the broker has metrics on). */
export class DeliveryMetrics {
	constructor(private readonly metrics: MetricRegistry) {
		// Registered once per broker: a notifications service created again finds them there.
		if (!metrics.hasMetric(METRIC_LATE)) {
			metrics.register({
				type: "counter",
				name: METRIC_LATE,
				description: "Ride events the safety-net ingest found (committed later than the ingest window)",
			});
			metrics.register({ type: "counter", name: METRIC_BREAKER, description: "Times a webhook host's circuit breaker opened (by this instance)" });
		}
		if (metrics.hasMetric(METRIC_ATTEMPTS)) return;
		metrics.register({
			type: "counter",
			name: METRIC_ATTEMPTS,
			labelNames: ["outcome", "kind"],
			description: "Webhook tries by outcome (delivered or error class)",
		});
		metrics.register({
			type: "histogram",
			name: METRIC_LATENCY,
			labelNames: ["kind"],
			unit: "second",
			buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 86400],
			description: "End-to-end webhook latency, event occurred → delivered",
		});
		metrics.register({ type: "gauge", name: METRIC_PENDING, description: "Webhook events not delivered yet" });
		metrics.register({ type: "gauge", name: METRIC_OLDEST, unit: "second", description: "Age of the oldest undelivered webhook event" });
	}

	/** One finished try; a delivered one also counts its latency since the event occurred. */
	attempt(kind: RideEventKind, outcome: AttemptOutcome, occurredAt: Date): void {
		this.metrics.increment(METRIC_ATTEMPTS, { outcome, kind });
		if (outcome === "delivered") this.metrics.observe(METRIC_LATENCY, (Date.now() - new Date(occurredAt).getTime()) / 1000, { kind });
	}

	lateIngested(n: number): void {
		this.metrics.increment(METRIC_LATE, undefined, n);
	}

	breakerOpened(): void {
		this.metrics.increment(METRIC_BREAKER);
	}

	backlog(pending: number, oldestAgeSeconds: number): void {
		this.metrics.set(METRIC_PENDING, pending);
		this.metrics.set(METRIC_OLDEST, oldestAgeSeconds);
	}
}
