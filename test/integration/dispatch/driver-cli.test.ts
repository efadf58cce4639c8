import { createTestDatabase, TEST_NATS_URL, type TestDatabase } from "../../helpers/db";
import { httpRequest } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { runScript } from "../../helpers/processes";
import type { DriverTokenCreated, DriverTokenView } from "../../../contracts/driver";

/**
 * `npm run driver` as operators run it: a separate process against the real
 * PostgreSQL prints a token once; the token works over HTTP on a running
 * gateway; `revoke` (told the cluster's TRANSPORTER) announces the revocation
 * and the running gateway refuses the token. The partner API's per-caller
 * rate limit applies per driver.
 */

let db: TestDatabase;
let node: TestNode;
const namespace = uniqueNamespace("drvcli");

beforeAll(async () => {
	db = await createTestDatabase("drivercli");
	node = await startTestNode({
		databaseUrl: db.url,
		services: ["gateway", "dispatch"],
		nats: { namespace },
		env: { AUTH_FAILURE_LIMIT_PER_MINUTE: "0", RATE_LIMIT_PER_MINUTE: "3", RATE_LIMIT_BURST: "3" },
	});
});

afterAll(async () => {
	await node?.stop();
	await db?.drop();
});

const offers = (token: string) => httpRequest(`${node.baseUrl}/driver/offers`, { headers: { Authorization: `Bearer ${token}` }, body: { waitSeconds: 0 } });

it("create prints driverId and a token once; the token drives /driver (rate-limited per driver); list never shows it; revoke is refused at once", async () => {
	const created = await runScript(
		"bin/driver.ts",
		["create", "--name", "Ravi K", "--phone", "+919800000777", "--vehicle", "KA01AB1234", "--service-type", "cab"],
		{ DATABASE_URL: db.url, LOGLEVEL: "info" },
	);
	expect(created.code).toBe(0);
	const answer = JSON.parse(created.stdout) as DriverTokenCreated;
	expect(answer.driverId).toMatch(/^drv_/);
	expect(answer.token).toMatch(/^rdt_/);

	const before = await offers(answer.token);
	expect(before.status).toBe(200);
	expect(before.body).toMatchObject({ driver: { driverId: answer.driverId, status: "offline" }, offer: null, ride: null });

	// Three requests a minute on this gateway: the fourth is limited, like a partner's.
	expect(before.headers.get("x-ratelimit-limit")).toBe("3");
	expect((await offers(answer.token)).status).toBe(200);
	expect((await offers(answer.token)).status).toBe(200);
	const limited = await offers(answer.token);
	expect(limited.status).toBe(429);
	expect(limited.body).toMatchObject({ code: "RATE_LIMITED" });
	expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);

	const listed = await runScript("bin/driver.ts", ["list"], { DATABASE_URL: db.url });
	expect(listed.code).toBe(0);
	expect(listed.stdout).not.toContain(answer.token);
	expect((JSON.parse(listed.stdout) as DriverTokenView[]).map((t) => t.tokenId)).toEqual([answer.tokenId]);

	const revoked = await runScript("bin/driver.ts", ["revoke", "--driver", answer.driverId], {
		DATABASE_URL: db.url,
		TRANSPORTER: TEST_NATS_URL,
		NAMESPACE: namespace,
	});
	expect(revoked.code).toBe(0);
	expect(revoked.stderr).not.toMatch(/Could not announce/);
	expect(JSON.parse(revoked.stdout)).toEqual({ driverId: answer.driverId, revoked: 1 });
	const after = await offers(answer.token);
	expect(after.status).toBe(401);
	expect(after.body).toMatchObject({ code: "UNAUTHORIZED" });

	const usage = await runScript("bin/driver.ts", ["create", "--name", "No Phone"], { DATABASE_URL: db.url });
	expect(usage.code).toBe(2);
	expect(usage.stdout).toBe("");
});

it("create --expires-in gives a token a lifetime; revoke --token and --prefix revoke one token each, at once on the running gateway", async () => {
	const cli = (args: string[]) => runScript("bin/driver.ts", args, { DATABASE_URL: db.url, TRANSPORTER: TEST_NATS_URL, NAMESPACE: namespace });
	const create = ["create", "--name", "Asha P", "--phone", "+919800000778", "--vehicle", "KA01AB5678", "--service-type", "cab"];
	const issued = Date.now();
	const short = await cli([...create, "--expires-in", "30d"]);
	expect(short.code).toBe(0);
	const a = JSON.parse(short.stdout) as DriverTokenCreated;
	expect(Date.parse(a.expiresAt!) - issued).toBeGreaterThan(29 * 86_400_000);
	expect(a.tokenPrefix).toBe(a.token.slice(0, 12));
	const b = JSON.parse((await cli(create)).stdout) as DriverTokenCreated;
	expect(b.driverId).toBe(a.driverId);
	expect(b.expiresAt).toBeNull();
	expect((await offers(a.token)).status).toBe(200);
	expect((await offers(b.token)).status).toBe(200);

	const one = await cli(["revoke", "--token", a.tokenId]);
	expect(one.code).toBe(0);
	expect(one.stderr).not.toMatch(/Could not announce/);
	expect(JSON.parse(one.stdout)).toEqual({ tokenId: a.tokenId, driverId: a.driverId, revoked: true, remainingTokens: 1 });
	expect((await offers(a.token)).status).toBe(401);
	expect((await offers(b.token)).status).toBe(200);

	const list = JSON.parse((await cli(["list"])).stdout) as DriverTokenView[];
	expect(list.find((t) => t.tokenId === a.tokenId)).toMatchObject({ status: "revoked", expiresAt: a.expiresAt, tokenPrefix: a.tokenPrefix });
	expect(list.find((t) => t.tokenId === b.tokenId)).toMatchObject({ status: "active", expiresAt: null });

	const last = await cli(["revoke", "--prefix", b.tokenPrefix]);
	expect(JSON.parse(last.stdout)).toMatchObject({ tokenId: b.tokenId, remainingTokens: 0 });
	expect((await offers(b.token)).status).toBe(401);

	const tooLong = await cli([...create, "--expires-in", "400d"]);
	expect(tooLong.code).toBe(2);
	expect(tooLong.stderr).toMatch(/--expires-in/);
});
