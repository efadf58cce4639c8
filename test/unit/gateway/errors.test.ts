import { Errors, Validators } from "moleculer";
import ApiGateway from "moleculer-web";
import { ApiError } from "../../../lib/errors";
import { VALIDATION_MESSAGES } from "../../../contracts/errors";
import { INTERNAL_ERROR_MESSAGE, normaliseField, toErrorResponse, validationDetails, WrappedError } from "../../../services/gateway/errors";

const opts = { unavailableRetryAfterSeconds: 5 };
const map = (err: unknown) => toErrorResponse(err, opts);

/** The broker's validator as moleculer.config.ts sets it up. */
function check(schema: Record<string, unknown>, params: Record<string, unknown>): Array<{ field: string; message: string }> {
	const validator = new Validators.Fastest({ messages: VALIDATION_MESSAGES });
	const result = (validator.compile(schema) as (p: unknown) => true | Array<{ field: string; message: string }>)(params);
	if (result === true) throw new Error("expected the params to be invalid");
	return result;
}

/** A ValidationError exactly as the broker's fastest-validator raises it. */
function realValidationError(schema: Record<string, unknown>, params: Record<string, unknown>): Errors.ValidationError {
	return new Errors.ValidationError("Parameters validation error!", "VALIDATION_ERROR", check(schema, params));
}

/** An error as it arrives from another node over NATS: Moleculer recreates unknown classes as plain Errors. */
function overTheWire(err: Error & { code?: unknown; type?: unknown; data?: unknown }): Error {
	const plain = new Error(err.message) as Error & Record<string, unknown>;
	plain.name = err.name;
	plain.code = err.code;
	plain.type = err.type;
	plain.data = err.data;
	return plain;
}

describe("field names", () => {
	it.each([
		["pickup.lat", "pickup.lat"],
		["params.pickup.lat", "pickup.lat"],
		["body.user.phone", "user.phone"],
		['pickup["lat"]', "pickup.lat"],
		["tags[0]", "tags[0]"],
		["params.params.orderId", "orderId"],
		["$$root", ""],
	])("%s → %s", (raw, expected) => {
		expect(normaliseField(raw)).toBe(expected);
	});

	it("the validator's messages name the body field", () => {
		const messages = check(
			{
				pickup: { type: "object", props: { lat: { type: "number", max: 90 } } },
				user: { type: "object", props: { name: "string" } },
				metadata: "object",
			},
			{ pickup: { lat: 91 }, user: {}, metadata: 1 },
		).map((e) => e.message);
		expect(messages).toEqual(["pickup.lat must be less than or equal to 90", "user.name is required", "metadata must be an Object"]);
		// A rule's own message is kept as it is.
		expect(validationDetails([{ field: "x", message: "Something else entirely" }])).toEqual([{ field: "x", message: "Something else entirely" }]);
	});
});

describe("validation errors", () => {
	it("maps a real fastest-validator ValidationError to 400 VALIDATION_ERROR with one detail per field", () => {
		const err = realValidationError(
			{
				pickup: { type: "object", props: { lat: { type: "number", min: -90, max: 90 }, lng: { type: "number" } } },
				user: { type: "object", props: { name: { type: "string" } } },
				serviceType: { type: "enum", values: ["scooty", "cab"] },
			},
			{ pickup: { lat: 100, lng: "x" }, user: {}, serviceType: "bike" },
		);
		const r = map(err);
		expect(r.status).toBe(400);
		expect(r.body.code).toBe("VALIDATION_ERROR");
		expect(r.body.retryable).toBe(false);
		const fields = r.body.details!.map((d) => d.field).sort();
		expect(fields).toEqual(["pickup.lat", "pickup.lng", "serviceType", "user.name"]);
		const lat = r.body.details!.find((d) => d.field === "pickup.lat")!;
		expect(lat.message).toBe("pickup.lat must be less than or equal to 90");
		expect(r.body.details!.find((d) => d.field === "serviceType")!.message).toBe("serviceType must be one of: scooty, cab");
		expect(r.body.message).toMatch(/^pickup\.lat must be less than or equal to 90 \(and 3 more\)$|^.+ \(and 3 more\)$/);
		// Only the contract's keys.
		expect(Object.keys(r.body).sort()).toEqual(["code", "details", "message", "retryable"]);
		for (const d of r.body.details!) expect(Object.keys(d).sort()).toEqual(["field", "message"]);
	});

	it("keeps the mapping when the ValidationError crossed NATS", () => {
		const err = realValidationError({ orderId: { type: "string" } }, {});
		const r = map(overTheWire(err));
		expect(r.status).toBe(400);
		expect(r.body.details).toEqual([{ field: "orderId", message: "orderId is required" }]);
		expect(r.body.message).toBe("orderId is required");
	});

	it("strips params. prefixes from validator fields", () => {
		const details = validationDetails([{ type: "number", field: "params.drop.lng", message: "drop.lng must be a number" }]);
		expect(details).toEqual([{ field: "drop.lng", message: "drop.lng must be a number" }]);
	});

	it("answers 400 for a 422 VALIDATION_ERROR without a field list", () => {
		const r = map(new Errors.MoleculerClientError("bad", 422, "VALIDATION_ERROR"));
		expect(r.status).toBe(400);
		expect(r.body.code).toBe("VALIDATION_ERROR");
	});
});

describe("ApiErrors pass through", () => {
	it.each([
		[new ApiError("ORDER_NOT_FOUND", "Order not found"), 404, "ORDER_NOT_FOUND"],
		[new ApiError("RIDE_NOT_ACTIVE", "The ride is dropped"), 409, "RIDE_NOT_ACTIVE"],
		[new ApiError("QUOTE_EXPIRED", "The quote expired"), 422, "QUOTE_EXPIRED"],
		[new ApiError("INVALID_WEBHOOK_URL", "webhookURL is private"), 400, "INVALID_WEBHOOK_URL"],
	])("%s", (err, status, code) => {
		for (const e of [err, overTheWire(err)]) {
			const r = map(e);
			expect(r.status).toBe(status);
			expect(r.body).toEqual({ code, message: err.message, retryable: false });
		}
	});

	it("keeps details of an ApiError, normalised", () => {
		const r = map(new ApiError("VALIDATION_ERROR", "pickup equals drop", { details: [{ field: "params.drop", message: "must differ from pickup" }] }));
		expect(r.status).toBe(400);
		expect(r.body.details).toEqual([{ field: "drop", message: "must differ from pickup" }]);
	});

	it("marks IDEMPOTENCY_KEY_IN_USE retryable", () => {
		expect(map(new ApiError("IDEMPOTENCY_KEY_IN_USE", "running")).body.retryable).toBe(true);
	});

	it("marks a client error retryable, with Retry-After, when the service said when to come back", () => {
		const r = map(overTheWire(new ApiError("CONFLICT", "The ride kept changing; try again", { retryAfter: 1 })));
		expect(r.status).toBe(409);
		expect(r.body).toEqual({ code: "CONFLICT", message: "The ride kept changing; try again", retryable: true });
		expect(r.headers["Retry-After"]).toBe("1");
	});

	it("sends Retry-After with 429 RATE_LIMITED", () => {
		const r = map(new ApiError("RATE_LIMITED", "slow down", { retryAfter: 7 }));
		expect(r.status).toBe(429);
		expect(r.headers["Retry-After"]).toBe("7");
		expect(r.body).toEqual({ code: "RATE_LIMITED", message: "slow down", retryable: true });
	});

	it("always calls a 401 UNAUTHORIZED, whatever type the thrower gave it", () => {
		const r = map(new ApiGateway.Errors.UnAuthorizedError(ApiGateway.Errors.ERR_INVALID_TOKEN, null));
		expect(r.status).toBe(401);
		expect(r.body.code).toBe("UNAUTHORIZED");
		expect(r.headers["WWW-Authenticate"]).toMatch(/^Bearer/);
	});
});

describe("unavailable services", () => {
	const cases: Array<[string, unknown]> = [
		["ServiceNotFoundError", new Errors.ServiceNotFoundError({ action: "pricing.estimate" })],
		["ServiceNotAvailableError", new Errors.ServiceNotAvailableError({ action: "orders.create", nodeID: "n1" })],
		["RequestTimeoutError", new Errors.RequestTimeoutError({ action: "orders.create", nodeID: "n1" })],
		["RequestRejectedError", new Errors.RequestRejectedError({ action: "orders.create", nodeID: "n1" })],
		["QueueIsFullError", new Errors.QueueIsFullError({ action: "orders.create", nodeID: "n1" })],
		["BrokerDisconnectedError", Reflect.construct(Errors.BrokerDisconnectedError, [])],
		["moleculer-web ServiceUnavailableError", Reflect.construct(ApiGateway.Errors.ServiceUnavailableError, [])],
		["database refused", Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { name: "SequelizeConnectionRefusedError" })],
		["socket error", Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" })],
		["wrapped over NATS", overTheWire(new Errors.ServiceNotFoundError({ action: "riders.upsert" }))],
	];
	it.each(cases)("%s → 503 SERVICE_UNAVAILABLE with Retry-After", (_name, err) => {
		const r = map(err);
		expect(r.status).toBe(503);
		expect(r.body).toEqual({ code: "SERVICE_UNAVAILABLE", message: expect.any(String), retryable: true });
		expect(r.headers["Retry-After"]).toBe("5");
		expect(r.body.message).not.toMatch(/pricing|orders|riders|n1|5432/);
	});

	it("honours a service's own retryAfter", () => {
		const r = map(new ApiError("SERVICE_UNAVAILABLE", "busy", { retryAfter: 30 }));
		expect(r.status).toBe(503);
		expect(r.headers["Retry-After"]).toBe("30");
	});
});

describe("everything else is 500 INTERNAL_ERROR and says nothing", () => {
	const sqlError = Object.assign(new Error('relation "partners" does not exist'), {
		name: "SequelizeDatabaseError",
		sql: "SELECT id, name FROM partners WHERE api_key_hash = $1",
		parent: { code: "42P01" },
	});
	it.each([
		["a SQL error", sqlError],
		["a TypeError", new TypeError("Cannot read properties of undefined (reading 'lat')")],
		["a MoleculerServerError", new Errors.MoleculerServerError("boom", 500, "SOMETHING")],
		["a thrown string", "oops"],
		["undefined", undefined],
		["a wrapped SQL error", new WrappedError(sqlError)],
		["a 3xx code", new Errors.MoleculerError("odd", 302, "ODD")],
	])("%s", (_name, err) => {
		const r = map(err);
		expect(r.status).toBe(500);
		expect(r.body).toEqual({ code: "INTERNAL_ERROR", message: INTERNAL_ERROR_MESSAGE, retryable: false });
		expect(r.logLevel).toBe("error");
		const text = JSON.stringify(r.body);
		expect(text).not.toMatch(/partners|SELECT|relation|undefined|stack|\bat\s/);
	});
});
