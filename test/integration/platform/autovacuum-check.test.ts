import { AUTOVACUUM_OFF_WARNING, autovacuumOn } from "../../../runtime/autovacuum-check";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { startTestNode } from "../../helpers/node";

/**
 * A process on a server PostgreSQL with autovacuum off says so once at
 * start (runtime/autovacuum-check.ts); with it on, nothing. The server's
 * setting is read, never changed: the two cases are driven by a stand-in
 * answer, and nodes on the real server are checked against what it says.
 */

let db: TestDatabase;

beforeAll(async () => {
	db = await createTestDatabase("avcheck");
});

afterAll(async () => {
	await db?.drop();
});

/** A fresh copy of the module: its once-per-process state starts empty. */
function freshCheck(): typeof import("../../../runtime/autovacuum-check") {
	let mod: typeof import("../../../runtime/autovacuum-check") | undefined;
	jest.isolateModules(() => {
		mod = jest.requireActual("../../../runtime/autovacuum-check");
	});
	return mod!;
}

test("autovacuumOn reads the server's setting", async () => {
	const client = await connect(db.url);
	try {
		const { rows } = await client.query<{ autovacuum: string }>("SHOW autovacuum");
		expect(await autovacuumOn(db.url)).toBe(rows[0].autovacuum === "on");
	} finally {
		await client.end();
	}
});

test("off: one warning per process, and the server is asked once", async () => {
	const { warnOnceIfAutovacuumOff } = freshCheck();
	const warnings: string[] = [];
	const isOn = jest.fn(async () => false);
	await warnOnceIfAutovacuumOff(db.url, (m) => warnings.push(m), isOn);
	await warnOnceIfAutovacuumOff(db.url, (m) => warnings.push(m), isOn);
	expect(warnings).toEqual([AUTOVACUUM_OFF_WARNING]);
	expect(isOn).toHaveBeenCalledTimes(1);
});

test("on: no warning; a check that fails is one warning, without a stack", async () => {
	const on = freshCheck();
	const warnings: string[] = [];
	await on.warnOnceIfAutovacuumOff(
		db.url,
		(m) => warnings.push(m),
		async () => true,
	);
	expect(warnings).toEqual([]);

	const failing = freshCheck();
	await failing.warnOnceIfAutovacuumOff(
		db.url,
		(m) => warnings.push(m),
		async () => {
			throw new Error("connect ECONNREFUSED 127.0.0.1:5432");
		},
	);
	expect(warnings).toEqual(["Could not ask the database whether autovacuum is on: connect ECONNREFUSED 127.0.0.1:5432"]);
});

test("nodes on the real server warn as its setting says, once per process", async () => {
	const off = !(await autovacuumOn(db.url));
	// Caught, not printed: the warning is what the test reads.
	const spy = jest.spyOn(console, "warn").mockImplementation(() => undefined);
	const warned = () => spy.mock.calls.map((args) => args.join(" ")).filter((line) => line.includes(AUTOVACUUM_OFF_WARNING));
	try {
		const first = await startTestNode({ databaseUrl: db.url, services: ["riders"] });
		await first.stop();
		const second = await startTestNode({ databaseUrl: db.url, services: ["riders"] });
		await second.stop();
		expect(warned()).toHaveLength(off ? 1 : 0);
	} finally {
		spy.mockRestore();
	}
});
