import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parseRetryAfter, RideApiError, RideClient, RideConnectionError, type RideEventRecord } from "../../../packages/sdk/src";
import { retryDelayMs } from "../../../packages/sdk/src/retry";

/**
 * The SDK's client against a local node:http server that answers what each
 * test scripts: headers, retries, Retry-After, idempotency keys, timeouts,
 * error mapping and event pages.
 */

interface Seen {
	path: string;
	headers: IncomingMessage["headers"];
	body: any;
	at: number;
}
type Handler = (req: Seen, res: ServerResponse, n: number) => void;

let server: Server;
let baseUrl: string;
let seen: Seen[] = [];
let handler: Handler = (_req, res) => json(res, 200, {});

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
	res.writeHead(status, { "content-type": "application/json", "ride-request-id": "req-123", ...headers });
	res.end(JSON.stringify(body));
}
function envelope(code: string, retryable: boolean, extra: Record<string, unknown> = {}) {
	return { code, message: `${code} happened`, retryable, ...extra };
}

beforeAll(async () => {
	server = createServer((req, res) => {
		const chunks: Buffer[] = [];
		req.on("data", (c: Buffer) => chunks.push(c));
		req.on("end", () => {
			const text = Buffer.concat(chunks).toString("utf8");
			const entry: Seen = { path: req.url ?? "", headers: req.headers, body: text ? JSON.parse(text) : undefined, at: Date.now() };
			seen.push(entry);
			handler(entry, res, seen.length);
		});
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
	server.closeAllConnections();
	await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
	seen = [];
	handler = (_req, res) => json(res, 200, {});
});

const client = (extra: Partial<ConstructorParameters<typeof RideClient>[0]> = {}) =>
	new RideClient({ apiKey: "ride_test_abc", baseUrl, retryDelay: { baseMs: 5, maxMs: 5_000 }, ...extra });
const trip = { pickup: { lat: 12.97, lng: 77.59 }, drop: { lat: 12.93, lng: 77.62 } };
const booking = { user: { name: "Asha", phone: "+919812345678" }, serviceType: "cab" as const, ...trip, webhookURL: "https://p.example/h" };

describe("requests", () => {
	it("POSTs JSON to the route with the Bearer key, and no Ride-Version unless asked", async () => {
		handler = (_r, res) => json(res, 200, { distance: 1, duration: 2, quotes: [] });
		const answer = await client().fareEstimate(trip);
		expect(answer).toEqual({ distance: 1, duration: 2, quotes: [] });
		expect(seen).toHaveLength(1);
		expect(seen[0].path).toBe("/ride/fare-estimate");
		expect(seen[0].headers.authorization).toBe("Bearer ride_test_abc");
		expect(seen[0].headers["content-type"]).toMatch(/^application\/json/);
		expect(seen[0].headers["user-agent"]).toMatch(/^ride-sdk-node\//);
		expect(seen[0].headers["ride-version"]).toBeUndefined();
		expect(seen[0].headers["idempotency-key"]).toBeUndefined();
		expect(seen[0].body).toEqual(trip);
	});

	it("sends Ride-Version from the client, a call overriding it, and the caller's X-Request-Id", async () => {
		const c = client({ apiVersion: "2026-12-01", baseUrl: `${baseUrl}/` });
		await c.status({ orderId: "ord_1" });
		await c.status({ orderId: "ord_1" }, { apiVersion: "2099-01-01", requestId: "my-id-1" });
		expect(seen.map((s) => s.path)).toEqual(["/ride/status", "/ride/status"]);
		expect(seen.map((s) => s.headers["ride-version"])).toEqual(["2026-12-01", "2099-01-01"]);
		expect(seen[1].headers["x-request-id"]).toBe("my-id-1");
	});

	it("refuses to be made without a key or a base URL", () => {
		expect(() => new RideClient({ apiKey: "", baseUrl })).toThrow(/apiKey/);
		expect(() => new RideClient({ apiKey: "k", baseUrl: "" })).toThrow(/baseUrl/);
	});
});

describe("errors", () => {
	it("an error answer is a RideApiError with the envelope and our request id, not retried", async () => {
		const details = [{ field: "pickup.lat", message: "pickup.lat must be less than or equal to 90" }];
		handler = (_r, res) => json(res, 400, envelope("VALIDATION_ERROR", false, { details }), { "x-request-id": "client-7" });
		const err = await client()
			.fareEstimate(trip)
			.catch((e: unknown) => e);
		expect(err).toBeInstanceOf(RideApiError);
		expect(err).toMatchObject({ status: 400, code: "VALIDATION_ERROR", details, retryable: false, requestId: "req-123", clientRequestId: "client-7" });
		expect((err as RideApiError).message).toBe("VALIDATION_ERROR happened");
		expect(seen).toHaveLength(1);
	});

	it("a 5xx whose envelope says retryable: false is not retried", async () => {
		handler = (_r, res) => json(res, 500, envelope("INTERNAL_ERROR", false));
		await expect(client().status({ orderId: "ord_1" })).rejects.toMatchObject({ code: "INTERNAL_ERROR", status: 500 });
		expect(seen).toHaveLength(1);
	});

	it("a bare 502 (no envelope) is retried, then thrown as HTTP_ERROR", async () => {
		handler = (_r, res) => {
			res.writeHead(502, { "content-type": "text/html" });
			res.end("<html>bad gateway</html>");
		};
		const err = await client({ maxRetries: 2 })
			.status({ orderId: "ord_1" })
			.catch((e: unknown) => e);
		expect(err).toMatchObject({ status: 502, code: "HTTP_ERROR", retryable: true });
		expect(seen).toHaveLength(3);
	});
});

describe("retries", () => {
	it("retries 503 and 409 IDEMPOTENCY_KEY_IN_USE with the same Idempotency-Key, and books once", async () => {
		handler = (_r, res, n) => {
			if (n === 1) return json(res, 503, envelope("SERVICE_UNAVAILABLE", true), { "retry-after": "0" });
			if (n === 2) return json(res, 409, envelope("IDEMPOTENCY_KEY_IN_USE", true), { "retry-after": "0" });
			json(res, 201, { orderId: "ord_1", status: "searching" });
		};
		const order = await client().createOrder(booking);
		expect(order).toMatchObject({ orderId: "ord_1" });
		const keys = seen.map((s) => s.headers["idempotency-key"]);
		expect(keys).toHaveLength(3);
		expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
		expect(new Set(keys).size).toBe(1);
		expect(seen.every((s) => JSON.stringify(s.body) === JSON.stringify(booking))).toBe(true);
	});

	it("reuses the key after a dropped connection; a new createOrder gets a new key; a given key is sent as is", async () => {
		handler = (_r, res, n) => (n === 1 ? res.socket?.destroy() : json(res, 201, { orderId: "ord_1" }));
		const c = client();
		await c.createOrder(booking);
		await c.createOrder(booking);
		await c.createOrder(booking, { idempotencyKey: "booking-8812" });
		const keys = seen.map((s) => s.headers["idempotency-key"]);
		expect(keys).toHaveLength(4);
		expect(keys[0]).toBe(keys[1]);
		expect(keys[2]).not.toBe(keys[1]);
		expect(keys[3]).toBe("booking-8812");
	});

	it("waits at least Retry-After after a 429", async () => {
		handler = (_r, res, n) =>
			n === 1 ? json(res, 429, envelope("RATE_LIMITED", true), { "retry-after": "1" }) : json(res, 200, { orderId: "ord_1", status: "searching" });
		await client().status({ orderId: "ord_1" });
		expect(seen).toHaveLength(2);
		expect(seen[1].at - seen[0].at).toBeGreaterThanOrEqual(1000);
	});

	it("does not wait for a Retry-After longer than its cap: the error says when to come back", async () => {
		handler = (_r, res) => json(res, 429, envelope("RATE_LIMITED", true), { "retry-after": "60" });
		const err = await client({ retryDelay: { baseMs: 5, maxMs: 10_000 } })
			.status({ orderId: "ord_1" })
			.catch((e: unknown) => e);
		expect(err).toMatchObject({ code: "RATE_LIMITED", retryable: true, retryAfterMs: 60_000 });
		expect(seen).toHaveLength(1);
	});

	it("gives up after maxRetries (per client, and per call)", async () => {
		handler = (_r, res) => json(res, 503, envelope("SERVICE_UNAVAILABLE", true));
		await expect(client({ maxRetries: 3 }).status({ orderId: "ord_1" })).rejects.toMatchObject({ code: "SERVICE_UNAVAILABLE" });
		expect(seen).toHaveLength(4);
		seen = [];
		await expect(client({ maxRetries: 3 }).status({ orderId: "ord_1" }, { maxRetries: 0 })).rejects.toBeInstanceOf(RideApiError);
		expect(seen).toHaveLength(1);
	});

	it("retries a refused connection, even for feedback (nothing was sent)", async () => {
		// A port nobody listens on: the one a server just gave back.
		const closed = createServer();
		await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
		const port = (closed.address() as AddressInfo).port;
		await new Promise<void>((resolve) => closed.close(() => resolve()));
		let calls = 0;
		const refusing = new RideClient({
			apiKey: "k",
			baseUrl: `http://127.0.0.1:${port}`,
			maxRetries: 2,
			retryDelay: { baseMs: 1 },
			fetch: (request) => {
				calls += 1;
				return fetch(request);
			},
		});
		const err = await refusing.feedback({ orderId: "ord_1", rating: 5 }).catch((e: unknown) => e);
		expect(err).toBeInstanceOf(RideConnectionError);
		expect((err as RideConnectionError).timedOut).toBe(false);
		expect(calls).toBe(3);
	});

	it("a caller's abort ends the call at once, also during a backoff wait", async () => {
		handler = (_r, res) => json(res, 503, envelope("SERVICE_UNAVAILABLE", true), { "retry-after": "3" });
		const controller = new AbortController();
		const call = client().status({ orderId: "ord_1" }, { signal: controller.signal });
		setTimeout(() => controller.abort(new Error("stop")), 100);
		await expect(call).rejects.toThrow("stop");
		expect(seen).toHaveLength(1);
	});
});

describe("timeouts", () => {
	const hang: Handler = () => undefined; // never answers; the client's abort closes the socket

	it("a read that gets no answer in time is retried, then a RideConnectionError with timedOut", async () => {
		handler = hang;
		const err = await client({ timeoutMs: 5_000, maxRetries: 1 })
			.status({ orderId: "ord_1" }, { timeoutMs: 100 })
			.catch((e: unknown) => e);
		expect(err).toBeInstanceOf(RideConnectionError);
		expect((err as RideConnectionError).timedOut).toBe(true);
		expect(seen).toHaveLength(2);
	});

	it("feedback is not repeated after a timeout (it may have been recorded)", async () => {
		handler = hang;
		await expect(client({ timeoutMs: 100 }).feedback({ orderId: "ord_1", rating: 4 })).rejects.toMatchObject({ timedOut: true });
		expect(seen).toHaveLength(1);
	});

	it("an answer in time is not cut by the timeout", async () => {
		handler = (_r, res) => setTimeout(() => json(res, 200, { code: "RIDE_CANCELLED", orderId: "ord_1", status: "customer_cancelled" }), 50);
		await expect(client({ timeoutMs: 2_000 }).cancel({ orderId: "ord_1" })).resolves.toMatchObject({ code: "RIDE_CANCELLED" });
	});
});

describe("event pages", () => {
	const record = (sequence: number) => ({ eventId: `evt_${sequence}`, sequence, status: "location_updated", occurredAt: "", payload: {}, delivery: {} });

	beforeEach(() => {
		// Three pages: 1-2, 3-4, 5; the cursor is the last sequence seen.
		handler = (req, res) => {
			const after = req.body.cursor ? Number(req.body.cursor) : 0;
			const events = [1, 2, 3, 4, 5].filter((s) => s > after).slice(0, 2);
			const last = events[events.length - 1];
			json(res, 200, { events: events.map(record), nextCursor: last < 5 ? String(last) : null });
		};
	});

	it("events() walks every page in order, sending each nextCursor", async () => {
		const got: RideEventRecord[] = [];
		for await (const event of client().events({ orderId: "ord_1", limit: 2 })) got.push(event);
		expect(got.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5]);
		expect(seen.map((s) => s.body)).toEqual([
			{ orderId: "ord_1", limit: 2 },
			{ orderId: "ord_1", limit: 2, cursor: "2" },
			{ orderId: "ord_1", limit: 2, cursor: "4" },
		]);
	});

	it("eventPages() yields pages from a given cursor, and stops when the loop does", async () => {
		const pages = [];
		for await (const page of client().eventPages({ orderId: "ord_1", cursor: "2" })) pages.push(page.events.map((e) => e.sequence));
		expect(pages).toEqual([[3, 4], [5]]);
		seen = [];
		for await (const event of client().events({ orderId: "ord_1" })) if (event.sequence === 1) break;
		expect(seen).toHaveLength(1);
	});
});

describe("backoff", () => {
	const settings = { maxRetries: 5, baseDelayMs: 100, maxDelayMs: 1_000 };

	it("doubles per retry with equal jitter, capped; Retry-After plus at most 10 %", () => {
		expect([0, 1, 2, 3, 4].map((r) => retryDelayMs(r, null, settings, () => 0))).toEqual([50, 100, 200, 400, 500]);
		expect([0, 1, 2, 3, 4].map((r) => retryDelayMs(r, null, settings, () => 0.999999))).toEqual([99, 199, 399, 799, 999]);
		expect(retryDelayMs(0, 800, settings, () => 0)).toBe(800);
		expect(retryDelayMs(0, 800, settings, () => 0.999999)).toBe(879);
		expect(retryDelayMs(0, 1_001, settings)).toBeNull();
	});

	it("reads Retry-After as seconds or an HTTP date", () => {
		const now = Date.parse("2026-12-01T10:00:00Z");
		expect(parseRetryAfter("5", now)).toBe(5_000);
		expect(parseRetryAfter("Tue, 01 Dec 2026 10:00:07 GMT", now)).toBe(7_000);
		expect(parseRetryAfter("Tue, 01 Dec 2026 09:00:00 GMT", now)).toBe(0);
		expect(parseRetryAfter(null, now)).toBeNull();
		expect(parseRetryAfter("soon", now)).toBeNull();
	});
});
