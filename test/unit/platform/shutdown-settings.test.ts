import { buildBrokerConfig } from "../../../moleculer.config";
import { DEFAULT_SHUTDOWN_TIMEOUT_MS, readShutdownSettings } from "../../../lib/shutdown-settings";

describe("shutdown settings: one reader for the runner and the broker", () => {
	it("has one default, and the broker's graceful stop fits inside the process's bound", () => {
		const s = readShutdownSettings({});
		expect(s).toEqual({ delayMs: 0, timeoutMs: DEFAULT_SHUTDOWN_TIMEOUT_MS, brokerStopMs: DEFAULT_SHUTDOWN_TIMEOUT_MS - 5_000 });
		expect(buildBrokerConfig({}).tracking?.shutdownTimeout).toBe(s.brokerStopMs);
	});

	it("follows SHUTDOWN_TIMEOUT_MS in both places", () => {
		const env = { SHUTDOWN_TIMEOUT_MS: "12000", SHUTDOWN_DELAY_MS: "1500" };
		expect(readShutdownSettings(env)).toEqual({ delayMs: 1500, timeoutMs: 12_000, brokerStopMs: 7_000 });
		expect(buildBrokerConfig(env).tracking?.shutdownTimeout).toBe(7_000);
	});

	it("refuses an invalid value, naming the setting", () => {
		expect(() => readShutdownSettings({ SHUTDOWN_TIMEOUT_MS: "soon" })).toThrow(/SHUTDOWN_TIMEOUT_MS/);
		expect(() => readShutdownSettings({ SHUTDOWN_DELAY_MS: "-1" })).toThrow(/SHUTDOWN_DELAY_MS/);
	});
});
