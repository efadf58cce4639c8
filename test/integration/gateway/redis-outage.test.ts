import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import Redis from "ioredis";
import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { freePort, PartnerApi, type HttpAnswer } from "../../helpers/http";
import { startTestNode, type TestNode } from "../../helpers/node";
import { waitFor } from "../../helpers/wait";
import { createPartner } from "../../helpers/webhooks";

/**
 * Degraded mode: the Redis behind the gateways' shared limits goes away. A
 * redis-server of the test's own is killed with SIGKILL and started again on
 * its port. The gateway fails open to its own memory (docs/SECURITY.md):
 * every call is still answered at once, never with a 5xx, and the partner's
 * rate limit still holds per gateway; when Redis is back the limits are
 * counted there again.
 */

const REDIS_SERVER = "/usr/bin/redis-server";
const RATE = 5;
const CALL_BOUND_MS = 10_000;

interface OwnRedis {
	url: string;
	kill(): Promise<void>;
}

async function startRedis(port: number): Promise<OwnRedis> {
	const child: ChildProcess = spawn(REDIS_SERVER, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
		stdio: ["ignore", "pipe", "pipe"],
	});
	let out = "";
	child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
	const kill = async () => {
		if (child.exitCode !== null || child.signalCode !== null) return;
		const exited = new Promise((r) => child.once("exit", r));
		child.kill("SIGKILL");
		await exited;
	};
	await waitFor("redis-server ready", () => out.includes("Ready to accept connections") || child.exitCode !== null, 10_000).catch(async (err) => {
		await kill();
		throw err;
	});
	return { url: `redis://127.0.0.1:${port}`, kill };
}

const describeIfRedis = existsSync(REDIS_SERVER) ? describe : describe.skip;

describeIfRedis("redis outage: the gateway's limits fail open to memory", () => {
	let db: TestDatabase;
	let redis: OwnRedis | undefined;
	let port: number;
	let node: TestNode | undefined;
	let api: PartnerApi;

	beforeAll(async () => {
		db = await createTestDatabase("redisoutage");
		port = await freePort();
		redis = await startRedis(port);
		node = await startTestNode({
			databaseUrl: db.url,
			services: ["gateway", "partners", "riders", "pricing", "orders"],
			env: { REDIS_URL: redis.url, RATE_LIMIT_PER_MINUTE: String(RATE), RATE_LIMIT_BURST: String(RATE), REQUEST_TIMEOUT_MS: "30000" },
		});
		const partner = await createPartner(node.broker, "Redis outage partner");
		api = new PartnerApi(node.baseUrl!, partner.apiKey);
	}, 60_000);

	afterAll(async () => {
		await node?.stop().catch(() => undefined);
		await redis?.kill().catch(() => undefined);
		await db?.drop().catch(() => undefined);
	}, 30_000);

	async function statusCall(): Promise<HttpAnswer> {
		let timer: NodeJS.Timeout | undefined;
		const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`not answered in ${CALL_BOUND_MS} ms`)), CALL_BOUND_MS)));
		try {
			return await Promise.race([api.post("/ride/status", { orderId: "ord_doesnotexist000000000" }), bound]);
		} finally {
			clearTimeout(timer);
		}
	}

	const statuses = async (n: number) => {
		const out: number[] = [];
		for (let i = 0; i < n; i++) out.push((await statusCall()).status);
		return out;
	};

	async function sharedKeys(): Promise<number> {
		const client = new Redis(redis!.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
		try {
			await client.connect();
			return (await client.keys("ride:*")).length;
		} finally {
			client.disconnect();
		}
	}

	test("calls answered during the outage, limited per gateway; shared again after", async () => {
		// Redis up: the limit is counted there.
		expect(await statuses(RATE + 1)).toEqual([...Array(RATE).fill(404), 429]);
		expect(await sharedKeys()).toBeGreaterThan(0);

		await redis!.kill();
		// Redis gone: answered at once from the gateway's memory, which starts a fresh window and still limits.
		expect(await statuses(RATE + 1)).toEqual([...Array(RATE).fill(404), 429]);

		redis = await startRedis(port);
		await waitFor("limits counted in Redis again", async () => (await statusCall()).status !== 0 && (await sharedKeys()) > 0, 20_000, 250);
	}, 60_000);
});
