import { Errors, ServiceBroker } from "moleculer";
import { PARAMS_MAX_DEPTH } from "../../../contracts/common";
import { cancelParams, createOrderParams, eventsParams, feedbackParams, statusParams } from "../../../contracts/orders";
import { estimateParams } from "../../../contracts/pricing";
import { dataExceptionState } from "../../../lib/data-exception";
import { findUnsafeInput, isUnsafeString } from "../../../lib/input-safety";
import { createValidator } from "../../../lib/validator";
import { toDataValidationError } from "../../../middlewares/data-errors.middleware";
import { toErrorResponse } from "../../../services/gateway/errors";
import { parseJsonObject } from "../../../services/gateway/request";

/**
 * Bad input never reaches PostgreSQL and never answers 500: the validator
 * every node uses (lib/validator.ts) refuses U+0000, unpaired surrogates and
 * too-deep nesting anywhere in params and lists a strict object's unknown
 * keys one by one; the gateway refuses the same strings in the body; a
 * database data exception that slips through anyway is a 400.
 */

const OPTS = { unavailableRetryAfterSeconds: 5 };

const ORDER = {
	user: { name: "Asha Rao", phone: "+919812345678" },
	serviceType: "cab",
	pickup: { lat: 12.9716, lng: 77.5946 },
	drop: { lat: 12.9352, lng: 77.6245 },
	webhookURL: "https://partner.example.com/hooks/rides",
	metadata: { partnerRef: "x", anything: { nested: [1, 2] } },
};

function check(schema: Record<string, unknown>, params: unknown): true | Array<{ type: string; field: string; message: string }> {
	return createValidator().compile(schema)(params as Record<string, unknown>) as never;
}

describe("unsafe strings", () => {
	it.each([
		["\u0000", true],
		["ord_\u0000", true],
		["\ud800", true],
		["a\udfffb", true],
		["\udc00\ud800", true],
		["😀 emoji (a surrogate pair)", false],
		["plain, ünïcödé, 中文", false],
		["", false],
	])("%j → unsafe %s", (s, unsafe) => {
		expect(isUnsafeString(s)).toBe(unsafe);
	});

	it("finds them in values, array items and keys, with the field path", () => {
		expect(findUnsafeInput({ user: { name: "a\u0000" }, metadata: { note: "\ud800", list: ["ok", "\udc00"] }, ["k\u0000"]: 1 })).toEqual([
			{ kind: "stringUnsafe", field: "user.name" },
			{ kind: "stringUnsafe", field: "metadata.note" },
			{ kind: "stringUnsafe", field: "metadata.list[1]" },
			{ kind: "stringUnsafe", field: "k\u0000" },
		]);
	});

	it("refuses nesting deeper than the limit without recursion (60,000 levels)", () => {
		let deep: unknown = "x";
		for (let i = 0; i < 60_000; i++) deep = [deep];
		expect(findUnsafeInput({ metadata: { deep } })).toEqual([{ kind: "objectDepth", field: `metadata.deep${"[0]".repeat(PARAMS_MAX_DEPTH - 2)}` }]);
		let ok: unknown = 1;
		for (let i = 0; i < PARAMS_MAX_DEPTH - 2; i++) ok = { a: ok };
		expect(findUnsafeInput({ metadata: ok })).toEqual([]);
	});
});

describe("the broker validator", () => {
	it("accepts a good create-order body, free-form metadata included", () => {
		expect(check(createOrderParams, ORDER)).toBe(true);
	});

	it("names a U+0000 or a lone surrogate anywhere, metadata included", () => {
		const res = check(createOrderParams, { ...ORDER, user: { ...ORDER.user, name: "Asha\u0000" }, metadata: { note: "\ud800" } });
		expect(res).toEqual([
			{ type: "stringUnsafe", field: "user.name", message: "user.name must not contain U+0000 or unpaired surrogate characters" },
			{ type: "stringUnsafe", field: "metadata.note", message: "metadata.note must not contain U+0000 or unpaired surrogate characters" },
		]);
		expect(check(statusParams, { orderId: "ord_\u0000" })).toEqual([expect.objectContaining({ type: "stringUnsafe", field: "orderId" })]);
	});

	it("lists each unknown field of every partner schema by its own path, with a hint for a misspelling", () => {
		const res = check(createOrderParams, {
			...ORDER,
			quoteID: "qt_1",
			extra: 1,
			user: { ...ORDER.user, age: 3 },
			pickup: { ...ORDER.pickup, altitude: 900 },
		});
		expect(res).toEqual(
			expect.arrayContaining([
				{ type: "objectStrict", field: "quoteID", actual: "quoteID", message: "quoteID is not a known field (did you mean quoteId?)" },
				{ type: "objectStrict", field: "extra", actual: "extra", message: "extra is not a known field" },
				{ type: "objectStrict", field: "user.age", actual: "age", message: "user.age is not a known field" },
				{ type: "objectStrict", field: "pickup.altitude", actual: "altitude", message: "pickup.altitude is not a known field" },
			]),
		);
		expect((res as unknown[]).length).toBe(4);
		for (const [schema, good] of [
			[estimateParams, { pickup: ORDER.pickup, drop: ORDER.drop }],
			[cancelParams, { orderId: "ord_1" }],
			[feedbackParams, { orderId: "ord_1", rating: 5 }],
			[statusParams, { orderId: "ord_1" }],
			[eventsParams, { orderId: "ord_1" }],
		] as const) {
			expect(check(schema, good)).toBe(true);
			expect(check(schema, { ...good, "we, ird": true })).toEqual([expect.objectContaining({ type: "objectStrict", field: "we, ird" })]);
		}
	});

	it("answers 400 VALIDATION_ERROR through a real broker, the details naming each field", async () => {
		const broker = new ServiceBroker({ logger: false, validator: createValidator() });
		broker.createService({ name: "t", actions: { create: { params: createOrderParams, handler: () => "ok" } } });
		await broker.start();
		try {
			const err = await broker.call("t.create", { ...ORDER, quoteID: "qt_1", metadata: { note: "\ud800" } }).then(
				() => undefined,
				(e: unknown) => e,
			);
			expect(err).toBeInstanceOf(Errors.ValidationError);
			const mapped = toErrorResponse(err, OPTS);
			expect(mapped.status).toBe(400);
			expect(mapped.body).toEqual({
				code: "VALIDATION_ERROR",
				message: "metadata.note must not contain U+0000 or unpaired surrogate characters (and 1 more)",
				retryable: false,
				details: [
					{ field: "metadata.note", message: "metadata.note must not contain U+0000 or unpaired surrogate characters" },
					{ field: "quoteID", message: "quoteID is not a known field (did you mean quoteId?)" },
				],
			});
			await expect(broker.call("t.create", ORDER)).resolves.toBe("ok");
		} finally {
			await broker.stop();
		}
	});
});

describe("the gateway's body reader", () => {
	it("refuses U+0000 and lone surrogates (escaped in the JSON text) before any service is called", () => {
		for (const [text, field] of [
			['{"orderId":"ord_\\u0000"}', "orderId"],
			['{"metadata":{"note":"\\ud800"}}', "metadata.note"],
			['{"metadata":{"\\u0000":1}}', "metadata.\u0000"],
		]) {
			let thrown: unknown;
			try {
				parseJsonObject(text);
			} catch (e) {
				thrown = e;
			}
			const mapped = toErrorResponse(thrown, OPTS);
			expect(mapped.status).toBe(400);
			expect(mapped.body.code).toBe("VALIDATION_ERROR");
			expect(mapped.body.details?.[0].field).toBe(field);
		}
		expect(parseJsonObject('{"comment":"😀"}')).toEqual({ comment: "😀" });
	});

	it("refuses a deeply nested body with 400, not a stack overflow", () => {
		const text = `{"metadata":${"[".repeat(30_000)}${"]".repeat(30_000)}}`;
		let thrown: unknown;
		try {
			parseJsonObject(text);
		} catch (e) {
			thrown = e;
		}
		expect(toErrorResponse(thrown, OPTS).status).toBe(400);
	});
});

describe("database data exceptions (SQLSTATE class 22)", () => {
	const dbError = (code: string) =>
		Object.assign(new Error('invalid input syntax for type integer: "secret" (INSERT INTO orders …)'), {
			name: "SequelizeDatabaseError",
			parent: { code, message: "raw" },
			original: { code },
		});

	it.each(["22P05", "22021", "22P02", "22003", "22007", "22008"])("%s → 400 VALIDATION_ERROR without the database's words", (code) => {
		expect(dataExceptionState(dbError(code))).toBe(code);
		for (const err of [dbError(code), toDataValidationError(dbError(code))]) {
			const mapped = toErrorResponse(err, OPTS);
			expect(mapped.status).toBe(400);
			expect(mapped.body.code).toBe("VALIDATION_ERROR");
			expect(JSON.stringify(mapped.body)).not.toMatch(/secret|INSERT|syntax|raw/);
		}
	});

	it("leaves other database errors alone", () => {
		expect(dataExceptionState(dbError("23505"))).toBeUndefined();
		expect(dataExceptionState(dbError("42P01"))).toBeUndefined();
		expect(toErrorResponse(dbError("42P01"), OPTS).status).toBe(500);
		expect(toDataValidationError("x")).toBe("x");
	});
});
