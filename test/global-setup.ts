import { autovacuumOnForRun } from "./helpers/db";

/**
 * Jest's globalSetup: the server PostgreSQL runs autovacuum for the test
 * run, as the platform expects in production (each node warns at start
 * when it is off). Put back by global-teardown.ts. A server that cannot be
 * reached is left to the tests that need it to report.
 */
export default async function globalSetup(): Promise<void> {
	const run = await autovacuumOnForRun().catch(() => undefined);
	(globalThis as { restoreAutovacuum?: () => Promise<void> }).restoreAutovacuum = run?.restore;
}
