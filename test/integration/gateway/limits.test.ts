import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { freePort, httpRequest, type HttpAnswer } from "../../helpers/http";
import { Cluster } from "../../helpers/processes";
import { waitFor } from "../../helpers/wait";

/**
 * Two gateway processes behind one (imaginary) load balancer, sharing their
 * limits through the real Redis: the per-partner rate limit and the
 * failed-authentication throttle hold across both, not once per gateway.
 * Each run uses its own NATS namespace, which also prefixes its Redis keys.
 */

const ROOT = resolve(__dirname, "../../..");
const REDIS_URL = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";
const RATE = 8;
const AUTH_FAILURES = 5;

let db: TestDatabase;
let cluster: Cluster;
let bases: string[];
let keyA: string;
let keyB: string;

/** `npm run partner -- create` against the test database: a second partner, with its key. */
function createPartner(name: string): Promise<string> {
	return new Promise((done, fail) => {
		const child = spawn(process.execPath, ["--import", "tsx", "bin/partner.ts", "create", "--name", name], {
			cwd: ROOT,
			env: { ...process.env, TRANSPORTER: "", LOGLEVEL: "warn", DATABASE_URL: db.url },
			stdio: ["ignore", "pipe", "pipe"],
		});
		let stdout = "";
		let stderr = "";
		child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
		child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
		child.on("error", fail);
		child.on("exit", (code) =>
			code === 0 ? done((JSON.parse(stdout) as { apiKey: string }).apiKey) : fail(new Error(`partner create exited ${code}: ${stderr}`)),
		);
	});
}

/** A `/ride/status` call through gateway `i`, as if from client address `from` (the proxy in front sets X-Forwarded-For). */
function call(i: number, key: string, from: string): Promise<HttpAnswer> {
	return httpRequest(`${bases[i]}/ride/status`, {
		method: "POST",
		headers: { Authorization: `Bearer ${key}`, "X-Forwarded-For": from },
		body: { orderId: "ord_doesnotexist000000000" },
	});
}

beforeAll(async () => {
	db = await createTestDatabase("gwlimits");
	keyA = `rk_test_${randomBytes(24).toString("base64url")}`;
	cluster = new Cluster("gwlimits", db.url, {
		REDIS_URL,
		RATE_LIMIT_PER_MINUTE: String(RATE),
		RATE_LIMIT_BURST: String(RATE),
		AUTH_FAILURE_LIMIT_PER_MINUTE: String(AUTH_FAILURES),
		TRUST_PROXY: "1",
	});
	const ports = [await freePort(), await freePort()];
	bases = ports.map((p) => `http://127.0.0.1:${p}`);
	try {
		await cluster.startAll([
			{
				label: "gateway-1",
				services: "gateway,partners",
				env: { PORT: String(ports[0]), BOOTSTRAP_PARTNER_KEY: keyA, BOOTSTRAP_WEBHOOK_SECRET: `whsec_${randomBytes(24).toString("base64")}` },
			},
			{ label: "gateway-2", services: "gateway", env: { PORT: String(ports[1]) } },
		]);
		keyB = await createPartner("Partner B");
		// Both gateways reach partners over NATS: an unknown key is 401 (not 503) on each. From an address of its own.
		for (const i of [0, 1]) {
			await waitFor(`gateway-${i + 1} sees partners`, async () => (await call(i, "rk_warmup_unknown", `192.0.2.${i + 1}`)).status === 401, 60_000, 200);
		}
	} catch (err) {
		throw new Error(`${(err as Error).message}\n${cluster.tails()}`);
	}
}, 120_000);

afterAll(async () => {
	await cluster?.stopAll();
	await db?.drop();
});

it("holds one partner's rate limit across both gateways: the total accepted equals the limit, not twice it", async () => {
	const answers: HttpAnswer[] = [];
	for (let n = 0; n < RATE * 2; n++) answers.push(await call(n % 2, keyA, "198.51.100.1"));
	const limited = answers.filter((a) => a.status === 429);
	// Accepted means "past the limiter": orders is not running, so the call itself answers 503.
	expect({ accepted: answers.length - limited.length }).toEqual({ accepted: RATE });
	for (const a of limited) {
		expect(a.body).toMatchObject({ code: "RATE_LIMITED", retryable: true });
		expect(Number(a.headers.get("retry-after"))).toBeGreaterThan(0);
	}
	// Both gateways refused, so the count really was shared.
	expect(new Set(answers.slice(RATE).map((a) => a.status))).toEqual(new Set([429]));
	// Another partner has its own limit.
	expect((await call(0, keyB, "198.51.100.1")).status).not.toBe(429);
});

it("shares the failed-authentication throttle: after N bad keys from one address either gateway answers 429, while a good key still works", async () => {
	const attacker = "203.0.113.7";
	const answers: HttpAnswer[] = [];
	for (let n = 0; n < AUTH_FAILURES * 2; n++) answers.push(await call(n % 2, `rk_guess_${n}_${randomBytes(6).toString("hex")}`, attacker));
	expect(answers.slice(0, AUTH_FAILURES).map((a) => a.status)).toEqual(Array(AUTH_FAILURES).fill(401));
	for (const a of answers.slice(AUTH_FAILURES)) {
		expect(a.status).toBe(429);
		expect(a.body).toMatchObject({ code: "RATE_LIMITED", retryable: true });
		expect(Number(a.headers.get("retry-after"))).toBeGreaterThan(0);
	}
	// A good key is not slowed: from another address, and from the throttled one.
	for (const i of [0, 1]) {
		expect((await call(i, keyB, "198.51.100.2")).status).toBe(503);
		expect((await call(i, keyB, attacker)).status).toBe(503);
	}
	// The address behind the proxy is what counts: another client of the same proxy is not throttled.
	expect((await call(1, "rk_typo", "198.51.100.3")).status).toBe(401);
});
