import { buildOpenApiDocument, ERROR_CODES_BY_STATUS, type OpenApiDocument } from "../../../services/gateway/openapi";
import { renderDocsPage } from "../../../services/gateway/docs-page";
import { RIDE_ROUTES } from "../../../contracts/gateway";
import { readGatewaySettings } from "../../../services/gateway/gateway.settings";

const doc: OpenApiDocument = buildOpenApiDocument(readGatewaySettings({}));

function resolve(ref: string): unknown {
	let node: unknown = doc;
	for (const part of ref.replace(/^#\//, "").split("/")) node = (node as Record<string, unknown>)?.[part];
	return node;
}

function collectRefs(node: unknown, out: string[] = []): string[] {
	if (Array.isArray(node)) node.forEach((n) => collectRefs(n, out));
	else if (node && typeof node === "object") {
		for (const [k, v] of Object.entries(node)) {
			if (k === "$ref" && typeof v === "string") out.push(v);
			else collectRefs(v, out);
		}
	}
	return out;
}

type Operation = {
	security?: unknown[];
	parameters?: Array<{ $ref?: string }>;
	requestBody?: { content: Record<string, { schema: { $ref: string } }> };
	responses: Record<
		string,
		{ content?: Record<string, { schema: { allOf?: Array<{ properties?: { code?: { enum?: string[] } } }> } }>; headers?: Record<string, unknown> }
	>;
	callbacks?: unknown;
};
const post = (path: string): Operation => (doc.paths[path] as { post: Operation }).post;

function errorCodesOf(op: Operation): Record<string, string[]> {
	const out: Record<string, string[]> = {};
	for (const [status, response] of Object.entries(op.responses)) {
		const schema = response.content?.["application/json"]?.schema;
		const codes = schema?.allOf?.[1]?.properties?.code?.enum;
		if (codes) out[status] = codes;
	}
	return out;
}

describe("OpenAPI document", () => {
	it("is OpenAPI 3.1 with exactly the six partner routes under /ride, all POST", () => {
		expect(doc.openapi).toBe("3.1.0");
		const ridePaths = Object.keys(doc.paths).filter((p) => p.startsWith("/ride/"));
		expect(ridePaths.sort()).toEqual([
			"/ride/cancel",
			"/ride/create-order",
			"/ride/events",
			"/ride/fare-estimate",
			"/ride/feedback",
			"/ride/sandbox/advance",
			"/ride/status",
		]);
		expect(ridePaths.sort()).toEqual(RIDE_ROUTES.map((r) => `/ride${r.path}`).sort());
		for (const p of ridePaths) expect(Object.keys(doc.paths[p])).toEqual(["post"]);
	});

	it("resolves every $ref", () => {
		const refs = collectRefs(doc);
		expect(refs.length).toBeGreaterThan(50);
		for (const ref of refs) expect([ref, resolve(ref)]).toEqual([ref, expect.anything()]);
	});

	it("has the contract's schemas, the bearer scheme and the webhook", () => {
		const schemas = doc.components.schemas as Record<string, { properties?: Record<string, unknown>; required?: string[] }>;
		for (const name of [
			"Point",
			"Place",
			"Quote",
			"FareEstimate",
			"Order",
			"ActiveRideOrder",
			"WebhookEvent",
			"RideEvents",
			"Error",
			"ErrorDetail",
			"CreateOrderRequest",
		]) {
			expect(schemas[name]).toBeDefined();
		}
		expect(schemas.Point.required).toEqual(["lat", "lng"]);
		expect(Object.keys(schemas.Order.properties!)).toEqual([
			"orderId",
			"otp",
			"status",
			"serviceType",
			"pickup",
			"drop",
			"fare",
			"distance",
			"duration",
			"driver",
			"metadata",
			// Only on rides booked with pickupAt (scheduled rides).
			"pickupAt",
			"createdAt",
			"updatedAt",
			// Optional, where they apply (API.md, "Cancellation policy", "Final fare").
			"cancellationFee",
			"finalFare",
			"etaToPickupSeconds",
		]);
		expect(schemas.Order.required).not.toContain("finalFare");
		expect(Object.keys(schemas.WebhookEvent.properties!)).toEqual([
			"eventId",
			"orderId",
			"status",
			"sequence",
			"occurredAt",
			"mode",
			"apiVersion",
			"driver",
			"location",
			"eta",
			"pickupAt",
			"etaToPickupSeconds",
			"cancellationFee",
			"finalFare",
			"metadata",
		]);
		expect(Object.keys(schemas.Error.properties!)).toEqual(["code", "message", "details", "retryable"]);
		expect(doc.components.securitySchemes).toEqual({
			bearerAuth: expect.objectContaining({ type: "http", scheme: "bearer" }),
			driverToken: expect.objectContaining({ type: "http", scheme: "bearer" }),
		});
		expect(doc.webhooks.rideEvent).toEqual({ $ref: "#/components/pathItems/RideEventWebhook" });
		expect(post("/ride/create-order").callbacks).toBeDefined();
	});

	it("documents every contract error code once, with its status", () => {
		const contract: Array<[number, string]> = [
			[400, "INVALID_JSON"],
			[400, "VALIDATION_ERROR"],
			[400, "INVALID_WEBHOOK_URL"],
			[401, "UNAUTHORIZED"],
			[404, "ORDER_NOT_FOUND"],
			[404, "NOT_FOUND"],
			[409, "RIDE_NOT_ACTIVE"],
			[409, "RIDE_NOT_COMPLETED"],
			[409, "FEEDBACK_ALREADY_SUBMITTED"],
			[409, "IDEMPOTENCY_KEY_IN_USE"],
			[413, "PAYLOAD_TOO_LARGE"],
			[422, "QUOTE_INVALID"],
			[422, "QUOTE_EXPIRED"],
			[422, "IDEMPOTENCY_KEY_REUSED"],
			[429, "RATE_LIMITED"],
			[503, "SERVICE_UNAVAILABLE"],
			[500, "INTERNAL_ERROR"],
		];
		for (const [status, code] of contract) expect(ERROR_CODES_BY_STATUS[status]).toContain(code);
	});

	it("lists each endpoint's own errors and the common ones, with Retry-After where due", () => {
		for (const route of RIDE_ROUTES) {
			const op = post(`/ride${route.path}`);
			expect(op.security).toEqual([{ bearerAuth: [] }]);
			const codes = errorCodesOf(op);
			expect(codes["401"]).toEqual(["UNAUTHORIZED"]);
			expect(codes["400"]).toEqual(expect.arrayContaining(["INVALID_JSON", "VALIDATION_ERROR"]));
			expect(codes["413"]).toEqual(["PAYLOAD_TOO_LARGE"]);
			expect(codes["429"]).toEqual(["RATE_LIMITED"]);
			expect(codes["503"]).toEqual(["SERVICE_UNAVAILABLE"]);
			expect(codes["500"]).toEqual(["INTERNAL_ERROR"]);
			expect(op.responses["429"].headers).toHaveProperty("Retry-After");
			expect(op.responses["503"].headers).toHaveProperty("Retry-After");
			for (const code of route.errors) expect(Object.values(codes).flat()).toContain(code);
		}
		expect(Object.values(errorCodesOf(post("/ride/fare-estimate"))).flat()).not.toContain("ORDER_NOT_FOUND");
		expect(errorCodesOf(post("/ride/create-order"))["422"]).toEqual(["QUOTE_INVALID", "QUOTE_EXPIRED", "IDEMPOTENCY_KEY_REUSED"]);
		expect(errorCodesOf(post("/ride/feedback"))["409"]).toEqual(["RIDE_NOT_COMPLETED", "FEEDBACK_ALREADY_SUBMITTED"]);
		expect(errorCodesOf(post("/ride/cancel"))["409"]).toEqual(["RIDE_NOT_ACTIVE", "RIDE_NOT_CANCELLABLE", "CANCELLATION_FEE_CHANGED", "CONFLICT"]);
		expect(post("/ride/cancel").responses["409"].headers).toHaveProperty("Retry-After");
		expect(post("/ride/feedback").responses["409"].headers).not.toHaveProperty("Retry-After");
	});

	it("documents create-order's Idempotency-Key and both success answers", () => {
		const op = post("/ride/create-order");
		expect(op.parameters).toContainEqual({ $ref: "#/components/parameters/IdempotencyKey" });
		expect(resolve("#/components/parameters/IdempotencyKey")).toMatchObject({ in: "header", name: "Idempotency-Key", schema: { maxLength: 255 } });
		expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(["201", "200"]));
		expect(post("/ride/status").parameters).not.toContainEqual({ $ref: "#/components/parameters/IdempotencyKey" });
	});

	it("documents the Ride-Version header on every /ride operation, its answers and the webhook", () => {
		for (const path of ["/ride/fare-estimate", "/ride/create-order", "/ride/cancel", "/ride/feedback", "/ride/status", "/ride/events"]) {
			const op = post(path);
			expect(op.parameters).toContainEqual({ $ref: "#/components/parameters/RideVersion" });
			expect(op.responses["200"].headers).toHaveProperty("Ride-Version");
			expect(errorCodesOf(op)["400"]).toContain("UNKNOWN_API_VERSION");
		}
		expect(resolve("#/components/parameters/RideVersion")).toMatchObject({
			in: "header",
			name: "Ride-Version",
			required: false,
			schema: { enum: ["2026-12-01"] },
		});
		const webhook = (doc.components.pathItems as Record<string, { post: { parameters: Array<{ name: string; required: boolean }> } }>).RideEventWebhook;
		expect(webhook.post.parameters).toContainEqual(expect.objectContaining({ name: "Ride-Version", required: true }));
	});

	it("states the limits it runs with", () => {
		const custom = buildOpenApiDocument(readGatewaySettings({ RATE_LIMIT_PER_MINUTE: "120", RATE_LIMIT_BURST: "10", BODY_LIMIT: "32kb" }));
		const description = String((custom.info as { description: string }).description);
		expect(description).toContain("120 requests per minute");
		expect(description).toContain("bursts of up to 10");
		expect(description).toContain("32 KB");
		expect(description).toMatch(/per.*instance|each gateway instance/i);
	});
});

describe("API reference page", () => {
	const html = renderDocsPage(doc);

	it("renders every path and schema from the document", () => {
		expect(html.startsWith("<!doctype html>")).toBe(true);
		for (const path of Object.keys(doc.paths)) expect(html).toContain(path);
		for (const name of Object.keys(doc.components.schemas)) expect(html).toContain(`id="schema-${name}"`);
		for (const code of Object.values(ERROR_CODES_BY_STATUS).flat()) expect(html).toContain(code);
		expect(html).toContain("Idempotency-Key");
	});

	it("is self-contained: no scripts, no external assets", () => {
		expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|url\(/i);
		expect(html).not.toMatch(/(src|href)="(https?:)?\/\//i);
	});

	it("escapes text from the document", () => {
		const evil = buildOpenApiDocument(readGatewaySettings({}));
		(evil.info as { title: string }).title = "<script>alert(1)</script>";
		const page = renderDocsPage(evil);
		expect(page).not.toContain("<script>alert(1)</script>");
		expect(page).toContain("&lt;script&gt;");
	});
});
