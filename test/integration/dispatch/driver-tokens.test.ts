import { randomBytes } from "node:crypto";
import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { httpRequest, type HttpAnswer } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";
import { waitFor } from "../../helpers/wait";
import type { DriverJob, DriverView } from "../../../contracts/dispatch";
import type { DriverTokenCreated, DriverTokenView, RevokedDriverToken } from "../../../contracts/driver";

/**
 * Driver tokens' lifetimes and one-token revocation over real HTTP, NATS
 * and PostgreSQL, on two instances (each a gateway and a dispatch, one NATS
 * namespace, one database), each gateway handing its calls to its own
 * dispatch, so each instance's token cache is exercised:
 *
 * - a token with a lifetime works on both until it expires, then is refused
 *   on both (401) although both hold it in their caches;
 * - revoking one token refuses it on both at once while the driver's other
 *   token keeps working and the driver stays online; revoking its last
 *   token (by prefix, on the other instance) takes the driver offline.
 */

const COMMON_ENV: Record<string, string> = {
	FLEET_MODE: "live",
	RATE_LIMIT_PER_MINUTE: "0",
	AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
	// Nobody goes silent during the file: presence is not what it tests.
	DRIVER_SILENT_AFTER_MS: "600000",
};
const STEP_MS = 20_000;
const BLR = { lat: 12.9716, lng: 77.5946 };

let db: TestDatabase;
let pg: Client;
let nodeA: TestNode;
let nodeB: TestNode;

/** Node `n`'s broker knows the dispatch service of node `of`. */
function sees(n: TestNode, of: TestNode): boolean {
	return n.broker.registry
		.getServiceList({ onlyAvailable: true })
		.some((s: { name: string; nodeID?: string }) => s.name === "dispatch" && s.nodeID === of.broker.nodeID);
}

beforeAll(async () => {
	db = await createTestDatabase("drvtokens");
	const namespace = uniqueNamespace("drvtokens");
	const start = (label: string) =>
		startTestNode({
			databaseUrl: db.url,
			services: ["gateway", "dispatch"],
			nats: { namespace },
			env: { ...COMMON_ENV, NODE_ID: `${label}-${randomBytes(3).toString("hex")}` },
		});
	nodeA = await start("a");
	nodeB = await start("b");
	// driverTokensChanged reaches a node only once it is known.
	await waitFor("A and B to discover each other's dispatch", () => sees(nodeA, nodeB) && sees(nodeB, nodeA), STEP_MS);
	pg = await connect(db.url);
});

afterAll(async () => {
	await pg?.end().catch(() => undefined);
	await nodeB?.stop();
	await nodeA?.stop();
	await db?.drop();
});

function createToken(phone: string, expiresIn?: string): Promise<DriverTokenCreated> {
	return nodeA.broker.call<DriverTokenCreated, unknown>("dispatch.createDriverToken", {
		name: "Token driver",
		phone,
		vehicleNumber: `KA01${randomBytes(2).toString("hex")}`,
		serviceType: "cab",
		mode: "live",
		...(expiresIn ? { expiresIn } : {}),
	});
}

function driverCall<T = Record<string, unknown>>(node: TestNode, d: DriverTokenCreated, path: string, body: unknown): Promise<HttpAnswer<T>> {
	return httpRequest<T>(`${node.baseUrl}/driver${path}`, { headers: { Authorization: `Bearer ${d.token}` }, body });
}

/** The status `/driver/offers` (no wait) answers with the token through each gateway: [A, B]. */
async function statuses(d: DriverTokenCreated): Promise<number[]> {
	return Promise.all([nodeA, nodeB].map(async (n) => (await driverCall(n, d, "/offers", { waitSeconds: 0 })).status));
}

async function listed(tokenId: string): Promise<DriverTokenView | undefined> {
	return (await nodeA.broker.call<DriverTokenView[], unknown>("dispatch.listDriverTokens", {})).find((t) => t.tokenId === tokenId);
}

it("a token with a lifetime works on both instances until it expires, then both refuse it (401) though they cached it", async () => {
	const phone = randomPhone("+9197");
	const lasting = await createToken(phone);
	const created = Date.now();
	const short = await createToken(phone, "8s");
	expect(short.driverId).toBe(lasting.driverId);
	expect(lasting.expiresAt).toBeNull();
	const expiresAt = Date.parse(short.expiresAt!);
	expect(expiresAt).toBeGreaterThan(created);
	expect(expiresAt).toBeLessThanOrEqual(Date.now() + 8_000 + 1_000);

	// Used through both gateways: each instance now holds it in its cache.
	expect(await statuses(short)).toEqual([200, 200]);
	expect((await listed(short.tokenId))?.status).toBe("active");

	// Refused on both once its lifetime is over, with no announcement, as a revoked token is.
	await waitFor("both instances to refuse the expired token", async () => (await statuses(short)).every((s) => s === 401), STEP_MS);
	const refused = await driverCall(nodeB, short, "/offers", { waitSeconds: 0 });
	expect(refused.body).toMatchObject({ code: "UNAUTHORIZED", message: expect.any(String) });
	expect(Date.now()).toBeGreaterThanOrEqual(expiresAt - 1_000);
	// The driver's token without a lifetime still works on both.
	expect(await statuses(lasting)).toEqual([200, 200]);
	expect(await listed(short.tokenId)).toMatchObject({ status: "expired", expiresAt: short.expiresAt, revokedAt: null, tokenPrefix: short.tokenPrefix });
	expect(JSON.stringify(await listed(short.tokenId))).not.toContain(short.token);

	// Lifetimes out of bounds are refused and issue nothing.
	const before = (await pg.query("SELECT count(*)::int AS n FROM driver_tokens")).rows[0].n;
	for (const expiresIn of ["0d", "366d", "30", "1y"]) {
		await expect(createToken(randomPhone("+9197"), expiresIn)).rejects.toMatchObject({ code: expect.any(Number) });
	}
	expect((await pg.query("SELECT count(*)::int AS n FROM driver_tokens")).rows[0].n).toBe(before);
});

it("revoking one token refuses it on both instances at once; the driver's other token keeps working until it is revoked too", async () => {
	const phone = randomPhone("+9197");
	const phoneApp = await createToken(phone);
	const tablet = await createToken(phone);
	expect(tablet.driverId).toBe(phoneApp.driverId);
	const driverId = phoneApp.driverId;
	const online = await driverCall<DriverView>(nodeA, phoneApp, "/online", { location: BLR });
	expect(online.status).toBe(200);
	expect(online.body.status).toBe("available");
	// Both tokens in both instances' caches.
	expect(await statuses(phoneApp)).toEqual([200, 200]);
	expect(await statuses(tablet)).toEqual([200, 200]);

	const one = await nodeA.broker.call<RevokedDriverToken, unknown>("dispatch.revokeDriverToken", { tokenId: phoneApp.tokenId });
	expect(one).toEqual({ tokenId: phoneApp.tokenId, driverId, revoked: true, remainingTokens: 1 });
	// Refused at once through either gateway; the other token works, and the driver stays online.
	expect(await statuses(phoneApp)).toEqual([401, 401]);
	expect(await statuses(tablet)).toEqual([200, 200]);
	const job = await driverCall<DriverJob>(nodeB, tablet, "/offers", { waitSeconds: 0 });
	expect(job.body.driver).toMatchObject({ driverId, status: "available" });
	expect(await listed(phoneApp.tokenId)).toMatchObject({ status: "revoked", revokedAt: expect.any(String) });
	expect(await listed(tablet.tokenId)).toMatchObject({ status: "active", revokedAt: null });

	// Its last token, by the prefix lists show, on the other instance: refused on both, the driver offline.
	const last = await nodeB.broker.call<RevokedDriverToken, unknown>("dispatch.revokeDriverToken", { prefix: tablet.tokenPrefix });
	expect(last).toEqual({ tokenId: tablet.tokenId, driverId, revoked: true, remainingTokens: 0 });
	expect(await statuses(tablet)).toEqual([401, 401]);
	const row = await pg.query("SELECT status, offline_reason FROM drivers WHERE id = $1", [driverId]);
	expect(row.rows[0]).toEqual({ status: "offline", offline_reason: "revoked" });

	// Again: nothing left to revoke, said so; unknown tokens and wrong names are refused.
	await expect(nodeA.broker.call("dispatch.revokeDriverToken", { tokenId: tablet.tokenId })).resolves.toMatchObject({ revoked: false });
	await expect(nodeA.broker.call("dispatch.revokeDriverToken", { tokenId: "dtk_unknown" })).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
	await expect(nodeA.broker.call("dispatch.revokeDriverToken", {})).rejects.toMatchObject({ code: 400 });
	await expect(nodeA.broker.call("dispatch.revokeDriverToken", { tokenId: tablet.tokenId, prefix: tablet.tokenPrefix })).rejects.toMatchObject({
		code: 400,
	});
	await expect(nodeA.broker.call("dispatch.revokeDriverToken", { prefix: tablet.token })).rejects.toMatchObject({ name: "ValidationError" });
});
