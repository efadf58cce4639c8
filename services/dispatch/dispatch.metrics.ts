import type { ServiceBroker } from "moleculer";
import { SERVICE_TYPES, type ServiceType } from "../../contracts/common";
import { DRIVER_STATUSES, type DriverStatus } from "../../contracts/dispatch";

/**
 * Dispatch's metrics (docs/OPERATIONS.md, "Metrics"). Counting is a no-op
 * when metrics are off in this broker (METRICS_PORT=0), so callers never ask.
 */

export const METRIC_OFFERS_MADE = "dispatch.offers.made.total";
export const METRIC_OFFERS_ENDED = "dispatch.offers.ended.total";
export const METRIC_MATCHED = "dispatch.rides.matched.total";
export const METRIC_NO_DRIVER = "dispatch.rides.no_driver_found.total";
export const METRIC_MATCH_TIME = "dispatch.match.time";
export const METRIC_DRIVERS = "dispatch.drivers.count";
export const METRIC_WRONG_OTP = "dispatch.otp.wrong.total";

export type OfferOutcome = "accepted" | "declined" | "expired" | "cancelled";

export class DispatchMetrics {
	readonly enabled: boolean;

	constructor(private readonly broker: ServiceBroker) {
		this.enabled = broker.isMetricsEnabled();
		// Several dispatch services may share a broker (tests): register once.
		if (this.enabled && !broker.metrics.hasMetric(METRIC_OFFERS_MADE)) this.register();
	}

	private register(): void {
		const m = this.broker.metrics;
		m.register({ type: "counter", name: METRIC_OFFERS_MADE, labelNames: ["service_type"], description: "Offers made to drivers" });
		m.register({
			type: "counter",
			name: METRIC_OFFERS_ENDED,
			labelNames: ["outcome", "service_type"],
			description: "Offers answered or timed out: accepted, declined (by the driver or going offline), expired",
		});
		m.register({
			type: "counter",
			name: METRIC_MATCHED,
			labelNames: ["service_type"],
			description: "Rides that got a driver (searching → accepted, again after a drop-out)",
		});
		m.register({ type: "counter", name: METRIC_NO_DRIVER, labelNames: ["service_type"], description: "Rides ended as no_driver_found" });
		m.register({
			type: "histogram",
			name: METRIC_MATCH_TIME,
			labelNames: ["service_type"],
			unit: "second",
			buckets: [1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600],
			description: "Order created → accepted by a driver",
		});
		m.register({ type: "gauge", name: METRIC_DRIVERS, labelNames: ["status", "service_type"], description: "Drivers by status and service type" });
		m.register({ type: "counter", name: METRIC_WRONG_OTP, labelNames: ["service_type"], description: "Ride starts refused for a wrong rider OTP" });
	}

	private count(name: string, labels: Record<string, string>): void {
		if (this.enabled) this.broker.metrics.increment(name, labels);
	}

	offerMade(serviceType: ServiceType): void {
		this.count(METRIC_OFFERS_MADE, { service_type: serviceType });
	}

	offerEnded(outcome: OfferOutcome, serviceType: ServiceType): void {
		this.count(METRIC_OFFERS_ENDED, { outcome, service_type: serviceType });
	}

	/** A ride got its driver; the wait counts from the order's creation. */
	matched(serviceType: ServiceType, orderCreatedAt: string): void {
		if (!this.enabled) return;
		this.count(METRIC_MATCHED, { service_type: serviceType });
		const waitedS = (Date.now() - Date.parse(orderCreatedAt)) / 1000;
		if (Number.isFinite(waitedS)) this.broker.metrics.observe(METRIC_MATCH_TIME, Math.max(0, waitedS), { service_type: serviceType });
	}

	noDriverFound(serviceType: ServiceType): void {
		this.count(METRIC_NO_DRIVER, { service_type: serviceType });
	}

	wrongOtp(serviceType: ServiceType): void {
		this.count(METRIC_WRONG_OTP, { service_type: serviceType });
	}

	/** Drivers by status and type. Every pair is set, so a drained one reads 0. */
	driverCounts(rows: Array<{ status: DriverStatus; service_type: ServiceType; n: number }>): void {
		for (const type of SERVICE_TYPES) {
			for (const status of DRIVER_STATUSES) {
				const row = rows.find((r) => r.status === status && r.service_type === type);
				this.broker.metrics.set(METRIC_DRIVERS, row?.n ?? 0, { status, service_type: type });
			}
		}
	}
}
