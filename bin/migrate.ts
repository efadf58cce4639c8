import { existsSync } from "node:fs";
import { join } from "node:path";
import { acquireSequelize, releaseSequelize, runMigrations, withMigrationLock, type Migration } from "../mixins/db.mixin";
import { envString, readSettings } from "../lib/settings";
import { serviceLogins, type ServiceLogin } from "../lib/db-roles";
import { applyServiceRoles } from "../lib/db-role-grants";
import { ALL_SERVICES } from "../services";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "../runtime/embedded-postgres";

/**
 * `npm run migrate`: applies every service's migrations
 * (`services/<name>/migrations/index.ts`, in ALL_SERVICES order) against
 * DATABASE_URL, or the embedded database in DATA_DIR when it is unset, then
 * exits. Services also migrate themselves when they start (under the same
 * advisory lock), so this is for deployments that migrate as a separate step.
 *
 * With `DATABASE_ADMIN_URL` (Kubernetes) it migrates as that admin instead,
 * then gives every service its own role (lib/db-roles.ts): the user and
 * password of each service's `DATABASE_URL`, handed to it as
 * `<SERVICE>_DATABASE_URL` (e.g. `ORDERS_DATABASE_URL`). The services then
 * run with `MIGRATE_ON_START=false`, since their roles may not change the
 * schema.
 *
 * Prints one line per service; exit code 0 done, 1 failed.
 */

function migrationsOf(service: string): Migration[] | undefined {
	const dir = join(__dirname, "..", "services", service, "migrations");
	if (!existsSync(dir)) return undefined;
	// eslint-disable-next-line @typescript-eslint/no-require-imports
	const mod = require(dir) as { migrations?: Migration[] };
	if (!Array.isArray(mod.migrations)) throw new Error(`services/${service}/migrations exports no "migrations" list`);
	return mod.migrations;
}

async function main(): Promise<void> {
	const settings = readSettings(process.env);
	let embedded: EmbeddedPostgres | undefined;
	const adminUrl = envString(process.env, "DATABASE_ADMIN_URL");
	let url = adminUrl ?? settings.databaseUrl;
	// Checked before anything changes: a missing or shared service login stops the Job at once.
	let logins: ServiceLogin[] | undefined;
	if (adminUrl) logins = serviceLogins(process.env, decodeURIComponent(new URL(adminUrl).username));
	if (!url) {
		embedded = await startEmbeddedPostgres(settings.dataDir);
		url = embedded.url;
	}
	// The embedded PGlite shares one session among its connections: no prepared statements (as runtime/node.ts).
	const sequelize = acquireSequelize(url, embedded ? { ...process.env, DB_PREPARED_STATEMENTS: "off" } : process.env);
	try {
		for (const service of ALL_SERVICES) {
			const migrations = migrationsOf(service);
			if (!migrations) continue;
			const applied = await runMigrations(sequelize, { service, migrations }, url);
			process.stdout.write(applied.length > 0 ? `${service}: applied ${applied.join(", ")}\n` : `${service}: up to date\n`);
		}
		if (logins) {
			const given = logins;
			// One transaction: the roles, owners and grants change together or not at all.
			await withMigrationLock(url, async (client) => {
				await client.query("BEGIN");
				try {
					await applyServiceRoles(client, given);
					await client.query("COMMIT");
				} catch (err) {
					await client.query("ROLLBACK").catch(() => undefined);
					throw err;
				}
			});
			for (const l of given) process.stdout.write(`${l.service}: role ${l.role} owns its tables\n`);
		}
	} finally {
		await releaseSequelize(sequelize);
		await embedded?.stop();
	}
}

main().then(
	() => process.exit(0),
	(err: unknown) => {
		process.stderr.write(`migrate failed: ${err instanceof Error ? err.message : String(err)}\n`);
		process.exit(1);
	},
);
