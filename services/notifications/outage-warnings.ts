import type { Logger } from "moleculer";

/** How often the same kind of failure is logged. */
const QUIET_MS = 30_000;

/** PostgreSQL "undefined_table". */
const UNDEFINED_TABLE = "42P01";

/**
 * During an outage every tick fails the same way: say it once per 30 s per
 * key, naming the error class and code, never SQL or secrets.
 */
export class OutageWarnings {
	private readonly lastAt = new Map<string, number>();

	constructor(private readonly logger: Logger) {}

	warn(key: string, message: string, err?: unknown): void {
		const now = Date.now();
		if ((this.lastAt.get(key) ?? 0) > now - QUIET_MS) return;
		this.lastAt.set(key, now);
		const e = err as { name?: string; original?: { code?: string }; parent?: { code?: string }; code?: string } | undefined;
		const code = e?.original?.code ?? e?.parent?.code ?? e?.code;
		if (code === UNDEFINED_TABLE) {
			// ride_events is orders' table: before orders has migrated there is simply nothing to deliver yet.
			this.logger.info(`${message}: ride_events does not exist yet (orders not migrated); waiting`);
			return;
		}
		this.logger.warn(err ? `${message}: ${e?.name ?? "Error"}${code ? ` (${code})` : ""}` : message);
	}
}
