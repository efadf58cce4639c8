import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "./db";
import { startTestNode, type TestNode, type TestNodeOptions, TELEPORTING_DRIVERS } from "./node";

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

/** A testbed whose dispatch matches with a fixed backoff, and a live partner to book its rides under. */
export interface BackoffTestbed extends Testbed {
	partnerId: string;
}

/**
 * The dispatch suites' live-mode testbed (no simulated fleet): a ride nobody
 * could be offered is looked at again only after `backoffMs` (minimum and
 * maximum alike), capped at its `timeoutMs` dispatch deadline; matching ticks
 * every 50 ms and offers last 30 s. `name` labels the database and names the
 * live partner.
 */
export async function startBackoffTestbed(name: string, o: { backoffMs: number; timeoutMs: number }): Promise<BackoffTestbed> {
	const bed = await startTestbed(name, {
		services: ["partners", "riders", "pricing", "orders", "dispatch", "notifications"],
		env: {
			...TELEPORTING_DRIVERS,
			FLEET_MODE: "live",
			DISPATCH_RETRY_MS: String(o.backoffMs),
			DISPATCH_RETRY_MAX_MS: String(o.backoffMs),
			DISPATCH_TIMEOUT_MS: String(o.timeoutMs),
			DISPATCH_TICK_MS: "50",
			DISPATCH_OFFER_TIMEOUT_MS: "30000",
		},
	});
	try {
		const { partnerId } = await bed.node.broker.call<{ partnerId: string }, unknown>("partners.create", { name, mode: "live" });
		return Object.assign(bed, { partnerId });
	} catch (err) {
		await bed.stop().catch(() => undefined);
		throw err;
	}
}
