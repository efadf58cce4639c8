import fc from "fast-check";
import { callAction } from "../../helpers/broker";
import { httpRequest, PartnerApi } from "../../helpers/http";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { createPartner, type TestPartner } from "../../helpers/webhooks";

/**
 * Property-based: whatever a partner sends to any /ride endpoint, in any
 * field (U+0000, lone surrogates, huge numbers, numeric-looking strings, deep
 * nesting, arrays, nulls, unknown fields), the answer is never a 5xx, every
 * 4xx is the contract's envelope, and a 4xx changes nothing in the database.
 * Real gateway, services and PostgreSQL (FLEET_MODE=live: nothing moves by
 * itself; no dispatch, so no ride changes in the background).
 */

const SERVICES = ["partners", "riders", "pricing", "orders", "notifications", "gateway"] as const;
/** The tables a /ride call may write synchronously (partners' auth bookkeeping and notifications' background deliveries aside). */
const TABLES = ["orders", "riders", "ride_events", "feedback", "idempotency_keys"];
const RUNS = Number(process.env.FUZZ_RUNS || 60);
/** Replaced in the JSON text by number literals JSON.stringify cannot write (JSON.parse reads them as ±Infinity). */
const HUGE = "__HUGE_NUMBER__";
const HUGE_NEGATIVE = "__HUGE_NEGATIVE_NUMBER__";

let bed: Testbed;
let partner: TestPartner;
let api: PartnerApi;
let orderId: string;

const PICKUP = { lat: 12.9716, lng: 77.5946, address: "MG Road" };
const DROP = { lat: 12.9352, lng: 77.6245 };
const PHONE = randomPhone("+9198");

function baseBodies(): Record<string, Record<string, unknown>> {
	return {
		"/ride/fare-estimate": { pickup: PICKUP, drop: DROP, serviceType: "cab" },
		"/ride/create-order": {
			user: { name: "Asha Rao", phone: PHONE, email: "asha@example.com" },
			serviceType: "cab",
			pickup: PICKUP,
			drop: DROP,
			webhookURL: "http://127.0.0.1:9/hooks",
			metadata: { partnerRef: "fuzz", note: "hello" },
		},
		"/ride/cancel": { orderId, reason: "plans changed" },
		"/ride/feedback": { orderId, rating: 5, comment: "ok", tags: ["clean"] },
		"/ride/status": { orderId },
		"/ride/events": { orderId },
	};
}

/** Every field path of a body (objects' keys and arrays' items), the body itself excluded. */
function pathsOf(value: unknown, prefix: string[] = []): string[][] {
	if (typeof value !== "object" || value === null) return [];
	const out: string[][] = [];
	for (const [k, v] of Object.entries(value)) {
		out.push([...prefix, k], ...pathsOf(v, [...prefix, k]));
	}
	return out;
}

function objectPathsOf(value: unknown): string[][] {
	return [[], ...pathsOf(value).filter((p) => isObject(getAt(value, p)))];
}

function isObject(v: unknown): v is Record<string, unknown> {
	return typeof v === "object" && v !== null;
}

function getAt(root: unknown, path: string[]): unknown {
	return path.reduce<unknown>((v, k) => (isObject(v) ? v[k] : undefined), root);
}

function setAt(root: Record<string, unknown>, path: string[], value: unknown, remove = false): void {
	let parent: unknown = root;
	for (const k of path.slice(0, -1)) parent = isObject(parent) ? parent[k] : undefined;
	if (!isObject(parent)) return;
	const last = path[path.length - 1];
	if (remove) delete parent[last];
	else parent[last] = value;
}

function nested(depth: number, leaf: unknown): unknown {
	let v = leaf;
	for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { d: v };
	return v;
}

// ---- arbitraries -------------------------------------------------------------------

/** Any UTF-16 code unit, with U+0000 and lone surrogate halves often. */
const dangerousUnit = fc.constantFrom("\u0000", "\ud800", "\udbff", "\udc00", "\udfff");
const anyUtf16 = fc.string({
	unit: fc.oneof({ arbitrary: dangerousUnit, weight: 1 }, { arbitrary: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), weight: 3 }),
	maxLength: 12,
});
const weirdString = fc.oneof(
	fc.constantFrom(
		"",
		" ",
		"\u0000",
		"ord_\u0000",
		"\ud800",
		"\udfff",
		"a\ud800b",
		"\udc00\ud800",
		"NaN",
		"Infinity",
		"-Infinity",
		"1e309",
		"-0",
		"0x10",
		"null",
		"true",
		"[]",
		"{}",
		"😀",
		"\u202e",
		"%00",
		"\\u0000",
		"' OR '1'='1",
		"ord_" + "x".repeat(95),
		"x".repeat(3000),
		"scooty",
		"cab",
		"+919812345678",
		"qt_abc.def",
		"http://127.0.0.1:9/hooks",
		"javascript:alert(1)",
	),
	fc.string({ maxLength: 12 }),
	anyUtf16,
);
const weirdNumber = fc.oneof(
	fc.constantFrom(0, -0, 1, -1, 5, 6, 3.5, 90.0001, -180.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, 1e21, 1e308, -1e308, 5e-324, HUGE, HUGE_NEGATIVE),
	fc.integer(),
	fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const weirdKey = fc.oneof(
	fc.constantFrom("quoteID", "orderID", "partnerId", "__proto__", "constructor", "\u0000", "\ud800", "", "a.b", "lat"),
	fc.string({ maxLength: 8 }),
	anyUtf16,
);
const { weird } = fc.letrec<{ weird: unknown }>((tie) => ({
	weird: fc.oneof(
		{ depthSize: "small", withCrossShrink: true },
		{ arbitrary: weirdString, weight: 5 },
		{ arbitrary: weirdNumber, weight: 2 },
		{ arbitrary: fc.boolean(), weight: 1 },
		{ arbitrary: fc.constant(null), weight: 1 },
		{ arbitrary: fc.array(tie("weird"), { maxLength: 3 }), weight: 1 },
		{ arbitrary: fc.dictionary(weirdKey, tie("weird"), { maxKeys: 3 }), weight: 1 },
		{ arbitrary: fc.integer({ min: 20, max: 2000 }).map((n) => nested(n, "deep")), weight: 1 },
	),
}));

interface Mutation {
	edits: Array<{ path: string[]; value: unknown; remove: boolean }>;
	extras: Array<{ at: string[]; key: string; value: unknown }>;
}

function mutationOf(base: Record<string, unknown>): fc.Arbitrary<Mutation> {
	const paths = pathsOf(base);
	const objects = objectPathsOf(base);
	return fc.record({
		edits: fc.array(fc.record({ path: fc.constantFrom(...paths), value: weird, remove: fc.integer({ min: 0, max: 3 }).map((n) => n === 0) }), {
			maxLength: 3,
		}),
		extras: fc.array(fc.record({ at: fc.constantFrom(...objects), key: weirdKey, value: weird }), { maxLength: 2 }),
	});
}

function apply(base: Record<string, unknown>, m: Mutation): Record<string, unknown> {
	const body = structuredClone(base);
	for (const e of m.edits) setAt(body, e.path, e.value, e.remove);
	for (const x of m.extras) {
		const target = x.at.length === 0 ? body : getAt(body, x.at);
		if (isObject(target) && !Array.isArray(target)) target[x.key] = x.value;
	}
	return body;
}

// ---- checks ------------------------------------------------------------------------

/** Row count and checksum of every table a call may write. */
async function snapshot(): Promise<Record<string, string>> {
	const sql = TABLES.map(
		(t) => `SELECT '${t}' AS t, count(*)::text || ':' || md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) AS s FROM ${t} x`,
	).join(" UNION ALL ");
	const { rows } = await bed.pg.query<{ t: string; s: string }>(sql);
	return Object.fromEntries(rows.map((r) => [r.t, r.s]));
}

function expectEnvelope(status: number, body: unknown, sent: string): void {
	const where = `${status} for ${sent.slice(0, 300)}: ${JSON.stringify(body).slice(0, 300)}`;
	if (!isObject(body)) throw new Error(`not a JSON object: ${where}`);
	const keys = Object.keys(body).sort();
	for (const k of keys) if (!["code", "details", "message", "retryable"].includes(k)) throw new Error(`extra key ${k}: ${where}`);
	if (typeof body.code !== "string" || !/^[A-Z][A-Z0-9_]+$/.test(body.code)) throw new Error(`bad code: ${where}`);
	if (typeof body.message !== "string" || body.message === "") throw new Error(`bad message: ${where}`);
	if (typeof body.retryable !== "boolean") throw new Error(`bad retryable: ${where}`);
	if (body.details !== undefined) {
		if (!Array.isArray(body.details) || body.details.length === 0) throw new Error(`bad details: ${where}`);
		for (const d of body.details) if (!isObject(d) || typeof d.field !== "string" || typeof d.message !== "string") throw new Error(`bad detail: ${where}`);
	}
	if (/select |insert |update |sequelize|postgres|stack|at .*\.ts/i.test(JSON.stringify(body))) throw new Error(`leaks internals: ${where}`);
}

/** Sends the body as JSON text (with HUGE written as a number literal JSON.stringify cannot produce) and checks the answer. */
async function sendAndCheck(path: string, body: Record<string, unknown>): Promise<number> {
	const text = JSON.stringify(body).replaceAll(`"${HUGE}"`, "1e400").replaceAll(`"${HUGE_NEGATIVE}"`, "-1e400");
	const before = await snapshot();
	const res = await httpRequest(`${bed.node.baseUrl}${path}`, {
		method: "POST",
		headers: { Authorization: `Bearer ${partner.apiKey}`, "Content-Type": "application/json" },
		body: text,
	});
	if (res.status >= 500) throw new Error(`${res.status} for ${text.slice(0, 400)}: ${res.text.slice(0, 300)}`);
	if (res.status >= 400) {
		expectEnvelope(res.status, res.body, text);
		expect(await snapshot()).toEqual(before);
	}
	return res.status;
}

beforeAll(async () => {
	bed = await startTestbed("fuzz", { services: [...SERVICES], env: { RATE_LIMIT_PER_MINUTE: "0" } });
	partner = await createPartner(bed.node.broker, "Fuzz partner");
	api = new PartnerApi(bed.node.baseUrl!, partner.apiKey);
	const created = await api.post<{ orderId: string }>("/ride/create-order", {
		...baseBodies()["/ride/create-order"],
		user: { name: "Base", phone: randomPhone("+9197") },
	});
	expect(created.status).toBe(201);
	orderId = created.body.orderId;
});

afterAll(async () => {
	await bed?.stop();
});

describe("the documented examples of bad input", () => {
	it.each([
		["/ride/status", { orderId: "ord_\u0000" }, "orderId"],
		["/ride/events", { orderId: "\ud800" }, "orderId"],
		["/ride/cancel", { orderId: "ord_x", reason: "a\u0000" }, "reason"],
		["/ride/feedback", { orderId: "ord_x", rating: 5, tags: ["ok", "\udfff"] }, "tags[1]"],
		["/ride/create-order", { metadata: { note: "\ud800" } }, "metadata.note"],
		["/ride/create-order", { user: { name: "Asha\u0000" } }, "user.name"],
		["/ride/fare-estimate", { pickup: { ...PICKUP, address: "\u0000" } }, "pickup.address"],
	] as Array<[string, Record<string, any>, string]>)("%s %j → 400 VALIDATION_ERROR naming %s, nothing written", async (path, override, field) => {
		const base = baseBodies()[path];
		const body = { ...base, ...override, ...(override.user ? { user: { ...(base.user as object), ...override.user } } : {}) };
		const before = await snapshot();
		const res = await api.post<{ code: string; details: Array<{ field: string }> }>(path, body);
		expect(res.status).toBe(400);
		expect(res.body.code).toBe("VALIDATION_ERROR");
		expect(res.body.details.map((d) => d.field)).toContain(field);
		expect(await snapshot()).toEqual(before);
	});

	it("a misspelled quoteId is refused, not booked at the current price", async () => {
		const before = await snapshot();
		const res = await api.post<{ code: string; details: Array<{ field: string; message: string }> }>("/ride/create-order", {
			...baseBodies()["/ride/create-order"],
			user: { name: "Misspelled", phone: randomPhone("+9196") },
			quoteID: "qt_whatever",
		});
		expect(res.status).toBe(400);
		expect(res.body.code).toBe("VALIDATION_ERROR");
		expect(res.body.details).toEqual([{ field: "quoteID", message: "quoteID is not a known field (did you mean quoteId?)" }]);
		expect(await snapshot()).toEqual(before);
	});

	it("an internal call whose value PostgreSQL refuses (integer out of range) is a 400 over the bus, and changes nothing", async () => {
		const before = await snapshot();
		const res = await callAction(bed.node.broker, "orders.transition", {
			orderId,
			to: "accepted",
			driver: { id: "drv_fuzz", name: "Ravi", phone: "+919800000001", vehicleNumber: "KA01AB1234" },
			eta: 1e12,
		});
		expect(res).toMatchObject({ status: 400, code: "VALIDATION_ERROR" });
		expect(await snapshot()).toEqual(before);
	});
});

describe("fuzzing every endpoint and field", () => {
	for (const path of ["/ride/fare-estimate", "/ride/create-order", "/ride/cancel", "/ride/feedback", "/ride/status", "/ride/events"]) {
		it(`${path}: never a 5xx, always the envelope, nothing written on a 4xx`, async () => {
			const base = baseBodies()[path];
			const statuses: number[] = [];
			await fc.assert(
				fc.asyncProperty(mutationOf(base), async (m) => {
					statuses.push(await sendAndCheck(path, apply(base, m)));
				}),
				{ numRuns: RUNS, endOnFailure: true },
			);
			// Arbitrary whole bodies too (any JSON object).
			await fc.assert(
				fc.asyncProperty(fc.dictionary(weirdKey, weird, { maxKeys: 4 }), async (body) => {
					statuses.push(await sendAndCheck(path, body));
				}),
				{ numRuns: Math.ceil(RUNS / 4), endOnFailure: true },
			);
			// The property exercised refusals, not only successes.
			expect(statuses.some((s) => s === 400)).toBe(true);
		});
	}
});
