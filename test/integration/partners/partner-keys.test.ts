import type { ServiceBroker } from "moleculer";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { freePort, PartnerApi } from "../../helpers/http";
import { startTestNode, type TestNode } from "../../helpers/node";
import { Cluster } from "../../helpers/processes";
import { waitFor } from "../../helpers/wait";
import type { ApiKeySummary, CreatedKey, CreatedPartner, PartnerSummary, RevokedKeys } from "../../../contracts/partners";
import { AUTH_CACHE_MS } from "../../../services/partners/partners.settings";
import { GATEWAY_AUTH_CACHE_MS } from "../../../contracts/partners";

/**
 * Key revocation and rotation across instances: two `gateway,partners`
 * processes on real NATS and one database, each gateway asking its own
 * partners instance (preferLocal) which caches keys for AUTH_CACHE_MS, behind
 * the gateway's own cache (GATEWAY_AUTH_CACHE_MS). An operator broker on the
 * same bus revokes through ONE instance; every gateway and partners instance
 * must drop its cache on partners.changed, well before either TTL would.
 */

let db: TestDatabase;
let cluster: Cluster;
let operator: TestNode;
let gateways: string[];
/** nodeID of each gateway's process, same order. */
let nodeIds: string[];
let op: ServiceBroker;

/** Well under both TTLs: a revocation seen within this came from the event, not from a cache expiring. */
const EVENT_BOUND_MS = Math.min(GATEWAY_AUTH_CACHE_MS, AUTH_CACHE_MS) * 0.6;

beforeAll(async () => {
	db = await createTestDatabase("partnerkeys");
	cluster = new Cluster("pkeys", db.url);
	const ports = [await freePort(), await freePort()];
	await cluster.startAll(ports.map((port, i) => ({ label: `edge-${i + 1}`, services: "gateway,partners", env: { PORT: String(port) } })));
	gateways = ports.map((p) => `http://127.0.0.1:${p}`);
	operator = await startTestNode({ databaseUrl: db.url, services: [], nats: { namespace: cluster.namespace } });
	op = operator.broker;
	const partnerNodes = () =>
		op.registry
			.getServiceList({ onlyAvailable: true, skipInternal: true })
			.filter((s) => s.name === "partners")
			.map((s) => s.nodeID as string);
	await waitFor("both partners instances on the bus", () => partnerNodes().length === 2);
	nodeIds = ["edge-1", "edge-2"].map((label) => partnerNodes().find((id) => id.includes(`-${label}-`))!);
	expect(nodeIds.every(Boolean)).toBe(true);
	// A broadcast reaches the nodes its sender knows: wait until each instance has discovered the other.
	for (const nodeID of nodeIds) {
		await waitFor(`${nodeID} sees both partners instances`, async () => {
			const list = await op.call<Array<{ name: string; nodes?: string[] }>, Record<string, unknown>>(
				"$node.services",
				{ onlyAvailable: true, withActions: false },
				{ nodeID },
			);
			return list.find((s) => s.name === "partners")?.nodes?.length === 2;
		});
	}
}, 120_000);

afterAll(async () => {
	await operator?.stop();
	await cluster?.stopAll();
	await db?.drop();
});

/** 401 when the key is refused; anything else means authenticated (orders is not running: 503). */
async function statusAt(gateway: string, apiKey: string): Promise<number> {
	return (await new PartnerApi(gateway, apiKey).post("/ride/status", { orderId: "ord_x" })).status;
}

async function everywhere(apiKey: string): Promise<number[]> {
	return Promise.all(gateways.map((g) => statusAt(g, apiKey)));
}

const authenticated = (statuses: number[]) => statuses.every((s) => s !== 401);

async function refusedEverywhereSoon(apiKey: string): Promise<void> {
	let last: number[] = [];
	await waitFor("401 on every gateway", async () => (last = await everywhere(apiKey)).every((s) => s === 401), EVENT_BOUND_MS).catch((e: Error) => {
		throw new Error(`${e.message}; statuses ${last.join(",")}`);
	});
}

const keysOf = (partnerId: string) => op.call<ApiKeySummary[], { partnerId: string }>("partners.listKeys", { partnerId });

it("a key revoked through one partners instance is refused by every gateway, before any cache TTL", async () => {
	const partner = await op.call<CreatedPartner, { name: string }>("partners.create", { name: "Revoked soon" });
	// Both instances now hold the key in their auth cache.
	expect(authenticated(await everywhere(partner.apiKey))).toBe(true);
	const [key] = await keysOf(partner.partnerId);
	expect(key).toMatchObject({ label: "initial", revokedAt: null });

	// Through edge-1's instance only: edge-2's instance learns it from partners.changed.
	const revoked = await op.call<RevokedKeys, { keyId: string }>("partners.revokeKey", { keyId: key.keyId }, { nodeID: nodeIds[0] });
	expect(revoked).toEqual({ partnerId: partner.partnerId, revokedKeyIds: [key.keyId], partnerRevoked: false });
	await refusedEverywhereSoon(partner.apiKey);
	expect((await keysOf(partner.partnerId))[0].revokedAt).not.toBeNull();
});

it("rotate-key: old and new keys both work, with labels and last use; revoking the old leaves the new", async () => {
	const partner = await op.call<CreatedPartner, { name: string }>("partners.create", { name: "Rotating" });
	expect(authenticated(await everywhere(partner.apiKey))).toBe(true);
	const fresh = await op.call<CreatedKey, { partnerId: string; label: string }>(
		"partners.createKey",
		{ partnerId: partner.partnerId, label: "2026-rotation" },
		{ nodeID: nodeIds[1] },
	);
	expect(fresh.apiKey).not.toBe(partner.apiKey);
	expect(authenticated(await everywhere(fresh.apiKey))).toBe(true);
	expect(authenticated(await everywhere(partner.apiKey))).toBe(true);

	const keys = await keysOf(partner.partnerId);
	expect(keys.map((k) => k.label)).toEqual(["initial", "2026-rotation"]);
	expect(keys.every((k) => k.lastUsedAt !== null && k.revokedAt === null)).toBe(true);
	expect(JSON.stringify(keys)).not.toContain(fresh.apiKey);

	await op.call("partners.revokeKey", { keyId: keys[0].keyId }, { nodeID: nodeIds[1] });
	await refusedEverywhereSoon(partner.apiKey);
	expect(authenticated(await everywhere(fresh.apiKey))).toBe(true);
});

it("revoking a partner refuses all its keys everywhere and no new key can be made for it", async () => {
	const partner = await op.call<CreatedPartner, { name: string }>("partners.create", { name: "Gone" });
	const second = await op.call<CreatedKey, { partnerId: string; label: string }>("partners.createKey", { partnerId: partner.partnerId, label: "second" });
	expect(authenticated(await everywhere(partner.apiKey))).toBe(true);
	expect(authenticated(await everywhere(second.apiKey))).toBe(true);

	const revoked = await op.call<RevokedKeys, { partnerId: string }>("partners.revokeKey", { partnerId: partner.partnerId }, { nodeID: nodeIds[0] });
	expect(revoked.partnerRevoked).toBe(true);
	expect(revoked.revokedKeyIds).toHaveLength(2);
	await refusedEverywhereSoon(partner.apiKey);
	await refusedEverywhereSoon(second.apiKey);

	await expect(op.call("partners.createKey", { partnerId: partner.partnerId, label: "again" })).rejects.toMatchObject({ code: 409, type: "CONFLICT" });
	await expect(op.call("partners.revokeKey", { keyId: "key_nope" })).rejects.toMatchObject({ code: 404 });
	await expect(op.call("partners.revokeKey", {})).rejects.toMatchObject({ code: 400, type: "VALIDATION_ERROR" });
	const listed = await op.call<PartnerSummary[]>("partners.list");
	expect(listed.find((p) => p.partnerId === partner.partnerId)?.disabled).toBe(true);
});

describe("BOOTSTRAP_PARTNER_KEY", () => {
	const key = `bootstrap_${"k".repeat(10)}_${Date.now().toString(36)}_abcdefghijkl`;

	it("refuses a weak key, and any key in production unless allowed, naming the setting", async () => {
		await expect(startTestNode({ databaseUrl: db.url, services: ["partners"], env: { BOOTSTRAP_PARTNER_KEY: "dev_key_change_me" } })).rejects.toThrow(
			/^BOOTSTRAP_PARTNER_KEY must be at least 32 characters/,
		);
		await expect(
			startTestNode({ databaseUrl: db.url, services: ["partners"], env: { BOOTSTRAP_PARTNER_KEY: key, NODE_ENV: "production" } }),
		).rejects.toThrow(/^BOOTSTRAP_PARTNER_KEY must be unset when NODE_ENV=production, unless ALLOW_BOOTSTRAP_PARTNER=true/);
	});

	it("never re-creates a partner an operator revoked", async () => {
		const bootstrapped = () => startTestNode({ databaseUrl: db.url, services: ["partners"], env: { BOOTSTRAP_PARTNER_KEY: key } });
		const bootstrapPartners = async (broker: ServiceBroker) =>
			(await broker.call<PartnerSummary[]>("partners.list")).filter((p) => p.name === "Bootstrap partner");
		let node = await bootstrapped();
		try {
			const [partner] = await bootstrapPartners(node.broker);
			expect(partner).toMatchObject({ disabled: false });
			expect(await node.broker.call("partners.authenticate", { apiKey: key })).toMatchObject({ partnerId: partner.partnerId });
			await node.broker.call("partners.revokeKey", { partnerId: partner.partnerId });
			await node.stop();
			node = await bootstrapped();
			expect(await bootstrapPartners(node.broker)).toEqual([expect.objectContaining({ partnerId: partner.partnerId, disabled: true })]);
			expect(await node.broker.call("partners.authenticate", { apiKey: key })).toBeNull();
		} finally {
			await node.stop();
		}
	});

	it("is a test key unless BOOTSTRAP_PARTNER_MODE=live, whatever its spelling; authenticate answers the mode", async () => {
		const anyKey = `dev_key_change_me_${Date.now().toString(36)}_0123456789abcdef`;
		const start = (env: Record<string, string>) =>
			startTestNode({ databaseUrl: db.url, services: ["partners"], env: { BOOTSTRAP_PARTNER_KEY: anyKey, ...env } });
		let node = await start({});
		try {
			expect(await node.broker.call("partners.authenticate", { apiKey: anyKey })).toMatchObject({ mode: "test" });
			await node.stop();
			// The same mode again, or none: starts, and the key stays what it was.
			node = await start({ BOOTSTRAP_PARTNER_MODE: "test" });
			await node.stop();
			node = await start({});
			expect(await node.broker.call("partners.authenticate", { apiKey: anyKey })).toMatchObject({ mode: "test" });
		} finally {
			await node.stop();
		}
		const liveKey = `dev_live_key_${Date.now().toString(36)}_0123456789abcdef`;
		node = await startTestNode({
			databaseUrl: db.url,
			services: ["partners"],
			env: { BOOTSTRAP_PARTNER_KEY: liveKey, BOOTSTRAP_PARTNER_MODE: "live" },
		});
		try {
			expect(await node.broker.call("partners.authenticate", { apiKey: liveKey })).toMatchObject({ mode: "live" });
		} finally {
			await node.stop();
		}
	});

	it("never changes an existing key's mode: BOOTSTRAP_PARTNER_MODE naming the other mode refuses to start, saying why", async () => {
		const key = `dev_mode_key_${Date.now().toString(36)}_0123456789abcdef`;
		const start = (env: Record<string, string>) =>
			startTestNode({ databaseUrl: db.url, services: ["partners"], env: { BOOTSTRAP_PARTNER_KEY: key, ...env } });
		const node = await start({});
		const { partnerId } = (await node.broker.call<{ partnerId: string } | null, unknown>("partners.authenticate", { apiKey: key }))!;
		await node.stop();
		await expect(start({ BOOTSTRAP_PARTNER_MODE: "live" })).rejects.toThrow(
			`BOOTSTRAP_PARTNER_MODE is live, but BOOTSTRAP_PARTNER_KEY is already a test key of ${partnerId}; a key's mode never changes`,
		);
		// Nothing changed: still a test key.
		const pg = await connect(db.url);
		try {
			const { rows } = await pg.query<{ mode: string }>("SELECT mode FROM api_keys WHERE partner_id = $1", [partnerId]);
			expect(rows).toEqual([{ mode: "test" }]);
		} finally {
			await pg.end();
		}
	});

	it("refuses a bad BOOTSTRAP_PARTNER_MODE", async () => {
		const anyKey = `dev_key_change_me_${Date.now().toString(36)}_0123456789abcdef`;
		const start = (env: Record<string, string>) =>
			startTestNode({ databaseUrl: db.url, services: ["partners"], env: { BOOTSTRAP_PARTNER_KEY: anyKey, ...env } });
		await expect(start({ BOOTSTRAP_PARTNER_MODE: "production" })).rejects.toThrow(/^BOOTSTRAP_PARTNER_MODE must be/);
	});
});
