import { Client } from "pg";

/** What a process logs when the server PostgreSQL has autovacuum off. */
export const AUTOVACUUM_OFF_WARNING =
	"autovacuum is off on this PostgreSQL server: the platform's busiest tables (drivers, dispatch, webhook deliveries) bloat and every statement on them slows down over hours. Turn autovacuum on (docs/OPERATIONS.md).";

/** Whether the server at `url` has autovacuum on (`SHOW autovacuum`, readable by any role). */
export async function autovacuumOn(url: string): Promise<boolean> {
	const client = new Client({ connectionString: url, application_name: "ride-platform autovacuum check" });
	client.on("error", () => undefined);
	await client.connect();
	try {
		return (await client.query<{ autovacuum: string }>("SHOW autovacuum")).rows[0]?.autovacuum === "on";
	} finally {
		await client.end().catch(() => undefined);
	}
}

/** The process's one check: later nodes of the same process neither ask again nor repeat the warning. */
let checked: Promise<void> | undefined;

/**
 * At start, a process that uses the server PostgreSQL asks whether
 * autovacuum is on, and when it is off says so once (a warning, not an
 * error: the platform works, it only slows down as dead rows pile up). The
 * embedded database has no autovacuum and is vacuumed by the runtime
 * instead (embedded-vacuum.ts). A failed check is a warning too. `isOn`
 * asks the server; tests give their own.
 */
export function warnOnceIfAutovacuumOff(url: string, warn: (message: string) => void, isOn: (url: string) => Promise<boolean> = autovacuumOn): Promise<void> {
	checked ??= isOn(url).then(
		(on) => {
			if (!on) warn(AUTOVACUUM_OFF_WARNING);
		},
		(err: unknown) => warn(`Could not ask the database whether autovacuum is on: ${(err as Error)?.message ?? String(err)}`),
	);
	return checked;
}
