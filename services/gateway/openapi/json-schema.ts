/**
 * fastest-validator rules → JSON Schema (2020-12, as OpenAPI 3.1 uses it).
 * The OpenAPI document's request bodies are these conversions of the params
 * in contracts/, and the drift test converts the params the running actions
 * declare with the same function, so the two can only differ if the code
 * drifts from the document. Pure.
 *
 * Covered: string (min/max/length/pattern/empty/enum; trim and convert do not
 * change what is accepted as JSON), number (min/max/equal/integer/positive/
 * negative), boolean, enum, equal, email, url, uuid, any, object (props,
 * optional, default, strict), array (items/min/max/length/unique/enum),
 * nullable, multi-rules (oneOf) and the "string|optional" shorthand. An
 * unknown rule type throws: the document must not silently say less.
 */

export type JsonSchema = Record<string, unknown>;
type Rule = Record<string, unknown>;
export type ParamsSchema = Record<string, unknown>;

export interface ConvertOptions {
	/**
	 * Named rules turned into `$ref`s: a rule equal to one of these (ignoring
	 * optional/nullable/default, which belong to the place it is used) becomes
	 * `{ $ref: "#/components/schemas/<name>" }`.
	 */
	refs?: Record<string, unknown>;
}

/** Keys that only say how a rule is used where it appears. */
const USAGE_KEYS = new Set(["optional", "nullable", "default", "messages"]);

/** "string|optional|min:3" → { type: "string", optional: true, min: 3 }. */
function normaliseRule(rule: unknown): Rule | Rule[] {
	if (Array.isArray(rule)) return rule.map((r) => normaliseRule(r) as Rule);
	if (typeof rule === "string") {
		const [type, ...flags] = rule.split("|");
		const out: Rule = { type };
		for (const flag of flags) {
			const [key, value] = flag.split(":");
			out[key] = value === undefined ? true : Number.isNaN(Number(value)) ? value : Number(value);
		}
		return out;
	}
	if (rule && typeof rule === "object") return rule as Rule;
	throw new Error(`Not a fastest-validator rule: ${JSON.stringify(rule)}`);
}

function withoutUsage(rule: Rule): Rule {
	return Object.fromEntries(Object.entries(rule).filter(([k]) => !USAGE_KEYS.has(k)));
}

function sameRule(a: unknown, b: unknown): boolean {
	return stableJson(a) === stableJson(b);
}

/** JSON with sorted keys and RegExps as their source, for comparing rules. */
export function stableJson(value: unknown): string {
	return JSON.stringify(value, (_key, v: unknown) => {
		if (v instanceof RegExp) return `/${v.source}/${v.flags}`;
		if (v && typeof v === "object" && !Array.isArray(v)) {
			return Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)));
		}
		return v;
	});
}

function isOptional(rule: Rule | Rule[]): boolean {
	if (Array.isArray(rule)) return rule.every((r) => isOptional(r));
	return rule.optional === true || rule.default !== undefined;
}

function patternOf(pattern: unknown): string {
	return pattern instanceof RegExp ? pattern.source : String(pattern);
}

function setIf(target: JsonSchema, key: string, value: unknown): void {
	if (value !== undefined) target[key] = value;
}

function stringSchema(rule: Rule): JsonSchema {
	const s: JsonSchema = { type: "string" };
	const min = rule.empty === false ? Math.max(1, Number(rule.min ?? 1)) : rule.min;
	setIf(s, "minLength", rule.length ?? min);
	setIf(s, "maxLength", rule.length ?? rule.max);
	if (rule.pattern !== undefined) s.pattern = patternOf(rule.pattern);
	if (Array.isArray(rule.enum)) s.enum = rule.enum;
	return s;
}

function numberSchema(rule: Rule): JsonSchema {
	const s: JsonSchema = { type: rule.integer ? "integer" : "number" };
	if (rule.equal !== undefined) s.const = rule.equal;
	setIf(s, "minimum", rule.min);
	setIf(s, "maximum", rule.max);
	if (rule.positive) s.exclusiveMinimum = 0;
	if (rule.negative) s.exclusiveMaximum = 0;
	return s;
}

function objectSchema(rule: Rule, opts: ConvertOptions): JsonSchema {
	const s: JsonSchema = { type: "object" };
	const props = (rule.props ?? rule.properties) as ParamsSchema | undefined;
	if (props) Object.assign(s, paramsToJsonSchema(props, opts));
	// strict: true refuses unknown keys; "remove" drops them (accepted), false keeps them.
	if (rule.strict === true) s.additionalProperties = false;
	return s;
}

function arraySchema(rule: Rule, opts: ConvertOptions): JsonSchema {
	const s: JsonSchema = { type: "array" };
	if (rule.items !== undefined) s.items = ruleToJsonSchema(rule.items, opts);
	if (Array.isArray(rule.enum)) s.items = { ...(s.items as JsonSchema | undefined), enum: rule.enum };
	setIf(s, "minItems", rule.length ?? (rule.empty === false ? Math.max(1, Number(rule.min ?? 1)) : rule.min));
	setIf(s, "maxItems", rule.length ?? rule.max);
	if (rule.unique) s.uniqueItems = true;
	return s;
}

function bareSchema(rule: Rule, opts: ConvertOptions): JsonSchema {
	switch (rule.type) {
		case "string":
			return stringSchema(rule);
		case "number":
			return numberSchema(rule);
		case "boolean":
			return { type: "boolean" };
		case "enum": {
			const values = [...(rule.values as unknown[])];
			return values.every((v) => typeof v === "string") ? { type: "string", enum: values } : { enum: values };
		}
		case "equal":
			return { const: rule.value };
		case "email":
			return { ...stringSchema({ ...rule, pattern: undefined }), format: "email" };
		case "url":
			return { ...stringSchema({ ...rule, pattern: undefined }), format: "uri" };
		case "uuid":
			return { type: "string", format: "uuid" };
		case "any":
			return {};
		case "object":
			return objectSchema(rule, opts);
		case "array":
			return arraySchema(rule, opts);
		default:
			throw new Error(`OpenAPI: no JSON Schema for fastest-validator rule type "${String(rule.type)}"`);
	}
}

function nullableOf(schema: JsonSchema): JsonSchema {
	if (typeof schema.type === "string") return { ...schema, type: [schema.type, "null"] };
	return { oneOf: [schema, { type: "null" }] };
}

/** One rule → JSON Schema. */
export function ruleToJsonSchema(raw: unknown, opts: ConvertOptions = {}): JsonSchema {
	const rule = normaliseRule(raw);
	if (Array.isArray(rule)) return { oneOf: rule.map((r) => ruleToJsonSchema(r, opts)) };
	const bare = withoutUsage(rule);
	const named = Object.entries(opts.refs ?? {}).find(
		([, candidate]) => candidate !== undefined && sameRule(bare, withoutUsage(normaliseRule(candidate) as Rule)),
	);
	let schema: JsonSchema = named ? { $ref: `#/components/schemas/${named[0]}` } : bareSchema(rule, opts);
	if (rule.default !== undefined) schema.default = rule.default;
	if (rule.nullable === true) schema = nullableOf(schema);
	return schema;
}

/** An action's `params` (an object schema's props) → `{ type: "object", required, properties }`. */
export function paramsToJsonSchema(params: ParamsSchema, opts: ConvertOptions = {}): JsonSchema {
	const properties: Record<string, JsonSchema> = {};
	const required: string[] = [];
	for (const [name, raw] of Object.entries(params)) {
		if (name === "$$strict" || name === "$$async") continue;
		const rule = normaliseRule(raw);
		properties[name] = ruleToJsonSchema(rule, opts);
		if (!isOptional(rule)) required.push(name);
	}
	const schema: JsonSchema = { type: "object" };
	if (required.length > 0) schema.required = required;
	schema.properties = properties;
	if (params.$$strict === true) schema.additionalProperties = false;
	return schema;
}

/** Keys of a JSON Schema that are prose, not constraints. */
const PROSE_KEYS = new Set(["description", "example", "examples", "title"]);

/** The schema without its prose: what the drift test compares. */
export function constraintsOf(schema: unknown): unknown {
	if (Array.isArray(schema)) return schema.map(constraintsOf);
	if (schema && typeof schema === "object") {
		return Object.fromEntries(
			Object.entries(schema as Record<string, unknown>)
				.filter(([k]) => !PROSE_KEYS.has(k))
				.map(([k, v]) => [
					k,
					k === "properties"
						? Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([p, s]) => [p, constraintsOf(s)]))
						: constraintsOf(v),
				]),
		);
	}
	return schema;
}
