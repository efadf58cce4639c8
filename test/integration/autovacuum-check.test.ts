import { AUTOVACUUM_OFF_WARNING, autovacuumOn } from "../../runtime/autovacuum-check";
import { connect, createTestDatabase, type TestDatabase } from "../helpers/db";
import { startTestNode } from "../helpers/node";

/**
 * A process on a server PostgreSQL with autovacuum off says so once at
 * start (runtime/autovacuum-check.ts); with it on, nothing. The test reads
 * the server's setting and expects accordingly: it does not change it.
 */

let db: TestDatabase;

beforeAll(async () => {
	db = await createTestDatabase("avcheck");
});

afterAll(async () => {
	await db?.drop();
});

test("autovacuumOn reads the server's setting", async () => {
	const client = await connect(db.url);
	try {
		const { rows } = await client.query<{ autovacuum: string }>("SHOW autovacuum");
		expect(await autovacuumOn(db.url)).toBe(rows[0].autovacuum === "on");
	} finally {
		await client.end();
	}
});

test("nodes warn only when autovacuum is off, and only once per process", async () => {
	const off = !(await autovacuumOn(db.url));
	// Caught, not printed: the warning is what the test reads.
	const spy = jest.spyOn(console, "warn").mockImplementation(() => undefined);
	const warned = () => spy.mock.calls.map((args) => args.join(" ")).filter((line) => line.includes(AUTOVACUUM_OFF_WARNING));
	try {
		const first = await startTestNode({ databaseUrl: db.url, services: ["riders"] });
		await first.stop();
		expect(warned()).toHaveLength(off ? 1 : 0);
		const second = await startTestNode({ databaseUrl: db.url, services: ["riders"] });
		await second.stop();
		expect(warned()).toHaveLength(off ? 1 : 0);
	} finally {
		spy.mockRestore();
	}
});
