import { IDEMPOTENCY_TTL_MS } from "../../../contracts/orders";
import {
	DEFAULT_RUNNING_TIMEOUT_MS,
	canonicalJson,
	checkIdempotencyKey,
	judgeClaim,
	requestHash,
	type StoredClaim,
} from "../../../services/orders/idempotency";

describe("request hashing", () => {
	it("ignores object key order at every level", () => {
		const a = { user: { name: "Asha", phone: "+919812345678" }, pickup: { lat: 1, lng: 2 }, metadata: { x: [1, { b: 2, a: 1 }] } };
		const b = { metadata: { x: [1, { a: 1, b: 2 }] }, pickup: { lng: 2, lat: 1 }, user: { phone: "+919812345678", name: "Asha" } };
		expect(canonicalJson(a)).toBe(canonicalJson(b));
		expect(requestHash(a)).toBe(requestHash(b));
		expect(requestHash(a)).toMatch(/^[0-9a-f]{64}$/);
	});

	it("tells different bodies apart, including array order, types and nesting", () => {
		const base = { a: [1, 2], b: "1" };
		const variants = [
			{ a: [2, 1], b: "1" },
			{ a: [1, 2], b: 1 },
			{ a: [1, 2], b: "1", c: null },
			{ a: [1, 2] },
			{ a: [[1, 2]], b: "1" },
			{ a: [1, 2], b: "1 " },
		];
		const hashes = new Set([requestHash(base), ...variants.map(requestHash)]);
		expect(hashes.size).toBe(variants.length + 1);
	});

	it("treats an absent field and an undefined one alike, as JSON does", () => {
		expect(requestHash({ a: 1, b: undefined })).toBe(requestHash({ a: 1 }));
	});
});

describe("Idempotency-Key format", () => {
	it("accepts 1..255 characters, or no key at all", () => {
		expect(checkIdempotencyKey(undefined)).toEqual({ ok: true });
		expect(checkIdempotencyKey("k")).toEqual({ ok: true });
		expect(checkIdempotencyKey("k".repeat(255))).toEqual({ ok: true });
	});

	it("refuses an empty, too long or non-string key", () => {
		for (const bad of ["", "k".repeat(256), 42]) {
			const check = checkIdempotencyKey(bad);
			expect(check.ok).toBe(false);
			if (!check.ok) expect(check.field).toBe("Idempotency-Key");
		}
	});
});

describe("judging an existing claim", () => {
	const now = Date.parse("2026-11-22T12:00:00Z");
	const claim = (over: Partial<StoredClaim>): StoredClaim => ({
		request_hash: "h1",
		state: "done",
		response_status: 201,
		response_body: { orderId: "ord_1" },
		created_at: new Date(now - 1000),
		...over,
	});

	it("replays a finished call with the same body, with its status code", () => {
		expect(judgeClaim(claim({}), "h1", now)).toEqual({ kind: "replay", status: 201, body: { orderId: "ord_1" } });
		expect(judgeClaim(claim({ response_status: 200 }), "h1", now)).toMatchObject({ kind: "replay", status: 200 });
	});

	it("refuses another body as reused, finished or not", () => {
		expect(judgeClaim(claim({}), "h2", now)).toEqual({ kind: "reused" });
		expect(judgeClaim(claim({ state: "running", response_status: null }), "h2", now)).toEqual({ kind: "reused" });
	});

	it("reports a running call with the same body as in use", () => {
		expect(judgeClaim(claim({ state: "running", response_status: null }), "h1", now)).toEqual({ kind: "in_use" });
	});

	it("frees a running claim whose call died, after the bounded time", () => {
		const stale = claim({ state: "running", created_at: new Date(now - DEFAULT_RUNNING_TIMEOUT_MS) });
		expect(judgeClaim(stale, "h1", now)).toEqual({ kind: "takeover" });
		expect(judgeClaim(stale, "h2", now)).toEqual({ kind: "takeover" });
		expect(judgeClaim(claim({ state: "running", created_at: new Date(now - DEFAULT_RUNNING_TIMEOUT_MS + 1) }), "h1", now)).toEqual({ kind: "in_use" });
		expect(judgeClaim(claim({ state: "running", created_at: new Date(now - 5000) }), "h1", now, 5000)).toEqual({ kind: "takeover" });
	});

	it("forgets a finished call after 24 hours", () => {
		expect(judgeClaim(claim({ created_at: new Date(now - IDEMPOTENCY_TTL_MS) }), "h1", now)).toEqual({ kind: "takeover" });
		expect(judgeClaim(claim({ created_at: new Date(now - IDEMPOTENCY_TTL_MS + 1) }), "h2", now)).toEqual({ kind: "reused" });
	});
});
