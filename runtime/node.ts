import { ServiceBroker, type ServiceSchema } from "moleculer";
import { buildBrokerConfig } from "../moleculer.config";
import { readSettings, type Env } from "../lib/settings";
import { ALL_SERVICES, isServiceName, loadServiceSchema, type ServiceName } from "../services";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "./embedded-postgres";
import { startEmbeddedVacuum, type EmbeddedVacuum } from "./embedded-vacuum";
import { warnOnceIfAutovacuumOff } from "./autovacuum-check";
import { startHealthServer, type HealthServer } from "./health";
import type { ApiVersionTable } from "../contracts/versions";

export interface RunningNode {
	broker: ServiceBroker;
	services: ServiceName[];
	embedded?: EmbeddedPostgres;
	/** `/health/live` and `/health/ready` on `HEALTH_PORT` (when set). */
	health?: HealthServer;
	stop(): Promise<void>;
}

/**
 * The schema with the environment it is started with as the secure setting
 * `$env` (read by `serviceEnv`; left out of what the node publishes on the
 * bus, since it holds secrets). `createService`'s second argument is ignored
 * in Moleculer 0.15, so the schema itself carries it.
 */
export function withEnv(schema: ServiceSchema, env: Env, apiVersions?: ApiVersionTable): ServiceSchema {
	const settings = (schema.settings ?? {}) as Record<string, unknown>;
	const secure = Array.isArray(settings.$secureSettings) ? (settings.$secureSettings as string[]) : [];
	const own = apiVersions ? { $env: env, $apiVersions: apiVersions } : { $env: env };
	return { ...schema, settings: { ...settings, ...own, $secureSettings: [...secure, ...Object.keys(own)] } as ServiceSchema["settings"] };
}

export interface StartOptions {
	env?: Env;
	/** Overrides `SERVICES`. */
	services?: ServiceName[];
	/**
	 * Another API version table than this release's (contracts/versions.ts), handed to every service as the
	 * secure setting `$apiVersions` (lib/api-versions.ts, `apiVersionsOf`): tests add a synthetic version with it.
	 */
	apiVersions?: ApiVersionTable;
}

/**
 * Starts one process's share of the platform: the embedded database when no
 * `DATABASE_URL` is set, then a broker with the services `SERVICES` names (all
 * by default). Used by `npm start`, the REPL and the integration tests alike,
 * so tests start services the way production does.
 */
export async function startNode(opts: StartOptions = {}): Promise<RunningNode> {
	let env: Env = { ...(opts.env ?? process.env) };
	const settings = readSettings(env);
	const names = opts.services ?? (settings.services as ServiceName[] | undefined) ?? [...ALL_SERVICES];
	for (const name of names) {
		if (!isServiceName(name)) throw new Error(`Unknown service "${name}" in SERVICES (known: ${ALL_SERVICES.join(", ")})`);
	}

	let embedded: EmbeddedPostgres | undefined;
	if (!settings.databaseUrl) {
		embedded = await startEmbeddedPostgres(settings.dataDir);
		// One pooled connection: pglite-socket queues protocol messages per
		// message, not per Sync, so extended-protocol queries from two
		// connections can interleave and fail with `portal "" does not exist`.
		// PGlite runs one statement at a time anyway, so nothing is lost.
		// No prepared statements: the connections share PGlite's one session,
		// so a name one connection prepared already exists for the next.
		env = { ...env, DATABASE_URL: embedded.url, DB_POOL_MAX: env.DB_POOL_MAX || "1", DB_PREPARED_STATEMENTS: "off" };
	}

	const broker = new ServiceBroker(buildBrokerConfig(env));
	for (const name of names) broker.createService(withEnv(loadServiceSchema(name), env, opts.apiVersions));
	// Up before the broker starts: liveness answers during migrations, readiness says "starting".
	// `HEALTH_PORT` (lib/settings): 0 turns the endpoints off (the gateway still has its own).
	const healthPort = settings.healthPort;
	// The gateway and the simulated fleet reach the database only through other services.
	const usesDatabase = names.some((n) => n !== "gateway" && n !== "fleet");
	let health: HealthServer | undefined;
	try {
		if (healthPort > 0) {
			health = await startHealthServer(broker, { port: healthPort, databaseUrl: usesDatabase ? env.DATABASE_URL : undefined });
		}
		await broker.start();
	} catch (err) {
		await broker.stop().catch(() => undefined);
		await health?.close().catch(() => undefined);
		await embedded?.stop().catch(() => undefined);
		throw err;
	}

	// No autovacuum in PGlite: the runtime vacuums the embedded database itself (embedded-vacuum.ts).
	const vacuum: EmbeddedVacuum | undefined = embedded ? startEmbeddedVacuum(env.DATABASE_URL!, env, (message) => broker.logger.warn(message)) : undefined;
	// A server with autovacuum off gets a warning, once per process (autovacuum-check.ts).
	if (!embedded && usesDatabase && env.DATABASE_URL) await warnOnceIfAutovacuumOff(env.DATABASE_URL, (message) => broker.logger.warn(message));

	let stopping: Promise<void> | undefined;
	return {
		broker,
		services: names,
		embedded,
		health,
		stop() {
			stopping ??= (async () => {
				health?.setDraining();
				await vacuum?.stop();
				await broker.stop();
				await health?.close();
				await embedded?.stop();
			})();
			return stopping;
		},
	};
}
