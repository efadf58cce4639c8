import { DEFAULT_RETRY_SCHEDULE_MS, LOCATION_TTL_MS, WEBHOOK_TIMEOUT_MS } from "../../../contracts/notifications";
import { readNotificationsSettings } from "../../../services/notifications/notifications.settings";

describe("notifications settings", () => {
	it("uses the contract's defaults when nothing is set", () => {
		const s = readNotificationsSettings({});
		expect(s).toMatchObject({
			pollMs: 1_000,
			concurrency: 64,
			leaseMs: 45_000,
			timeoutMs: WEBHOOK_TIMEOUT_MS,
			ingestWindowMs: 10_000,
			stopGraceMs: WEBHOOK_TIMEOUT_MS + 2_000,
			locationTtlMs: LOCATION_TTL_MS,
			retryScheduleMs: [...DEFAULT_RETRY_SCHEDULE_MS],
			allowPrivate: true,
			locationConcurrency: 32,
			partnerConcurrency: 16,
			hostConcurrency: 16,
			breakerFailures: 5,
			breakerOpenMs: 30_000,
			breakerMaxOpenMs: 600_000,
			safetyNetMs: 5_000,
		});
		expect(readNotificationsSettings({ NODE_ENV: "production" }).allowPrivate).toBe(false);
	});

	it("reads every WEBHOOK_* setting; blank means the default", () => {
		const s = readNotificationsSettings({
			WEBHOOK_TIMEOUT_MS: "1000",
			WEBHOOK_POLL_MS: "50",
			WEBHOOK_CONCURRENCY: "16",
			WEBHOOK_INGEST_WINDOW_MS: "5000",
			WEBHOOK_LOCATION_TTL_MS: "2000",
			WEBHOOK_LEASE_MS: "8000",
			WEBHOOK_RETRY_SCHEDULE_MS: "100,200",
			WEBHOOK_ALLOW_PRIVATE: "false",
			WEBHOOK_LOCATION_CONCURRENCY: "8",
			WEBHOOK_PARTNER_CONCURRENCY: "4",
			WEBHOOK_HOST_CONCURRENCY: "6",
			WEBHOOK_BREAKER_FAILURES: "2",
			WEBHOOK_BREAKER_OPEN_MS: "500",
			WEBHOOK_BREAKER_MAX_OPEN_MS: "4000",
			WEBHOOK_SAFETY_NET_MS: "250",
		});
		expect(s).toMatchObject({
			timeoutMs: 1_000,
			pollMs: 50,
			concurrency: 16,
			ingestWindowMs: 5_000,
			locationTtlMs: 2_000,
			leaseMs: 8_000,
			stopGraceMs: 3_000,
			retryScheduleMs: [100, 200],
			allowPrivate: false,
			locationConcurrency: 8,
			partnerConcurrency: 4,
			hostConcurrency: 6,
			breakerFailures: 2,
			breakerOpenMs: 500,
			breakerMaxOpenMs: 4_000,
			safetyNetMs: 250,
		});
		expect(readNotificationsSettings({ WEBHOOK_TIMEOUT_MS: " " }).timeoutMs).toBe(WEBHOOK_TIMEOUT_MS);
	});

	it("keeps a claim's lease longer than one try plus its bookkeeping", () => {
		expect(readNotificationsSettings({ WEBHOOK_TIMEOUT_MS: "20000", WEBHOOK_LEASE_MS: "1000" }).leaseMs).toBe(25_000);
	});

	it.each([
		["WEBHOOK_TIMEOUT_MS", "abc"],
		["WEBHOOK_TIMEOUT_MS", "0"],
		["WEBHOOK_POLL_MS", "-5"],
		["WEBHOOK_CONCURRENCY", "many"],
		["WEBHOOK_CONCURRENCY", "0"],
		["WEBHOOK_CONCURRENCY", "2.5"],
		["WEBHOOK_INGEST_WINDOW_MS", "soon"],
		["WEBHOOK_LOCATION_TTL_MS", "Infinity"],
		["WEBHOOK_LEASE_MS", "1e400"],
		["WEBHOOK_LOCATION_CONCURRENCY", "0"],
		["WEBHOOK_PARTNER_CONCURRENCY", "lots"],
		["WEBHOOK_HOST_CONCURRENCY", "1.5"],
		["WEBHOOK_BREAKER_FAILURES", "0"],
		["WEBHOOK_BREAKER_OPEN_MS", "-1"],
		["WEBHOOK_BREAKER_MAX_OPEN_MS", "never"],
		["WEBHOOK_SAFETY_NET_MS", "0"],
	])("refuses to start on an invalid value, naming the setting: %s=%s", (name, value) => {
		expect(() => readNotificationsSettings({ [name]: value })).toThrow(new RegExp(`^${name} must be .*, got "${value}"$`));
	});
});
