import type { ServiceSchema, Service } from "moleculer";
import { Sequelize, type QueryInterface, type Transaction } from "sequelize";
import { Umzug, SequelizeStorage } from "umzug";
import * as pg from "pg";
import { Client } from "pg";
import { envInt, envString, serviceEnv, type Env } from "../lib/settings";

/**
 * One migration of a service. Migrations live beside the service
 * (`services/<name>/migrations/index.ts`) as an explicit list, so they run the
 * same from TypeScript sources, compiled code and tests.
 */
export interface Migration {
	name: string;
	up: (qi: QueryInterface, sequelize: Sequelize) => Promise<void>;
	down?: (qi: QueryInterface, sequelize: Sequelize) => Promise<void>;
}

export interface DbMixinOptions {
	/** Owner of the tables; migration names are recorded as `<service>/<name>`. */
	service: string;
	migrations: Migration[];
}

export interface DbThis {
	sequelize: Sequelize;
	/** The database this service was started against. */
	databaseUrl: string;
}

/**
 * pg's Client with an "error" listener from birth. Sequelize attaches its own
 * listener only after the connection's set-up has resolved; an error that
 * arrives in the same read as the set-up's last reply (a server terminating
 * connections, a restart) would be an unhandled "error" event and end the
 * process. This one marks the connection invalid exactly as Sequelize's
 * listener does, so the pool drops it on the next acquire.
 */
class GuardedClient extends pg.Client {
	constructor(config?: string | pg.ClientConfig) {
		super(config);
		this.on("error", () => {
			(this as unknown as { _invalid: boolean })._invalid = true;
		});
	}
}
/** The pg module Sequelize uses, with GuardedClient; everything else is pg's own. */
const guardedPg = Object.create(pg, { Client: { value: GuardedClient, enumerable: true } }) as typeof pg;

/** One pool per process and URL: services that share a process share connections. */
const pools = new Map<string, { sequelize: Sequelize; users: number }>();

export function databaseUrl(env: Env = process.env): string {
	const url = envString(env, "DATABASE_URL");
	if (!url) throw new Error("DATABASE_URL is not set (runtime/node.ts starts the embedded database when it is unset)");
	return url;
}

export function acquireSequelize(url: string, env: Env = process.env): Sequelize {
	let entry = pools.get(url);
	if (!entry) {
		const max = envInt(env, "DB_POOL_MAX", 10, 1);
		const sequelize = new Sequelize(url, {
			dialect: "postgres",
			dialectModule: guardedPg,
			logging: false,
			pool: { max, min: 0, idle: 10_000, acquire: 30_000 },
			dialectOptions: { application_name: envString(env, "SERVICES", "ride-platform") },
		});
		entry = { sequelize, users: 0 };
		pools.set(url, entry);
	}
	entry.users += 1;
	return entry.sequelize;
}

export async function releaseSequelize(sequelize: Sequelize): Promise<void> {
	for (const [url, entry] of pools) {
		if (entry.sequelize !== sequelize) continue;
		entry.users -= 1;
		if (entry.users <= 0) {
			pools.delete(url);
			await sequelize.close();
		}
		return;
	}
}

/** Serialises migrations across processes (replicas starting together) with a session advisory lock. */
const MIGRATION_LOCK_KEY = 0x72696465; // "ride"

export async function runMigrations(sequelize: Sequelize, opts: DbMixinOptions, url: string): Promise<string[]> {
	const lockClient = new Client({ connectionString: url });
	await lockClient.connect();
	try {
		// Poll with try-lock rather than block: the embedded PGlite runs one
		// statement at a time, so a blocking lock wait would stall the holder too.
		for (;;) {
			const { rows } = await lockClient.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1) AS locked", [MIGRATION_LOCK_KEY]);
			if (rows[0]?.locked) break;
			await new Promise((resolve) => setTimeout(resolve, 100));
		}
		const umzug = new Umzug<QueryInterface>({
			migrations: opts.migrations.map((m) => ({
				name: `${opts.service}/${m.name}`,
				up: async () => m.up(sequelize.getQueryInterface(), sequelize),
				down: async () => (m.down ? m.down(sequelize.getQueryInterface(), sequelize) : undefined),
			})),
			context: sequelize.getQueryInterface(),
			storage: new SequelizeStorage({ sequelize, tableName: "schema_migrations" }),
			logger: undefined,
		});
		const done = await umzug.up();
		return done.map((m) => m.name);
	} finally {
		await lockClient.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => undefined);
		await lockClient.end().catch(() => undefined);
	}
}

/**
 * DB mixin factory (kantab style): gives the service `this.sequelize`, applies
 * the service's own migrations when it starts and releases the pool when it
 * stops. Each service owns its tables and is their only writer.
 */
export function DbMixin(opts: DbMixinOptions): Partial<ServiceSchema> {
	return {
		actions: {
			/**
			 * Readiness probe of this service and its database: the gateway's
			 * `GET /health/ready` calls it on every service it needs. Internal only.
			 */
			dbHealth: {
				access: "internal",
				async handler(this: Service & Record<string, any>): Promise<{ ok: true }> {
					await this.sequelize.query("SELECT 1");
					return { ok: true };
				},
			},
		},
		created(this: Service & Partial<DbThis>) {
			const env = serviceEnv(this);
			this.databaseUrl = databaseUrl(env);
			this.sequelize = acquireSequelize(this.databaseUrl, env);
		},
		async started(this: Service & Record<string, any>) {
			const applied = await runMigrations(this.sequelize, opts, this.databaseUrl);
			if (applied.length > 0) this.logger.info(`Applied migrations: ${applied.join(", ")}`);
		},
		async stopped(this: Service & Record<string, any>) {
			await releaseSequelize(this.sequelize);
		},
	};
}

/** Postgres unique_violation, whatever layer (pg or Sequelize) raised it. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
	const e = err as { name?: string; parent?: { code?: string; constraint?: string }; original?: { code?: string; constraint?: string }; code?: string; constraint?: string };
	const pgErr = e?.parent ?? e?.original ?? e;
	if (pgErr?.code !== "23505" && e?.name !== "SequelizeUniqueConstraintError") return false;
	return constraint === undefined || pgErr?.constraint === constraint;
}

export type { Transaction };
