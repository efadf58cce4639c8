import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RIDE_ROUTES } from "../../../contracts/gateway";
import { buildOpenApiDocument, type OpenApiDocument } from "../../../services/gateway/openapi";
import { constraintsOf, paramsToJsonSchema, ruleToJsonSchema } from "../../../services/gateway/openapi/json-schema";
import { CONVERT, requestSchemaName } from "../../../services/gateway/openapi/requests";
import { readGatewaySettings } from "../../../services/gateway/gateway.settings";
import { OPENAPI_PATH, openApiText } from "../../../scripts/generate-openapi";
import { endpointErrorCodes } from "../../../contracts/gateway";
import { documentedCodesByStatus, ERRORS } from "../../../contracts/errors";
import {
	DEFAULT_BODY_LIMIT_BYTES,
	DEFAULT_LOCATION_INTERVAL_MS,
	DEFAULT_QUOTE_TTL_SECONDS,
	DEFAULT_RATE_LIMIT_PER_MINUTE,
	DEFAULT_SEARCH_RADIUS_METRES,
	OTP_DIGITS,
	QUOTE_MATCH_RADIUS_METRES,
	REQUEST_ID_MAX_LENGTH,
	SERVICE_RETRY_AFTER_SECONDS,
	UNAVAILABLE_RETRY_AFTER_SECONDS,
	WEBHOOK_RETRY_JITTER,
} from "../../../contracts/constants";
import { IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_TTL_MS, METADATA_MAX_BYTES } from "../../../contracts/orders";
import { LOCATION_TTL_MS, WEBHOOK_TIMEOUT_MS } from "../../../contracts/notifications";
import { hours, retrySchedule, seconds } from "../../../services/gateway/openapi/format";

/**
 * The OpenAPI document cannot drift: it is valid OpenAPI 3.1, the committed
 * docs/openapi.json is exactly what the code generates, and every request
 * body is the conversion of the params in contracts/. (That the running
 * services validate with those same params: test/integration/openapi-drift.)
 */

const doc: OpenApiDocument = buildOpenApiDocument(readGatewaySettings({}));

/**
 * @seriousme/openapi-schema-validator is an ES module, which jest's CommonJS
 * runtime cannot load: it runs in a child Node process.
 */
function validateOpenApi(document: unknown): { valid: boolean; errors?: unknown } {
	const file = join(mkdtempSync(join(tmpdir(), "openapi-")), "doc.json");
	writeFileSync(file, JSON.stringify(document));
	const script = `
		import { Validator } from "@seriousme/openapi-schema-validator";
		import { readFileSync } from "node:fs";
		const result = await new Validator().validate(JSON.parse(readFileSync(process.argv[1], "utf8")));
		process.stdout.write(JSON.stringify(result));`;
	const out = execFileSync(process.execPath, ["--input-type=module", "-e", script, file], { cwd: join(__dirname, "../../.."), encoding: "utf8" });
	return JSON.parse(out) as { valid: boolean; errors?: unknown };
}

describe("the generated OpenAPI document", () => {
	it("is valid OpenAPI 3.1 (and the validator does refuse a broken one)", () => {
		expect(validateOpenApi(doc)).toEqual({ valid: true });
		const broken = { ...doc, paths: { "/ride/cancel": { post: { responses: "none" } } } };
		expect(validateOpenApi(broken).valid).toBe(false);
	});

	it("is committed as docs/openapi.json (regenerate: npx tsx scripts/generate-openapi.ts)", () => {
		expect(readFileSync(OPENAPI_PATH, "utf8")).toBe(openApiText());
	});

	it.each(RIDE_ROUTES.map((r) => [r.path, r] as const))("documents the body of %s as its action's params", (_path, route) => {
		const op = (doc.paths[`/ride${route.path}`] as { post: { requestBody: { content: Record<string, { schema: { $ref: string } }> } } }).post;
		const name = requestSchemaName(route);
		expect(op.requestBody.content["application/json"].schema).toEqual({ $ref: `#/components/schemas/${name}` });
		const documented = doc.components.schemas[name];
		expect(constraintsOf(documented)).toEqual(constraintsOf(paramsToJsonSchema(route.params, CONVERT)));
	});

	it("says nothing about order ids beyond what the server checks", () => {
		const orderId = (doc.components.schemas.CancelRequest as { properties: { orderId: Record<string, unknown> } }).properties.orderId;
		expect(orderId).toEqual({ type: "string", minLength: 1, maxLength: 100 });
	});
});

describe("fastest-validator → JSON Schema", () => {
	it.each<[string, unknown, Record<string, unknown>]>([
		["string limits", { type: "string", min: 1, max: 5, trim: true }, { type: "string", minLength: 1, maxLength: 5 }],
		["string pattern", { type: "string", pattern: /^drv_[a-z]+$/ }, { type: "string", pattern: "^drv_[a-z]+$" }],
		["non-empty string", { type: "string", empty: false }, { type: "string", minLength: 1 }],
		["string enum", { type: "string", enum: ["a", "b"] }, { type: "string", enum: ["a", "b"] }],
		["integer range", { type: "number", integer: true, min: 1, max: 5 }, { type: "integer", minimum: 1, maximum: 5 }],
		["positive number", { type: "number", positive: true }, { type: "number", exclusiveMinimum: 0 }],
		["enum", { type: "enum", values: ["scooty", "cab"] }, { type: "string", enum: ["scooty", "cab"] }],
		["email", { type: "email", max: 254 }, { type: "string", maxLength: 254, format: "email" }],
		["boolean shorthand", "boolean|optional", { type: "boolean" }],
		["nullable integer", { type: "number", integer: true, nullable: true }, { type: ["integer", "null"] }],
		["array", { type: "array", items: "string", max: 3, unique: true }, { type: "array", items: { type: "string" }, maxItems: 3, uniqueItems: true }],
		[
			"strict object",
			{ type: "object", strict: true, props: { a: "string", b: { type: "number", optional: true } } },
			{ type: "object", required: ["a"], properties: { a: { type: "string" }, b: { type: "number" } }, additionalProperties: false },
		],
		["free object", { type: "object" }, { type: "object" }],
		["multi", [{ type: "string" }, { type: "number" }], { oneOf: [{ type: "string" }, { type: "number" }] }],
	])("%s", (_name, rule, expected) => {
		expect(ruleToJsonSchema(rule)).toEqual(expected);
	});

	it("turns a named rule into a $ref wherever it is used, optional or not", () => {
		const place = { type: "object", props: { lat: "number" } };
		const schema = paramsToJsonSchema({ pickup: place, drop: { ...place, optional: true } }, { refs: { Place: place } });
		expect(schema).toEqual({
			type: "object",
			required: ["pickup"],
			properties: { pickup: { $ref: "#/components/schemas/Place" }, drop: { $ref: "#/components/schemas/Place" } },
		});
	});

	it("refuses a rule it cannot express", () => {
		expect(() => ruleToJsonSchema({ type: "luhn" })).toThrow(/luhn/);
	});
});

describe("docs/API.md agrees with the contracts", () => {
	const root = join(__dirname, "../../..");
	const page = readFileSync(join(root, "docs/API.md"), "utf8");
	/** Rows of the markdown table whose header starts with `firstHeader`. */
	function tableRows(firstHeader: string): string[][] {
		const lines = page.split("\n");
		const start = lines.findIndex((l) => l.startsWith(`| ${firstHeader} |`));
		const rows: string[][] = [];
		for (const line of lines.slice(start + 2)) {
			if (!line.startsWith("|")) break;
			rows.push(
				line
					.split("|")
					.slice(1, -1)
					.map((c) => c.trim()),
			);
		}
		return rows;
	}

	it("lists every documented error code with its status, in the table's order", () => {
		const rows = tableRows("HTTP").map(([status, code]) => [Number(status), code.replace(/`/g, "")]);
		const expected = Object.entries(documentedCodesByStatus()).flatMap(([status, codes]) => codes.map((c) => [Number(status), c]));
		expect(rows).toEqual(expected);
		for (const [status, code] of rows) expect(ERRORS[code as keyof typeof ERRORS].status).toBe(status);
	});

	it("lists each endpoint's own error codes", () => {
		const rows = tableRows("endpoint").map(([path, codes]) => [path.replace(/`/g, ""), codes === "—" ? [] : codes.replace(/`/g, "").split(", ")]);
		expect(rows).toEqual(RIDE_ROUTES.map((r) => [`/ride${r.path}`, [...r.errors]]));
		for (const route of RIDE_ROUTES) expect(endpointErrorCodes(route).length).toBeGreaterThan(route.errors.length);
	});

	it("states the contract numbers as contracts/ defines them", () => {
		const prose = page.replace(/\s+/g, " ");
		for (const text of [
			`${DEFAULT_BODY_LIMIT_BYTES / 1024} KB by default`,
			`${DEFAULT_RATE_LIMIT_PER_MINUTE} requests per minute per partner by default`,
			`valid for ${DEFAULT_QUOTE_TTL_SECONDS / 60} minutes by default`,
			`within ${DEFAULT_SEARCH_RADIUS_METRES / 1000} km`,
			`more than ${QUOTE_MATCH_RADIUS_METRES} m`,
			`within ${hours(IDEMPOTENCY_TTL_MS)}`,
			`1–${IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII`,
			`1–${REQUEST_ID_MAX_LENGTH} characters`,
			`(${METADATA_MAX_BYTES} bytes)`,
			`${OTP_DIGITS} digits`,
			`within ${seconds(WEBHOOK_TIMEOUT_MS)}`,
			`up to ${WEBHOOK_RETRY_JITTER * 100}% jitter ${retrySchedule()}`,
			`within ${seconds(LOCATION_TTL_MS)} of being made`,
			`every ${seconds(DEFAULT_LOCATION_INTERVAL_MS)} by default`,
			`(\`Retry-After: ${UNAVAILABLE_RETRY_AFTER_SECONDS}\`)`,
			`\`Retry-After: ${SERVICE_RETRY_AFTER_SECONDS}\``,
		]) {
			expect([text, prose.includes(text)]).toEqual([text, true]);
		}
	});

	it("links only inside the repository", () => {
		const targets = [...page.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]);
		expect(targets.length).toBeGreaterThan(0);
		for (const target of targets) {
			if (target.startsWith("#")) continue;
			expect(target).not.toMatch(/^[a-z]+:|^\/|\.\.\//i);
			expect(existsSync(join(root, "docs", target))).toBe(true);
		}
	});
});
