import { randomBytes } from "node:crypto";
import { Client } from "pg";

/** The server PostgreSQL the integration tests run against (CI and dev machines have it). */
export const SERVER_DATABASE_URL = process.env.TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
export const TEST_NATS_URL = process.env.TEST_NATS_URL || "nats://127.0.0.1:4222";

export interface TestDatabase {
	url: string;
	name: string;
	drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
	const u = new URL(url);
	u.pathname = `/${database}`;
	return u.toString();
}

/**
 * A fresh, empty database on the server PostgreSQL for one test file, so
 * suites never see each other's rows. Dropped (with its connections) after.
 */
export async function createTestDatabase(label = "t"): Promise<TestDatabase> {
	const name = `ride_${label.replace(/[^a-z0-9]/gi, "").toLowerCase().slice(0, 20)}_${randomBytes(4).toString("hex")}`;
	const admin = new Client({ connectionString: SERVER_DATABASE_URL });
	await admin.connect();
	try {
		await admin.query(`CREATE DATABASE "${name}"`);
	} finally {
		await admin.end();
	}
	return {
		name,
		url: withDatabase(SERVER_DATABASE_URL, name),
		async drop() {
			const c = new Client({ connectionString: SERVER_DATABASE_URL });
			await c.connect();
			try {
				await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
			} finally {
				await c.end();
			}
		},
	};
}

/** A plain pg client on a test database, for asserting what the services wrote. */
export async function connect(url: string): Promise<Client> {
	const c = new Client({ connectionString: url });
	await c.connect();
	return c;
}
