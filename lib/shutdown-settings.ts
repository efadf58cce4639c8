import { envInt, envPositive, type Env } from "./settings";

/**
 * How long a process may take to stop, read once for the runner
 * (runtime/shutdown.ts) and the broker (moleculer.config.ts) so both agree.
 */
export interface ShutdownSettings {
	/** SHUTDOWN_DELAY_MS: pause between failing readiness and stopping (load balancers catch up). */
	delayMs: number;
	/** SHUTDOWN_TIMEOUT_MS: after the signal the process exits anyway. */
	timeoutMs: number;
	/** The broker's graceful stop (running calls and event handlers): the whole bound less room to close the HTTP, health and database servers after it. */
	brokerStopMs: number;
}

/** Below the usual 30 s Kubernetes grace period, with the preStop sleep. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 25_000;
/** What the runner keeps for itself after the broker has stopped. */
const AFTER_BROKER_MS = 5_000;
const MIN_BROKER_STOP_MS = 1_000;

export function readShutdownSettings(env: Env): ShutdownSettings {
	const timeoutMs = envPositive(env, "SHUTDOWN_TIMEOUT_MS", DEFAULT_SHUTDOWN_TIMEOUT_MS);
	return {
		delayMs: envInt(env, "SHUTDOWN_DELAY_MS", 0),
		timeoutMs,
		brokerStopMs: Math.max(MIN_BROKER_STOP_MS, timeoutMs - AFTER_BROKER_MS),
	};
}
