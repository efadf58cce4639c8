import { SettingError } from "../../../lib/settings";
import { DEFAULT_RUNNING_TIMEOUT_MS } from "../../../services/orders/idempotency";
import { readOrdersSettings } from "../../../services/orders/orders.settings";

describe("orders settings", () => {
	it("has a default for everything", () => {
		expect(readOrdersSettings({})).toEqual({
			idempotencyRunningTimeoutMs: DEFAULT_RUNNING_TIMEOUT_MS,
			idempotencyCleanupMs: 600_000,
			webhookAllowPrivate: true,
			fleetMode: "simulated",
			otpMaxTries: 5,
			cancelGraceSeconds: 120,
			retentionDays: 90,
			retentionBatchSize: 500,
			retentionMaxBatches: 20,
			retentionIntervalMs: 600_000,
			retentionDuty: 0.25,
			schedule: { minLeadMs: 1_800_000, maxAheadMs: 604_800_000, dispatchLeadMs: 900_000, searchMarginMs: 60_000, pollMs: 60_000 },
		});
	});

	it("reads the environment it is given", () => {
		const s = readOrdersSettings({ IDEMPOTENCY_RUNNING_TIMEOUT_MS: "1500", WEBHOOK_ALLOW_PRIVATE: "false", FLEET_MODE: "live" });
		expect(s).toMatchObject({ idempotencyRunningTimeoutMs: 1500, webhookAllowPrivate: false, fleetMode: "live" });
	});

	it.each(["abc", "0", "-5"])("refuses IDEMPOTENCY_RUNNING_TIMEOUT_MS=%s, naming the setting", (raw) => {
		expect(() => readOrdersSettings({ IDEMPOTENCY_RUNNING_TIMEOUT_MS: raw })).toThrow(SettingError);
		expect(() => readOrdersSettings({ IDEMPOTENCY_RUNNING_TIMEOUT_MS: raw })).toThrow(/IDEMPOTENCY_RUNNING_TIMEOUT_MS/);
	});
});
