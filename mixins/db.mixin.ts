import type { MetricRegistry, ServiceSchema, Service, ServiceSettingSchema } from "moleculer";
import { QueryTypes, Sequelize, type QueryInterface, type Transaction } from "sequelize";
import { Umzug, SequelizeStorage } from "umzug";
import * as pg from "pg";
import { Client } from "pg";
import { envBool, envInt, envString, serviceEnv, type Env } from "../lib/settings";

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

/**
 * The one way every repo runs SQL: rows of a statement, a statement for its
 * effect, a transaction, the database's clock. A statement given a
 * transaction runs inside it; otherwise it runs on its own (autocommit).
 * Repos take a `Db`, never a Sequelize, so a unit test can hand them a fake.
 */
export class Db {
	constructor(readonly sequelize: Sequelize) {}

	/** The rows a statement returns (`SELECT`, or anything with `RETURNING`). */
	rows<T extends object>(sql: string, bind: unknown[] = [], t?: Transaction): Promise<T[]> {
		return this.sequelize.query<T>(sql, { bind, type: QueryTypes.SELECT, transaction: t });
	}

	/** The first row a statement returns, or undefined. */
	async row<T extends object>(sql: string, bind: unknown[] = [], t?: Transaction): Promise<T | undefined> {
		return (await this.rows<T>(sql, bind, t))[0];
	}

	/** A statement run for its effect. */
	async run(sql: string, bind: unknown[] = [], t?: Transaction): Promise<void> {
		await this.sequelize.query(sql, { bind, transaction: t });
	}

	/** `fn` in one transaction: committed when it resolves, rolled back when it throws. */
	tx<T>(fn: (t: Transaction) => Promise<T>): Promise<T> {
		return this.sequelize.transaction((t) => fn(t));
	}

	/** The database's clock (every instance's deadlines are in its time). */
	async now(): Promise<Date> {
		return (await this.rows<{ now: Date }>("SELECT now() AS now"))[0].now;
	}
}

export interface DbThis {
	sequelize: Sequelize;
	/** The service's SQL runner: what its repos are built on. */
	db: Db;
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

/**
 * At most this many statement texts get a name per process; the rest go
 * unnamed. The code has ~170 statements, so this only bounds what each
 * connection keeps on the server should some text ever vary per call.
 */
export const MAX_PREPARED_STATEMENTS = 256;
/** The name of each prepared text: one text, one name, on every connection of the process. */
const statementNames = new Map<string, string>();

function statementName(text: string): string | undefined {
	let name = statementNames.get(text);
	if (name === undefined && statementNames.size < MAX_PREPARED_STATEMENTS) {
		name = `ride_${statementNames.size + 1}`;
		statementNames.set(text, name);
	}
	return name;
}

/** PostgreSQL re-planned a prepared `SELECT *`/`RETURNING *` whose table gained a column (a migration by a newer instance). */
const isStalePlan = (err: unknown): boolean =>
	(err as { code?: unknown } | null)?.code === "0A000" && /cached plan must not change result type/.test(String((err as Error).message));

type QueryCallback = (err: Error | null, result?: unknown) => void;

/**
 * GuardedClient that prepares each autocommit statement with parameters
 * once per connection (`DB_PREPARED_STATEMENTS`): pg sends a named Parse
 * the first time and only Bind/Execute after, and PostgreSQL keeps the plan
 * (a generic one once it is no dearer than the custom ones). Sequelize sends
 * every statement unnamed, so PostgreSQL parsed and planned each batch
 * again: a quarter of the hot statements' time in create-order.
 *
 * Only statements outside a transaction (the connection idle, which is
 * where every batched insert and the matching pass run) are named, because
 * a stale plan can then be retried unnamed: a text that meets "cached plan
 * must not change result type" is sent unnamed on this connection from then
 * on, and this call is retried at once (the error comes before anything
 * ran). Statements inside transactions go unnamed as before.
 */
class PreparingClient extends GuardedClient {
	/** Texts whose prepared plan went stale on this connection: unnamed from then on. */
	private readonly unprepared = new Set<string>();

	// pg's query() is overloaded (promise, callback, submittable); this passes whatever it returns through.
	// eslint-disable-next-line @typescript-eslint/no-explicit-any
	query(config: unknown, values?: unknown, callback?: unknown): any {
		const query = super.query as (...args: unknown[]) => unknown;
		if (
			typeof config === "string" &&
			Array.isArray(values) &&
			values.length > 0 &&
			typeof callback === "function" &&
			this.getTransactionStatus() === "I" &&
			!this.unprepared.has(config)
		) {
			const name = statementName(config);
			if (name !== undefined) {
				const done = callback as QueryCallback;
				return query.call(this, { name, text: config, values }, (err: Error | null, result?: unknown) => {
					if (err && isStalePlan(err)) {
						this.unprepared.add(config);
						query.call(this, config, values, done);
						return;
					}
					done(err, result);
				});
			}
		}
		return query.call(this, config, values, callback);
	}
}

/** The pg module Sequelize uses, with our Client; everything else is pg's own. */
const pgWith = (client: typeof pg.Client) => Object.create(pg, { Client: { value: client, enumerable: true } }) as typeof pg;
const guardedPg = pgWith(GuardedClient);
const preparingPg = pgWith(PreparingClient);

/** One pool per process and URL: services that share a process share connections. */
const pools = new Map<string, { sequelize: Sequelize; users: number; probe?: NodeJS.Timeout }>();

/** Gauge: 1 while this process's database answers `SELECT 1`, 0 when it does not (docs/OPERATIONS.md, "Alerts"). */
export const DATABASE_UP_METRIC = "database.up";
/** How often each pool is probed for that gauge (only with metrics on): one trivial statement per process. */
export const DATABASE_PROBE_MS = 10_000;

/**
 * Probes the pool of `sequelize` every DATABASE_PROBE_MS for the
 * `database_up` gauge (once per pool, whatever number of services share it),
 * until the pool is released. The statement waits at most the acquire bound.
 */
export function watchDatabase(sequelize: Sequelize, metrics: MetricRegistry): void {
	const entry = [...pools.values()].find((e) => e.sequelize === sequelize);
	if (!entry || entry.probe) return;
	if (!metrics.hasMetric(DATABASE_UP_METRIC))
		metrics.register({ type: "gauge", name: DATABASE_UP_METRIC, description: "1 while this process's database answers, 0 when it does not" });
	const probe = () =>
		void sequelize.query("SELECT 1").then(
			() => metrics.set(DATABASE_UP_METRIC, 1),
			() => metrics.set(DATABASE_UP_METRIC, 0),
		);
	probe();
	entry.probe = setInterval(probe, DATABASE_PROBE_MS);
	entry.probe.unref();
}

export function databaseUrl(env: Env = process.env): string {
	const url = envString(env, "DATABASE_URL");
	if (!url) throw new Error("DATABASE_URL is not set (runtime/node.ts starts the embedded database when it is unset)");
	return url;
}

/**
 * `DB_PREPARED_STATEMENTS` (default on): see PreparingClient. Off behind a
 * pooler that does not keep a connection's prepared statements (PgBouncer
 * in transaction mode before 1.21), and for the embedded PGlite, whose
 * socket server shares one session among its connections.
 */
export function preparedStatements(env: Env = process.env): boolean {
	return envBool(env, "DB_PREPARED_STATEMENTS", true);
}

/**
 * Bounds of reaching the database (docs/OPERATIONS.md): `DB_CONNECT_TIMEOUT_MS`
 * for one new connection (TCP, TLS and log-in), `DB_ACQUIRE_TIMEOUT_MS` for a
 * statement's wait for a pooled connection (including that connect).
 */
export function databaseTimeouts(env: Env = process.env): { connectMs: number; acquireMs: number } {
	return { connectMs: envInt(env, "DB_CONNECT_TIMEOUT_MS", 2_000, 100), acquireMs: envInt(env, "DB_ACQUIRE_TIMEOUT_MS", 5_000, 100) };
}

export function acquireSequelize(url: string, env: Env = process.env): Sequelize {
	let entry = pools.get(url);
	if (!entry) {
		const max = envInt(env, "DB_POOL_MAX", 10, 1);
		const { connectMs, acquireMs } = databaseTimeouts(env);
		const sequelize = new Sequelize(url, {
			dialect: "postgres",
			dialectModule: preparedStatements(env) ? preparingPg : guardedPg,
			logging: false,
			// A database that cannot be reached fails a statement within these bounds (503 at the gateway), not after pg's
			// unbounded connect or Sequelize's 60 s acquire; the pool tries again on the next statement, so work resumes
			// as soon as it is back.
			pool: { max, min: 0, idle: 10_000, acquire: acquireMs },
			dialectOptions: { application_name: envString(env, "SERVICES", "ride-platform"), connectionTimeoutMillis: connectMs },
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
			clearInterval(entry.probe);
			await sequelize.close();
		}
		return;
	}
}

/** Serialises migrations across processes (replicas starting together) with a session advisory lock. */
const MIGRATION_LOCK_KEY = 0x72696465; // "ride"

/**
 * `fn` while holding the migration lock (a session advisory lock on a
 * connection of its own, handed to `fn`): migrations and the migrate Job's
 * role grants never run at the same time as another instance's.
 */
export async function withMigrationLock<T>(url: string, fn: (client: Client) => Promise<T>): Promise<T> {
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
		return await fn(lockClient);
	} finally {
		await lockClient.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => undefined);
		await lockClient.end().catch(() => undefined);
	}
}

export async function runMigrations(sequelize: Sequelize, opts: DbMixinOptions, url: string): Promise<string[]> {
	return withMigrationLock(url, async () => {
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
	});
}

/**
 * This service's migrations that `schema_migrations` does not list: what a
 * service that does not migrate itself (`MIGRATE_ON_START=false`) checks at
 * start. Its role may only read that table (lib/db-roles.ts).
 */
export async function pendingMigrations(db: Db, opts: DbMixinOptions): Promise<string[]> {
	let applied: Set<string>;
	try {
		const rows = await db.rows<{ name: string }>("SELECT name FROM schema_migrations WHERE name LIKE $1", [`${opts.service}/%`]);
		applied = new Set(rows.map((r) => r.name));
	} catch (err) {
		// 42P01: no migrations table yet, nothing applied.
		if ((err as { parent?: { code?: string } }).parent?.code !== "42P01") throw err;
		applied = new Set();
	}
	return opts.migrations.map((m) => `${opts.service}/${m.name}`).filter((name) => !applied.has(name));
}

/**
 * DB mixin factory (kantab style): gives the service `this.sequelize`, applies
 * the service's own migrations when it starts and releases the pool when it
 * stops. Each service owns its tables and is their only writer.
 */
export function DbMixin(opts: DbMixinOptions): Partial<ServiceSchema> {
	const schema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, DbThis>> = {
		actions: {
			/**
			 * Readiness probe of this service and its database: the gateway's
			 * `GET /health/ready` calls it on every service it needs. Internal only.
			 */
			dbHealth: {
				access: "internal",
				async handler(this: Service & DbThis): Promise<{ ok: true }> {
					await this.sequelize.query("SELECT 1");
					return { ok: true };
				},
			},
		},
		created(this: Service & DbThis) {
			const env = serviceEnv(this);
			this.databaseUrl = databaseUrl(env);
			this.sequelize = acquireSequelize(this.databaseUrl, env);
			this.db = new Db(this.sequelize);
		},
		async started(this: Service & DbThis) {
			if (this.broker.isMetricsEnabled()) watchDatabase(this.sequelize, this.broker.metrics);
			// `MIGRATE_ON_START=false` where the service's role may not change the schema (Kubernetes:
			// the migrate Job migrates as the admin, lib/db-roles.ts): then it only checks it is up to date.
			if (!envBool(serviceEnv(this), "MIGRATE_ON_START", true)) {
				const pending = await pendingMigrations(this.db, opts);
				if (pending.length > 0) throw new Error(`Migrations not applied: ${pending.join(", ")}. Run the migrate Job (npm run migrate) first.`);
				return;
			}
			const applied = await runMigrations(this.sequelize, opts, this.databaseUrl);
			if (applied.length > 0) this.logger.info(`Applied migrations: ${applied.join(", ")}`);
		},
		async stopped(this: Service & DbThis) {
			await releaseSequelize(this.sequelize);
		},
	};
	// Typed against its host above; mixed in as any mixin is.
	return schema as Partial<ServiceSchema>;
}

/** Postgres unique_violation, whatever layer (pg or Sequelize) raised it. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
	const e = err as {
		name?: string;
		parent?: { code?: string; constraint?: string };
		original?: { code?: string; constraint?: string };
		code?: string;
		constraint?: string;
	};
	const pgErr = e?.parent ?? e?.original ?? e;
	if (pgErr?.code !== "23505" && e?.name !== "SequelizeUniqueConstraintError") return false;
	return constraint === undefined || pgErr?.constraint === constraint;
}

export type { Transaction };
