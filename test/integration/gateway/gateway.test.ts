import { createTestDatabase, connect, type TestDatabase } from "../../helpers/db";
import { startTestNode, type TestNode } from "../../helpers/node";
import { RIDE_ROUTES } from "../../../contracts/gateway";

/**
 * The gateway over real HTTP, with the real partners service on a real
 * PostgreSQL. Only gateway + partners run here, so every /ride call that
 * passes the gateway's own checks ends in 503 (no pricing/orders): that is
 * what proves each check happens in the gateway, before any service.
 */

interface Answer {
	status: number;
	headers: Headers;
	text: string;
	json: Record<string, unknown>;
}

let db: TestDatabase;
let node: TestNode;
let limited: TestNode | undefined;
let base: string;
let apiKey: string;

const RIDE_PATHS = RIDE_ROUTES.map((r) => `/ride${r.path}`);

async function request(url: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}): Promise<Answer> {
	const body = init.body === undefined ? undefined : typeof init.body === "string" ? init.body : JSON.stringify(init.body);
	const headers: Record<string, string> = {
		...(body !== undefined && typeof init.body !== "string" ? { "content-type": "application/json" } : {}),
		...init.headers,
	};
	const res = await fetch(url, { method: init.method ?? "POST", headers, body });
	const text = await res.text();
	let json: Record<string, unknown> = {};
	try {
		json = JSON.parse(text) as Record<string, unknown>;
	} catch {
		/* not JSON: left empty, the assertions say so */
	}
	return { status: res.status, headers: res.headers, text, json };
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

/** The contract's envelope, and nothing that looks like internals. */
function expectEnvelope(r: Answer, status: number, code: string): void {
	expect({ status: r.status, code: r.json.code }).toEqual({ status, code });
	expect(r.headers.get("content-type")).toMatch(/^application\/json/);
	expect(typeof r.json.message).toBe("string");
	expect(typeof r.json.retryable).toBe("boolean");
	for (const key of Object.keys(r.json)) expect(["code", "message", "details", "retryable"]).toContain(key);
	expect(r.text).not.toMatch(/\n\s+at\s|"stack"|node_modules|\.ts:\d+|SELECT|INSERT|relation "/);
}

beforeAll(async () => {
	db = await createTestDatabase("gateway");
	node = await startTestNode({ databaseUrl: db.url, services: ["partners", "gateway"] });
	base = node.baseUrl!;
	const created = await node.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Acme" });
	apiKey = created.apiKey;
});

afterAll(async () => {
	await limited?.stop();
	await node?.stop();
	await db?.drop();
});

describe("authentication", () => {
	it.each(RIDE_PATHS)("%s answers 401 UNAUTHORIZED for a missing, malformed or unknown key", async (path) => {
		const cases: Array<Record<string, string>> = [
			{},
			{ authorization: "" },
			{ authorization: "Basic dXNlcjpwYXNz" },
			{ authorization: "Bearer" },
			{ authorization: `Token ${apiKey}` },
			{ authorization: `Bearer ${apiKey} extra` },
			{ authorization: "Bearer rk_this-key-does-not-exist-anywhere-0123456789" },
		];
		for (const headers of cases) {
			const r = await request(`${base}${path}`, { headers, body: { orderId: "ord_x" } });
			expectEnvelope(r, 401, "UNAUTHORIZED");
			expect(r.json.retryable).toBe(false);
			expect(r.headers.get("www-authenticate")).toMatch(/^Bearer/);
			// Refused before anything else: no rate-limit accounting for strangers.
			expect(r.headers.get("x-ratelimit-remaining")).toBeNull();
		}
	});

	it("fails closed: the route's authenticate hook refuses a request the pipeline did not authenticate", () => {
		const gateway = node.broker.getLocalService("gateway") as unknown as {
			authenticate: (ctx: unknown, route: unknown, req: unknown) => unknown;
			routes: Array<{ path: string; authentication: unknown }>;
		};
		const ride = gateway.routes.find((r) => r.path === "/ride");
		// moleculer-web leaves a route open when `authentication: true` finds no method: make sure it found ours.
		expect(typeof ride?.authentication).toBe("function");
		expect(() => gateway.authenticate({ meta: {} }, ride, { headers: {} })).toThrow(expect.objectContaining({ code: 401, type: "UNAUTHORIZED" }));
	});

	it("lets a known key through to the service (503 here: no pricing running)", async () => {
		const r = await request(`${base}/ride/fare-estimate`, {
			headers: auth(apiKey),
			body: { pickup: { lat: 12.97, lng: 77.59 }, drop: { lat: 12.93, lng: 77.62 } },
		});
		expectEnvelope(r, 503, "SERVICE_UNAVAILABLE");
	});
});

describe("routing", () => {
	it("answers 404 NOT_FOUND for unknown routes, with or without a key", async () => {
		for (const [method, path] of [
			["GET", "/"],
			["GET", "/nope"],
			["POST", "/ride/unknown"],
			["POST", "/ride"],
			["POST", "/pricing/estimate"],
			["POST", "/api/orders/create"],
			["POST", "/gateway/drain"],
			["GET", "/list-aliases"],
		]) {
			for (const headers of [{}, auth(apiKey)]) {
				const r = await request(`${base}${path}`, { method, headers, body: method === "POST" ? {} : undefined });
				expectEnvelope(r, 404, "NOT_FOUND");
			}
		}
	});

	it.each(RIDE_PATHS)("answers 404 NOT_FOUND for GET, PUT and DELETE on %s", async (path) => {
		for (const method of ["GET", "PUT", "DELETE"]) {
			const r = await request(`${base}${path}`, { method, headers: auth(apiKey), body: method === "GET" ? undefined : {} });
			expectEnvelope(r, 404, "NOT_FOUND");
		}
	});
});

describe("request bodies", () => {
	const url = () => `${base}/ride/status`;

	it("answers 400 INVALID_JSON for a body that is not JSON", async () => {
		for (const body of ['{"orderId":', "orderId=1", "{'orderId':'x'}", '{"a":1}}']) {
			const r = await request(url(), { headers: { ...auth(apiKey), "content-type": "application/json" }, body });
			expectEnvelope(r, 400, "INVALID_JSON");
		}
	});

	it("answers 400 VALIDATION_ERROR for JSON that is not an object", async () => {
		for (const body of ["[1,2]", "42", "null", '"ord_x"']) {
			const r = await request(url(), { headers: { ...auth(apiKey), "content-type": "application/json" }, body });
			expectEnvelope(r, 400, "VALIDATION_ERROR");
			expect(r.json.details).toEqual([{ field: "body", message: expect.any(String) }]);
		}
	});

	it("answers 415 UNSUPPORTED_MEDIA_TYPE for a body that is not sent as JSON", async () => {
		for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=iso-8859-1"]) {
			const r = await request(url(), { headers: { ...auth(apiKey), "content-type": contentType }, body: '{"orderId":"ord_x"}' });
			expectEnvelope(r, 415, "UNSUPPORTED_MEDIA_TYPE");
		}
	});

	it("answers 413 PAYLOAD_TOO_LARGE over 64 KB and accepts a body just under it", async () => {
		const big = await request(url(), { headers: auth(apiKey), body: { orderId: "ord_x", pad: "x".repeat(70 * 1024) } });
		expectEnvelope(big, 413, "PAYLOAD_TOO_LARGE");
		const fits = await request(url(), { headers: auth(apiKey), body: { orderId: "ord_x", pad: "x".repeat(60 * 1024) } });
		// Past every body check, stopped only by the missing orders service.
		expectEnvelope(fits, 503, "SERVICE_UNAVAILABLE");
	});

	it("answers 400 VALIDATION_ERROR for an unusable Idempotency-Key", async () => {
		const r = await request(`${base}/ride/create-order`, { headers: { ...auth(apiKey), "idempotency-key": "k".repeat(256) }, body: {} });
		expectEnvelope(r, 400, "VALIDATION_ERROR");
		expect(r.json.details).toEqual([{ field: "Idempotency-Key", message: expect.stringContaining("255") }]);
	});
});

describe("unavailable services", () => {
	it("answers 503 SERVICE_UNAVAILABLE with Retry-After when the target service is not running", async () => {
		for (const path of RIDE_PATHS) {
			const r = await request(`${base}${path}`, { headers: auth(apiKey), body: { orderId: "ord_x" } });
			expectEnvelope(r, 503, "SERVICE_UNAVAILABLE");
			expect(r.json.retryable).toBe(true);
			expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
			// Which service is missing is our business, not the partner's.
			expect(r.text).not.toMatch(/pricing|orders|estimate|registered/i);
		}
	});
});

describe("request ids", () => {
	it("echoes a caller's X-Request-Id on success, errors, 404s and health", async () => {
		const cases: Array<[string, string, Record<string, string>]> = [
			["GET", "/health/live", {}],
			["POST", "/ride/status", {}],
			["POST", "/ride/status", auth(apiKey)],
			["GET", "/nowhere", {}],
		];
		for (const [method, path, headers] of cases) {
			const id = `req-${method}-${path.replace(/\W/g, "")}-1`;
			const r = await request(`${base}${path}`, { method, headers: { ...headers, "x-request-id": id }, body: method === "POST" ? {} : undefined });
			expect(r.headers.get("x-request-id")).toBe(id);
		}
	});

	it("generates one when none (or a bad one) is sent", async () => {
		const a = await request(`${base}/health/live`, { method: "GET" });
		const b = await request(`${base}/health/live`, { method: "GET", headers: { "x-request-id": "has spaces and <tags>" } });
		for (const r of [a, b]) expect(r.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
		expect(a.headers.get("x-request-id")).not.toBe(b.headers.get("x-request-id"));
	});
});

describe("health", () => {
	it("is live while the process runs", async () => {
		const r = await request(`${base}/health/live`, { method: "GET" });
		expect(r.status).toBe(200);
		expect(r.json).toEqual({ status: "live" });
	});

	it("is not ready while services it needs are missing, and says which", async () => {
		const r = await request(`${base}/health/ready`, { method: "GET" });
		expect(r.status).toBe(503);
		expect(r.headers.get("retry-after")).not.toBeNull();
		expect(r.json).toEqual({ status: "not_ready", checks: { partners: "ok", pricing: "unavailable", riders: "unavailable", orders: "unavailable" } });
	});

	it("reports draining once gateway.drain was called, and recovers when it is undone", async () => {
		await node.broker.call("gateway.drain");
		const draining = await request(`${base}/health/ready`, { method: "GET" });
		expect(draining.status).toBe(503);
		expect(draining.json.status).toBe("draining");
		// Liveness is unaffected: the process is fine, it is only leaving.
		expect((await request(`${base}/health/live`, { method: "GET" })).status).toBe(200);
		await node.broker.call("gateway.drain", { draining: false });
		const after = await request(`${base}/health/ready`, { method: "GET" });
		expect(after.json.status).toBe("not_ready");
	});
});

describe("documentation", () => {
	it("serves the OpenAPI document with every partner path", async () => {
		const r = await request(`${base}/openapi.json`, { method: "GET" });
		expect(r.status).toBe(200);
		expect(r.json.openapi).toBe("3.1.0");
		const paths = Object.keys(r.json.paths as object);
		for (const path of RIDE_PATHS) expect(paths).toContain(path);
		expect(paths.filter((p) => p.startsWith("/ride/"))).toHaveLength(RIDE_PATHS.length);
	});

	it("serves a self-contained HTML reference at /docs", async () => {
		const res = await fetch(`${base}/docs`);
		const html = await res.text();
		expect(res.status).toBe(200);
		expect(res.headers.get("content-type")).toMatch(/^text\/html/);
		expect(res.headers.get("content-security-policy")).toMatch(/default-src 'none'/);
		for (const path of RIDE_PATHS) expect(html).toContain(path);
		expect(html).not.toMatch(/<script|<link /i);
	});
});

describe("rate limits", () => {
	it("answers 429 RATE_LIMITED with Retry-After once a partner's bucket is empty, per partner", async () => {
		// A second gateway in this process with a tiny limit: 2 at once, then one per minute.
		limited = await startTestNode({ databaseUrl: db.url, services: ["partners", "gateway"], env: { RATE_LIMIT_PER_MINUTE: "1", RATE_LIMIT_BURST: "2" } });
		delete process.env.RATE_LIMIT_PER_MINUTE;
		delete process.env.RATE_LIMIT_BURST;
		const url = `${limited.baseUrl}/ride/status`;
		const other = await limited.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: "Other" });

		// Strangers do not spend Acme's tokens.
		for (let i = 0; i < 3; i++) expect((await request(url, { headers: auth("rk_stranger-0123456789012345678901"), body: {} })).status).toBe(401);

		const first = await request(url, { headers: auth(apiKey), body: { orderId: "ord_x" } });
		const second = await request(url, { headers: auth(apiKey), body: { orderId: "ord_x" } });
		const third = await request(url, { headers: auth(apiKey), body: { orderId: "ord_x" } });
		expect([first.status, second.status]).toEqual([503, 503]);
		expect(first.headers.get("x-ratelimit-limit")).toBe("1");
		expect(first.headers.get("x-ratelimit-remaining")).toBe("1");
		expectEnvelope(third, 429, "RATE_LIMITED");
		expect(third.json.retryable).toBe(true);
		expect(Number(third.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
		expect(third.headers.get("x-ratelimit-remaining")).toBe("0");

		// Another partner has its own bucket.
		const theirs = await request(url, { headers: auth(other.apiKey), body: { orderId: "ord_x" } });
		expect(theirs.status).toBe(503);

		// The first gateway keeps its own (per-instance) buckets: Acme is not limited there.
		expect((await request(`${base}/ride/status`, { headers: auth(apiKey), body: { orderId: "ord_x" } })).status).toBe(503);
	});
});

describe("internal failures", () => {
	it("answers 500 INTERNAL_ERROR without a stack, SQL or table names", async () => {
		const client = await connect(db.url);
		try {
			// Break the partners table under the running service: authenticate now fails with a SQL error.
			await client.query("ALTER TABLE partners RENAME TO partners_moved");
			const r = await request(`${base}/ride/status`, { headers: auth("rk_never-seen-before-key-so-no-cache-hit-0001"), body: { orderId: "ord_x" } });
			expectEnvelope(r, 500, "INTERNAL_ERROR");
			expect(r.json).toEqual({ code: "INTERNAL_ERROR", message: "Internal server error", retryable: false });
			expect(r.text).not.toMatch(/partners|api_key_hash|Sequelize/i);
		} finally {
			await client.query("ALTER TABLE IF EXISTS partners_moved RENAME TO partners");
			await client.end();
		}
	});
});
