import { existsSync } from "node:fs";
import { join } from "node:path";
import { acquireSequelize, releaseSequelize, runMigrations, type Migration } from "../mixins/db.mixin";
import { readSettings } from "../lib/settings";
import { ALL_SERVICES } from "../services";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "../runtime/embedded-postgres";

/**
 * `npm run migrate`: applies every service's migrations
 * (`services/<name>/migrations/index.ts`, in ALL_SERVICES order) against
 * DATABASE_URL, or the embedded database in DATA_DIR when it is unset, then
 * exits. Services also migrate themselves when they start (under the same
 * advisory lock), so this is for deployments that migrate as a separate step.
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
	let url = settings.databaseUrl;
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
