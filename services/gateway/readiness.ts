import type { ServiceBroker } from "moleculer";
import { isUnavailableError } from "./errors";
import { REQUIRED_SERVICES } from "./routes";

/**
 * `GET /health/ready`: ready when the gateway is not draining and every
 * service the API needs is in the registry and answers its `dbHealth` (which
 * also proves the database).
 */

export type CheckState = "ok" | "unavailable" | "error";

export interface Readiness {
	ready: boolean;
	status: "ready" | "not_ready" | "draining";
	checks: Record<string, CheckState>;
}

async function checkService(broker: ServiceBroker, name: string, timeoutMs: number): Promise<[string, CheckState]> {
	const action = `${name}.dbHealth`;
	// Not registered (or every instance unavailable): say so without a call the broker would warn about.
	if (!broker.registry.getActionEndpoints(action)?.hasAvailable()) return [name, "unavailable"];
	try {
		await broker.call(action, {}, { timeout: timeoutMs, retries: 0 });
		return [name, "ok"];
	} catch (err) {
		return [name, isUnavailableError(err) ? "unavailable" : "error"];
	}
}

/** `isDraining` is asked before and after the checks: draining may begin while they run. */
export async function checkReadiness(broker: ServiceBroker, timeoutMs: number, isDraining: () => boolean): Promise<Readiness> {
	if (isDraining()) return { ready: false, status: "draining", checks: {} };
	const results = await Promise.all(REQUIRED_SERVICES.map((name) => checkService(broker, name, timeoutMs)));
	const checks: Readiness["checks"] = Object.fromEntries(results);
	if (isDraining()) return { ready: false, status: "draining", checks };
	const ready = results.every(([, state]) => state === "ok");
	return { ready, status: ready ? "ready" : "not_ready", checks };
}

/**
 * Keeps `/health/ready` cheap: one check runs at a time (probes arriving
 * meanwhile share it) and its answer is reused for `ttlMs`, so any number of
 * probes costs each service at most one `dbHealth` per `ttlMs`. Draining is
 * never cached: it is read on every probe.
 */
export class ReadinessProbe {
	private last: { at: number; answer: Readiness } | undefined;
	private running: Promise<Readiness> | undefined;

	constructor(
		private readonly check: () => Promise<Readiness>,
		private readonly ttlMs: number,
		private readonly isDraining: () => boolean,
		private readonly now: () => number = Date.now,
	) {}

	async read(): Promise<Readiness> {
		if (this.isDraining()) return { ready: false, status: "draining", checks: this.last?.answer.checks ?? {} };
		const answer = this.last && this.now() - this.last.at < this.ttlMs ? this.last.answer : await this.refresh();
		if (this.isDraining()) return { ready: false, status: "draining", checks: answer.checks };
		return answer;
	}

	private refresh(): Promise<Readiness> {
		if (!this.running) {
			this.running = this.check()
				.then((answer) => {
					this.last = { at: this.now(), answer };
					return answer;
				})
				.finally(() => {
					this.running = undefined;
				});
		}
		return this.running;
	}
}
