import { envNumber, envPositive, readSettings, type Env } from "../../lib/settings";
import { readRetentionSettings, type RetentionSettings } from "../../lib/retention";
import { DEFAULT_RUNNING_TIMEOUT_MS } from "./idempotency";
import { DEFAULT_OTP_MAX_TRIES } from "./otp";
import { DEFAULT_CANCEL_GRACE_SECONDS } from "../../contracts/orders";
import { readScheduleSettings, type ScheduleSettings } from "../../lib/schedule";

/**
 * The orders service's settings, read once when it is created. Pure: pass
 * any env object. An invalid value refuses start-up naming the setting
 * (lib/settings); each default is defined once, here or in the rule file
 * that explains it.
 */
/** Retention: `ORDERS_RETENTION_DAYS` and the shared `RETENTION_*` settings (lib/retention.ts). */
export interface OrdersSettings extends RetentionSettings {
	/** A running Idempotency-Key claim older than this is from a dead call and may be taken over (`IDEMPOTENCY_RUNNING_TIMEOUT_MS`). */
	idempotencyRunningTimeoutMs: number;
	/** How often finished keys older than 24 h are deleted. */
	idempotencyCleanupMs: number;
	/** Whether webhookURLs may point at private addresses (`WEBHOOK_ALLOW_PRIVATE`). */
	webhookAllowPrivate: boolean;
	/** The ports a webhookURL may use (`WEBHOOK_PORTS`; undefined = any). */
	webhookPorts: number[] | undefined;
	/** Only the simulated fleet may read a rider's OTP (`FLEET_MODE`). */
	fleetMode: "simulated" | "live";
	/** OTP tries per order before starting it with an OTP is locked (`OTP_MAX_TRIES`, 1..20). */
	otpMaxTries: number;
	/** Cancels within this many seconds of the driver's acceptance are free (`CANCEL_GRACE_SECONDS`, 0..3600; cancel-policy.ts). */
	cancelGraceSeconds: number;
	/** Scheduled rides: the booking window, the dispatch lead, the schedule's poll (lib/schedule.ts). */
	schedule: ScheduleSettings;
}

/** Keys are replayed for 24 h; sweeping older ones every ten minutes keeps the table small. */
const IDEMPOTENCY_CLEANUP_MS = 10 * 60_000;

export function readOrdersSettings(env: Env): OrdersSettings {
	const runtime = readSettings(env);
	return {
		idempotencyRunningTimeoutMs: envPositive(env, "IDEMPOTENCY_RUNNING_TIMEOUT_MS", DEFAULT_RUNNING_TIMEOUT_MS),
		idempotencyCleanupMs: IDEMPOTENCY_CLEANUP_MS,
		webhookAllowPrivate: runtime.webhookAllowPrivate,
		webhookPorts: runtime.webhookPorts,
		fleetMode: runtime.fleetMode,
		otpMaxTries: envNumber(env, "OTP_MAX_TRIES", DEFAULT_OTP_MAX_TRIES, (n) => Number.isInteger(n) && n >= 1 && n <= 20, "an integer 1..20"),
		cancelGraceSeconds: envNumber(
			env,
			"CANCEL_GRACE_SECONDS",
			DEFAULT_CANCEL_GRACE_SECONDS,
			(n) => Number.isInteger(n) && n >= 0 && n <= 3600,
			"an integer 0..3600",
		),
		schedule: readScheduleSettings(env),
		...readRetentionSettings(env, "ORDERS_RETENTION_DAYS"),
	};
}
