import type { Env } from "./settings";

/**
 * Which PostgreSQL objects each service owns, and what it may read of
 * another's. In a deployment with `DATABASE_ADMIN_URL` (Kubernetes), the
 * migrate Job runs every migration as the admin, then hands each table and
 * function listed here to its service's own login role (the user in that
 * service's `DATABASE_URL`): a role owns its tables and nothing else, is no
 * superuser, and cannot create tables. A migration that creates a table or a
 * function missing from this list stops the migrate Job
 * (`unlistedObjects`), and test/integration/platform/db-roles.test.ts fails,
 * so nothing new is left owned by the admin or readable by every service.
 */
export interface ServiceDbRole {
	/** Tables the service owns (its migrations create them; it alone writes them). */
	tables: readonly string[];
	/** Functions the service owns (executable by it alone). */
	functions: readonly string[];
	/** Other services' tables it may read (SELECT only). */
	reads: readonly string[];
}

export const DB_ROLES = {
	partners: { tables: ["partners", "api_keys", "webhook_secrets", "partners_audit"], functions: [], reads: [] },
	pricing: { tables: ["pricing_secrets"], functions: [], reads: [] },
	riders: { tables: ["riders"], functions: [], reads: [] },
	// ride_events_fill_mode: the trigger that gives a ride event its order's mode (orders migration 004).
	orders: { tables: ["orders", "ride_events", "feedback", "idempotency_keys"], functions: ["ride_events_fill_mode"], reads: [] },
	// dispatch_rides_manual_waits: the trigger that keeps manual sandbox rides out of matching and the location cadence (dispatch migration 009).
	dispatch: {
		tables: ["drivers", "dispatch_rides", "dispatch_offers", "driver_tokens", "dispatch_audit"],
		functions: ["dispatch_rides_manual_waits"],
		reads: [],
	},
	notifications: {
		tables: ["webhook_deliveries", "webhook_attempts", "webhook_hosts", "webhook_ingest_cursor", "webhook_partner_hosts"],
		functions: ["webhook_claim_v1", "webhook_claim_v2", "webhook_claim_v3", "webhook_claim_v4"],
		// The transactional outbox: orders appends ride events in the ride's transaction, notifications reads them.
		reads: ["ride_events"],
	},
} as const satisfies Record<string, ServiceDbRole>;

export type DbService = keyof typeof DB_ROLES;
export const DB_SERVICES = Object.keys(DB_ROLES) as DbService[];

/** Umzug's record of applied migrations (`<service>/<name>`): the admin writes it, every service role may only read it. */
export const MIGRATIONS_TABLE = "schema_migrations";

/** What a schema holds: its tables (views, sequences not owned by a column, …) and functions. */
export interface SchemaCatalog {
	tables: string[];
	functions: string[];
}

/** Objects in the schema that no service owns in DB_ROLES, e.g. `table rogue` (the Job refuses to go on). */
export function unlistedObjects(catalog: SchemaCatalog): string[] {
	const tables = new Set<string>([MIGRATIONS_TABLE, ...DB_SERVICES.flatMap((s) => DB_ROLES[s].tables)]);
	const functions = new Set<string>(DB_SERVICES.flatMap((s) => DB_ROLES[s].functions));
	return [
		...catalog.tables.filter((t) => !tables.has(t)).map((t) => `table ${t}`),
		...catalog.functions.filter((f) => !functions.has(f)).map((f) => `function ${f}`),
	];
}

/** Objects DB_ROLES lists that the schema does not have (a stale entry: the list must say what is there). */
export function missingObjects(catalog: SchemaCatalog): string[] {
	const tables = new Set(catalog.tables);
	const functions = new Set(catalog.functions);
	return DB_SERVICES.flatMap((s) => [
		...DB_ROLES[s].tables.filter((t) => !tables.has(t)).map((t) => `table ${t} (${s})`),
		...DB_ROLES[s].functions.filter((f) => !functions.has(f)).map((f) => `function ${f} (${s})`),
	]);
}

/** A service's login role, from its own `DATABASE_URL`. */
export interface ServiceLogin {
	service: DbService;
	role: string;
	/** Empty when the URL has none (a server that authenticates otherwise, e.g. by certificate). */
	password: string;
}

/** The env variable that hands the migrate Job a service's `DATABASE_URL` (its Secret's key): `ORDERS_DATABASE_URL`. */
export const serviceUrlVariable = (service: DbService): string => `${service.toUpperCase()}_DATABASE_URL`;

const ROLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * The login of every service from `<SERVICE>_DATABASE_URL`, checked: each
 * is set, is a plain lower-case name, differs from the admin and from every
 * other service's. Throws one message naming every problem (never a password).
 */
export function serviceLogins(env: Env, adminRole: string): ServiceLogin[] {
	const problems: string[] = [];
	const logins: ServiceLogin[] = [];
	for (const service of DB_SERVICES) {
		const name = serviceUrlVariable(service);
		const raw = env[name];
		if (!raw) {
			problems.push(`${name} is not set`);
			continue;
		}
		let url: URL;
		try {
			url = new URL(raw);
		} catch {
			problems.push(`${name} is not a URL`);
			continue;
		}
		const role = decodeURIComponent(url.username);
		if (!ROLE_NAME.test(role)) {
			problems.push(`${name}: the user must be a lower-case name (letters, digits, _)`);
			continue;
		}
		if (role === adminRole) {
			problems.push(`${name}: the user is the admin (${role}); each service needs its own role`);
			continue;
		}
		const taken = logins.find((l) => l.role === role);
		if (taken) {
			problems.push(`${name}: the user ${role} is already ${taken.service}'s; each service needs its own role`);
			continue;
		}
		logins.push({ service, role, password: decodeURIComponent(url.password) });
	}
	if (problems.length > 0) throw new Error(`service database roles: ${problems.join("; ")}`);
	return logins;
}
