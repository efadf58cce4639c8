import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RIDE_ROUTES } from "../../contracts/gateway";
import { buildOpenApiDocument, type OpenApiDocument } from "../../services/gateway/openapi";
import { constraintsOf, paramsToJsonSchema, ruleToJsonSchema } from "../../services/gateway/openapi/json-schema";
import { CONVERT, requestSchemaName } from "../../services/gateway/openapi/requests";
import { readGatewaySettings } from "../../services/gateway/gateway.settings";
import { OPENAPI_PATH, openApiText } from "../../scripts/generate-openapi";

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
	const out = execFileSync(process.execPath, ["--input-type=module", "-e", script, file], { cwd: join(__dirname, "../.."), encoding: "utf8" });
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
