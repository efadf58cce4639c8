import { Readable } from "node:stream";
import type { IncomingMessage } from "node:http";
import { envByteSize, readGatewaySettings } from "../../../services/gateway/gateway.settings";
import { serviceResponseHeaders, successStatus } from "../../../services/gateway/http-answers";
import {
	idempotencyKeyFrom,
	jsonMediaTypeProblem,
	parseBearer,
	parseJsonObject,
	readJsonBody,
	clientRequestIdFrom,
	newRequestId,
} from "../../../services/gateway/request";

describe("Authorization header", () => {
	it.each([
		[undefined, { ok: false, reason: "missing" }],
		["", { ok: false, reason: "missing" }],
		["Basic dXNlcjpwYXNz", { ok: false, reason: "malformed" }],
		["Bearer", { ok: false, reason: "malformed" }],
		["Bearer ", { ok: false, reason: "malformed" }],
		["Bearer two words", { ok: false, reason: "malformed" }],
		["Bearer rk_abc\u0000", { ok: false, reason: "malformed" }],
		[["Bearer a", "Bearer b"], { ok: false, reason: "malformed" }],
		[`Bearer ${"x".repeat(501)}`, { ok: false, reason: "malformed" }],
		["Bearer rk_AbC-123_~+/=", { ok: true, apiKey: "rk_AbC-123_~+/=" }],
		["bearer rk_lower", { ok: true, apiKey: "rk_lower" }],
	])("%j", (header, expected) => {
		expect(parseBearer(header as string | undefined)).toEqual(expected);
	});
});

describe("X-Request-Id", () => {
	it("keeps a sane caller id as the client's id, and nothing else", () => {
		expect(clientRequestIdFrom("abc-123_x.y:z")).toBe("abc-123_x.y:z");
		for (const bad of [undefined, "", "has space", "x".repeat(129), "new\nline", ["a", "b"]]) {
			expect(clientRequestIdFrom(bad as string | undefined)).toBeUndefined();
		}
	});

	it("our own id is a new UUID every time", () => {
		const a = newRequestId();
		expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
		expect(newRequestId()).not.toBe(a);
	});
});

describe("Idempotency-Key", () => {
	it("accepts up to 255 visible ASCII characters", () => {
		expect(idempotencyKeyFrom(undefined)).toBeUndefined();
		expect(idempotencyKeyFrom("order-8812")).toBe("order-8812");
		expect(idempotencyKeyFrom("k".repeat(255))).toBe("k".repeat(255));
	});
	it.each([[""], ["k".repeat(256)], ["tab\there"], ["é"], [" lead"]])("refuses %j with 400 VALIDATION_ERROR", (key) => {
		try {
			idempotencyKeyFrom(key);
			throw new Error("expected a refusal");
		} catch (err) {
			expect(err).toMatchObject({ code: 400, type: "VALIDATION_ERROR" });
			expect((err as { data: { details: Array<{ field: string }> } }).data.details[0].field).toBe("Idempotency-Key");
		}
	});
});

describe("Content-Type", () => {
	it.each([
		["application/json", undefined],
		["application/json; charset=utf-8", undefined],
		["Application/JSON; charset=UTF-8", undefined],
		["application/merge-patch+json", undefined],
	])("%s is JSON", (ct, expected) => {
		expect(jsonMediaTypeProblem(ct)).toBe(expected);
	});
	it.each([["text/plain"], ["application/x-www-form-urlencoded"], ["multipart/form-data; boundary=x"], ["application/json; charset=latin1"], [undefined]])(
		"%s is refused",
		(ct) => {
			expect(jsonMediaTypeProblem(ct)).toEqual(expect.any(String));
		},
	);
});

describe("JSON body", () => {
	it("parses objects and drops __proto__ keys", () => {
		const parsed = parseJsonObject('{"a":1,"__proto__":{"polluted":true},"b":{"__proto__":{"x":1}}}') as Record<string, unknown>;
		expect(parsed.a).toBe(1);
		expect(({} as Record<string, unknown>).polluted).toBeUndefined();
		expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
		expect(Object.prototype.hasOwnProperty.call(parsed, "__proto__")).toBe(false);
	});
	it("drops __proto__ keys spelt with \\u escapes too (the fast path without a reviver must not let them through)", () => {
		for (const text of [
			'{"\\u005f_proto__":{"polluted":true}}',
			'{"x":{"__pro\\u0074o__":{"polluted":true}}}',
			'{"a":"\\u00e9","__proto__":{"polluted":true}}',
		]) {
			const parsed = parseJsonObject(text) as Record<string, Record<string, unknown>>;
			expect(Object.prototype.hasOwnProperty.call(parsed, "__proto__")).toBe(false);
			if (parsed.x) expect(Object.prototype.hasOwnProperty.call(parsed.x, "__proto__")).toBe(false);
			expect(({} as Record<string, unknown>).polluted).toBeUndefined();
		}
		expect(parseJsonObject('{"a":{"b":[1,"x"]},"c":"é"}')).toEqual({ a: { b: [1, "x"] }, c: "é" });
	});
	it("refuses invalid JSON with INVALID_JSON and non-objects with VALIDATION_ERROR", () => {
		expect(() => parseJsonObject("{")).toThrow(expect.objectContaining({ code: 400, type: "INVALID_JSON" }));
		for (const text of ["[1,2]", "42", '"x"', "null"]) {
			expect(() => parseJsonObject(text)).toThrow(expect.objectContaining({ code: 400, type: "VALIDATION_ERROR" }));
		}
	});

	function request(body: string | Buffer[], headers: Record<string, string>): IncomingMessage {
		const stream = Readable.from(Array.isArray(body) ? body : [Buffer.from(body)]) as unknown as IncomingMessage;
		(stream as { headers: Record<string, string> }).headers = headers;
		return stream;
	}

	it("reads a streamed body up to the limit", async () => {
		const body = JSON.stringify({ orderId: "ord_1" });
		await expect(readJsonBody(request(body, { "content-type": "application/json", "transfer-encoding": "chunked" }), 1024)).resolves.toEqual({
			orderId: "ord_1",
		});
	});
	it("answers 413 when a chunked body grows past the limit", async () => {
		const chunks = [Buffer.alloc(600, 0x20), Buffer.alloc(600, 0x20)];
		await expect(readJsonBody(request(chunks, { "content-type": "application/json", "transfer-encoding": "chunked" }), 1000)).rejects.toMatchObject({
			code: 413,
			type: "PAYLOAD_TOO_LARGE",
		});
	});
	it("answers 413 from Content-Length alone", async () => {
		await expect(readJsonBody(request("{}", { "content-type": "application/json", "content-length": "5000" }), 1000)).rejects.toMatchObject({ code: 413 });
	});
	it("reads no body as {}", async () => {
		await expect(readJsonBody(request("", { "content-length": "0" }), 1000)).resolves.toEqual({});
	});
	it("refuses compressed bodies with 415", async () => {
		await expect(
			readJsonBody(request("x", { "content-type": "application/json", "content-length": "1", "content-encoding": "gzip" }), 1000),
		).rejects.toMatchObject({ code: 415, type: "UNSUPPORTED_MEDIA_TYPE" });
	});
});

describe("gateway settings", () => {
	it("reads sizes", () => {
		expect(envByteSize({}, "BODY_LIMIT", 65536)).toBe(65536);
		expect(envByteSize({ BODY_LIMIT: "64kb" }, "BODY_LIMIT", 0)).toBe(65536);
		expect(envByteSize({ BODY_LIMIT: "1mb" }, "BODY_LIMIT", 0)).toBe(1048576);
		expect(envByteSize({ BODY_LIMIT: "1000" }, "BODY_LIMIT", 0)).toBe(1000);
		expect(() => envByteSize({ BODY_LIMIT: "lots" }, "BODY_LIMIT", 0)).toThrow(/BODY_LIMIT/);
	});
	it("has contract defaults and takes overrides", () => {
		expect(readGatewaySettings({})).toMatchObject({ port: 3000, bodyLimitBytes: 65536, rateLimitPerMinute: 600, rateLimitBurst: 600 });
		expect(readGatewaySettings({ PORT: "0", RATE_LIMIT_PER_MINUTE: "60", RATE_LIMIT_BURST: "5", BODY_LIMIT: "2kb" })).toMatchObject({
			port: 0,
			bodyLimitBytes: 2048,
			rateLimitPerMinute: 60,
			rateLimitBurst: 5,
		});
		expect(() => readGatewaySettings({ RATE_LIMIT_PER_MINUTE: "-1" })).toThrow(/RATE_LIMIT_PER_MINUTE/);
	});
});

describe("answers a service shapes", () => {
	it("keeps a 2xx the service picked, else 200", () => {
		expect([201, 204, 200, 302, 500, "201", undefined].map(successStatus)).toEqual([201, 204, 200, 200, 200, 200, 200]);
	});
	it("passes only plain response headers, never Content-Type", () => {
		expect(serviceResponseHeaders({ "Retry-After": 1, "X-Ok": "yes", "content-type": "text/html", "Bad Name": "x", "X-Obj": { a: 1 } })).toEqual({
			"Retry-After": "1",
			"X-Ok": "yes",
		});
		expect(serviceResponseHeaders(undefined)).toEqual({});
		expect(serviceResponseHeaders(["x"])).toEqual({});
	});
});
