/**
 * What a process prints when it dies of an error nobody caught. Node's own
 * answer to an uncaught exception or an unhandled rejection is the error's
 * stack on stderr; in production (NODE_ENV=production) the process instead
 * writes one JSON line, like every other log line, with the error's name and
 * message (no stack: it names our files and may quote data), and exits with
 * code 1 as Node would. Elsewhere Node's default stays (stacks help there).
 */

function describe(thrown: unknown): { name: string; message: string } {
	const e = thrown as { name?: unknown; message?: unknown } | null;
	return {
		name: typeof e?.name === "string" ? e.name : typeof thrown,
		message: typeof e?.message === "string" ? e.message.slice(0, 2000) : String(thrown).slice(0, 2000),
	};
}

/** The line written for a crash (exported for the tests). */
export function crashLine(kind: "uncaughtException" | "unhandledRejection", thrown: unknown): string {
	return JSON.stringify({ time: new Date().toISOString(), level: "fatal", msg: `Process ended: ${kind}`, err: describe(thrown) });
}

/** Installs the production handlers; a no-op outside production. */
export function installCrashLogging(production: boolean, proc: NodeJS.Process = process): void {
	if (!production) return;
	const die = (kind: "uncaughtException" | "unhandledRejection") => (thrown: unknown) => {
		proc.stderr.write(`${crashLine(kind, thrown)}\n`);
		proc.exit(1);
	};
	proc.on("uncaughtException", die("uncaughtException"));
	proc.on("unhandledRejection", die("unhandledRejection"));
}
