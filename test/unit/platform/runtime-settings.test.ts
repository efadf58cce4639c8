import { readSettings } from "../../../lib/settings";

describe("runtime and broker settings (lib/settings)", () => {
	it("defaults when unset or blank", () => {
		const s = readSettings({ HEALTH_PORT: " ", TRACING_EXPORTER: "" });
		expect(s).toMatchObject({
			healthPort: 0,
			nodeId: undefined,
			logFormat: "readable",
			tracingExporters: ["Console"],
			zipkinUrl: "http://localhost:9411",
			tracingSampleRate: 1,
			tracingTagsAllow: [],
		});
	});

	it("reads set values", () => {
		const s = readSettings({
			HEALTH_PORT: "8080",
			NODE_ID: "pod-1",
			LOG_FORMAT: "json",
			TRACING_EXPORTER: "event, zipkin",
			TRACING_SAMPLE_RATE: "0.05",
			TRACING_TAGS_ALLOW: "rating, tags",
		});
		expect(s).toMatchObject({
			healthPort: 8080,
			nodeId: "pod-1",
			logFormat: "json",
			tracingExporters: ["Event", "Zipkin"],
			tracingSampleRate: 0.05,
			tracingTagsAllow: ["rating", "tags"],
		});
		expect(readSettings({ NODE_ENV: "production", LOG_FORMAT: "readable" }).logFormat).toBe("json");
	});

	it("WEBHOOK_PORTS: 80, 443, 8443 in production, any port elsewhere, or the list set", () => {
		expect(readSettings({ NODE_ENV: "production" }).webhookPorts).toEqual([80, 443, 8443]);
		expect(readSettings({ NODE_ENV: "test" }).webhookPorts).toBeUndefined();
		expect(readSettings({ NODE_ENV: "production", WEBHOOK_PORTS: "443, 9443" }).webhookPorts).toEqual([443, 9443]);
		expect(readSettings({ WEBHOOK_PORTS: "443" }).webhookPorts).toEqual([443]);
		expect(() => readSettings({ WEBHOOK_PORTS: "443,0" })).toThrow('WEBHOOK_PORTS must be a comma list of port numbers 1..65535, got "0"');
		expect(() => readSettings({ WEBHOOK_PORTS: "https" })).toThrow("WEBHOOK_PORTS must be a comma list of port numbers 1..65535");
	});

	it("refuses bad values naming the setting", () => {
		expect(() => readSettings({ HEALTH_PORT: "70000" })).toThrow('HEALTH_PORT must be a port number 0..65535, got "70000"');
		expect(() => readSettings({ TRACING_EXPORTER: "Console,Jaeger" })).toThrow(
			'TRACING_EXPORTER must be a comma list of Console, Event, Zipkin, got "Jaeger"',
		);
		expect(() => readSettings({ TRACING_SAMPLE_RATE: "half" })).toThrow("TRACING_SAMPLE_RATE must be a fraction 0..1");
		expect(() => readSettings({ LOG_FORMAT: "xml" })).toThrow("LOG_FORMAT must be one of json, readable");
	});
});
