import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "./db";
import { startTestNode, type TestNode, type TestNodeOptions } from "./node";

/** A test file's own database, a node running the services under test on it, and a pg client to check what they wrote. */
export interface Testbed {
	db: TestDatabase;
	node: TestNode;
	/** May be replaced (e.g. after the test cut every connection): `stop` ends whichever client is here then. */
	pg: Client;
	/** Ends the pg client, stops the node, drops the database. */
	stop(): Promise<void>;
}

/** Creates the database (named after `label`), starts the node on it and connects; a start that fails undoes what it did. */
export async function startTestbed(label: string, opts: Omit<TestNodeOptions, "databaseUrl">): Promise<Testbed> {
	const db = await createTestDatabase(label);
	const bed: Partial<Testbed> = { db };
	bed.stop = async () => {
		await bed.pg?.end().catch(() => undefined);
		await bed.node?.stop();
		await db.drop();
	};
	try {
		bed.node = await startTestNode({ ...opts, databaseUrl: db.url });
		bed.pg = await connect(db.url);
		return bed as Testbed;
	} catch (err) {
		await bed.stop().catch(() => undefined);
		throw err;
	}
}
