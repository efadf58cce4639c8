import { readOrdersSettings } from "../../../services/orders/orders.settings";
import { readNotificationsSettings } from "../../../services/notifications/notifications.settings";
import { readDispatchSettings } from "../../../services/dispatch/dispatch.settings";
import { readRetentionSettings, RetentionPass } from "../../../lib/retention";
import { SettingError } from "../../../lib/settings";

/**
 * Retention settings (lib/retention.ts): each owner's window and the shared
 * batch/interval knobs have documented defaults, and a bad value refuses
 * start-up naming the setting (every service reads them in created()).
 */

it("defaults: orders 90 days, webhooks 30, dispatch 30; batches of 500, 20 per pass, every 10 minutes", () => {
	expect(readOrdersSettings({})).toMatchObject({ retentionDays: 90, retentionBatchSize: 500, retentionMaxBatches: 20, retentionIntervalMs: 600_000 });
	expect(readNotificationsSettings({}).retentionDays).toBe(30);
	expect(readDispatchSettings({}).retentionDays).toBe(30);
});

it("reads each owner's window and the shared knobs", () => {
	const env = {
		ORDERS_RETENTION_DAYS: "365",
		WEBHOOK_RETENTION_DAYS: "7",
		DISPATCH_RETENTION_DAYS: "0",
		RETENTION_BATCH_SIZE: "100",
		RETENTION_MAX_BATCHES: "3",
		RETENTION_INTERVAL_MS: "5000",
	};
	expect(readOrdersSettings(env)).toMatchObject({ retentionDays: 365, retentionBatchSize: 100, retentionMaxBatches: 3, retentionIntervalMs: 5000 });
	expect(readNotificationsSettings(env).retentionDays).toBe(7);
	expect(readDispatchSettings(env).retentionDays).toBe(0);
});

it.each([
	["ORDERS_RETENTION_DAYS", "-1"],
	["ORDERS_RETENTION_DAYS", "1.5"],
	["ORDERS_RETENTION_DAYS", "ninety"],
	["RETENTION_BATCH_SIZE", "0"],
	["RETENTION_BATCH_SIZE", "20000"],
	["RETENTION_MAX_BATCHES", "0"],
	["RETENTION_INTERVAL_MS", "10"],
])("%s=%s refuses start-up, naming the setting", (name, value) => {
	expect(() => readOrdersSettings({ [name]: value })).toThrow(SettingError);
	expect(() => readOrdersSettings({ [name]: value })).toThrow(name);
});

it.each([
	["WEBHOOK_RETENTION_DAYS", readNotificationsSettings],
	["DISPATCH_RETENTION_DAYS", readDispatchSettings],
] as const)("%s is validated by its service", (name, read) => {
	expect(() => read({ [name]: "-3" })).toThrow(name);
	expect(() => readRetentionSettings({ [name]: "x" }, name)).toThrow(SettingError);
});

it("RETENTION_DUTY: 0.25 by default, 0.01..1, anything else refuses start-up", () => {
	expect(readOrdersSettings({}).retentionDuty).toBe(0.25);
	expect(readOrdersSettings({ RETENTION_DUTY: "1" }).retentionDuty).toBe(1);
	for (const bad of ["0", "1.5", "x"]) expect(() => readOrdersSettings({ RETENTION_DUTY: bad })).toThrow("RETENTION_DUTY");
});

it("a pass rests between batches (the duty cycle) and stop() ends the rest at once", async () => {
	let calls = 0;
	let stop: Promise<void> | undefined;
	const pass = new RetentionPass<undefined>({
		name: "x",
		settings: { retentionDays: 1, retentionBatchSize: 1, retentionMaxBatches: 1000, retentionIntervalMs: 60_000, retentionDuty: 0.01 },
		logger: { info: () => undefined, warn: () => undefined },
		removeBatch: async () => {
			calls++;
			await new Promise((r) => setTimeout(r, 5));
			// Stop while the pass rests after this first batch (its rest is 99 × the batch's time).
			setImmediate(() => (stop = pass.stop()));
			return { removed: 1, scanned: 1, next: undefined };
		},
	});
	expect(await pass.run()).toBe(1);
	await stop;
	expect(calls).toBe(1);
});
