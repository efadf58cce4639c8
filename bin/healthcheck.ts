import { parseArgs } from "node:util";
import { envInt } from "../lib/settings";

/**
 * Container healthcheck without curl in the image:
 * `node dist/bin/healthcheck.js [live|ready]` asks this process's health
 * server (`HEALTH_PORT`, see runtime/health.ts) and exits 0 when it answers
 * 200, 1 otherwise. Used by docker-compose.yml and the Dockerfile.
 */
async function main(): Promise<number> {
	// Never refuses its arguments: a health check must answer, so anything but "live" means ready.
	const { positionals } = parseArgs({ allowPositionals: true, strict: false });
	const kind = positionals[0] === "live" ? "live" : "ready";
	// The image's HEALTH_PORT when unset; a bad value stops this check with a message (exit 1: unhealthy).
	const port = envInt(process.env, "HEALTH_PORT", 8080);
	const controller = new AbortController();
	const timer = setTimeout(() => controller.abort(), 3_000);
	try {
		const res = await fetch(`http://127.0.0.1:${port}/health/${kind}`, { signal: controller.signal });
		return res.status === 200 ? 0 : 1;
	} catch {
		return 1;
	} finally {
		clearTimeout(timer);
	}
}

main().then((code) => process.exit(code));
