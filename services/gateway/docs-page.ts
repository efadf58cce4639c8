import type { OpenApiDocument } from "./openapi";

/**
 * Renders the OpenAPI document as one self-contained HTML page (`GET /docs`):
 * no scripts, no fonts, no CDN, so it works on a machine without internet
 * and under a `default-src 'none'` content security policy. Pure.
 */

type Json = Record<string, unknown>;

const HTTP_METHODS = ["get", "post", "put", "patch", "delete"];

export function escapeHtml(text: string): string {
	return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** The small piece of Markdown our descriptions use: `code`, **bold**. Escapes first. */
export function inlineMarkdown(text: string): string {
	return escapeHtml(text)
		.replace(/`([^`]+)`/g, "<code>$1</code>")
		.replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>");
}

/** Paragraphs, `## ` headings and `- ` lists. */
export function blockMarkdown(text: string): string {
	const out: string[] = [];
	let list: string[] = [];
	let para: string[] = [];
	const flush = () => {
		if (para.length) out.push(`<p>${inlineMarkdown(para.join(" "))}</p>`);
		if (list.length) out.push(`<ul>${list.map((li) => `<li>${inlineMarkdown(li)}</li>`).join("")}</ul>`);
		para = [];
		list = [];
	};
	for (const raw of text.split("\n")) {
		const line = raw.trim();
		if (line === "") flush();
		else if (line.startsWith("## ")) {
			flush();
			out.push(`<h3>${inlineMarkdown(line.slice(3))}</h3>`);
		} else if (line.startsWith("- ")) {
			if (para.length) flush();
			list.push(line.slice(2));
		} else {
			if (list.length) flush();
			para.push(line);
		}
	}
	flush();
	return out.join("\n");
}

function isObject(v: unknown): v is Json {
	return typeof v === "object" && v !== null && !Array.isArray(v);
}

function refName(ref: string): string {
	return ref.split("/").pop() ?? ref;
}

function anchor(kind: string, name: string): string {
	return `${kind}-${name.replace(/[^A-Za-z0-9_-]/g, "-")}`;
}

class Renderer {
	constructor(private readonly doc: OpenApiDocument) {}

	resolve(node: unknown): Json {
		let n = node;
		for (let i = 0; i < 10 && isObject(n) && typeof n.$ref === "string"; i++) {
			const path = n.$ref.replace(/^#\//, "").split("/");
			let target: unknown = this.doc;
			for (const p of path) target = isObject(target) ? target[p] : undefined;
			n = target;
		}
		return isObject(n) ? n : {};
	}

	/** A short type expression with links to named schemas. */
	typeOf(schema: unknown): string {
		if (!isObject(schema)) return "any";
		if (typeof schema.$ref === "string") {
			const name = refName(schema.$ref);
			return `<a href="#${anchor("schema", name)}">${escapeHtml(name)}</a>`;
		}
		if (Array.isArray(schema.oneOf)) return schema.oneOf.map((s) => this.typeOf(s)).join(" | ");
		if (Array.isArray(schema.allOf)) return schema.allOf.map((s) => this.typeOf(s)).join(" &amp; ");
		if ("const" in schema) return `<code>${escapeHtml(JSON.stringify(schema.const))}</code>`;
		const types = Array.isArray(schema.type) ? schema.type : schema.type !== undefined ? [schema.type] : [];
		if (types.includes("array")) return `array of ${this.typeOf(schema.items)}`;
		if (types.length > 0) return types.map((t) => escapeHtml(String(t))).join(" | ");
		if (Array.isArray(schema.enum)) return "string";
		return "object";
	}

	constraints(schema: unknown): string {
		if (!isObject(schema)) return "";
		const parts: string[] = [];
		const add = (label: string, key: string) => {
			if (schema[key] !== undefined) parts.push(`${label} ${escapeHtml(String(schema[key]))}`);
		};
		add("min", "minimum");
		add("max", "maximum");
		add("min length", "minLength");
		add("max length", "maxLength");
		add("max items", "maxItems");
		if (typeof schema.format === "string") parts.push(`format ${escapeHtml(schema.format)}`);
		if (typeof schema.pattern === "string") parts.push(`pattern <code>${escapeHtml(schema.pattern)}</code>`);
		if (Array.isArray(schema.enum)) parts.push(`one of ${schema.enum.map((v) => `<code>${escapeHtml(String(v))}</code>`).join(", ")}`);
		const items = isObject(schema.items) ? schema.items : undefined;
		if (items && typeof items.maxLength === "number") parts.push(`each at most ${items.maxLength} chars`);
		return parts.join("; ");
	}

	/** The properties of an object schema (following allOf), as table rows. */
	propertyRows(schema: Json): string {
		const rows: string[] = [];
		const visit = (s: Json, depth: number) => {
			if (depth > 5) return;
			if (Array.isArray(s.allOf)) {
				for (const part of s.allOf) {
					if (isObject(part) && typeof part.$ref === "string") {
						const name = refName(part.$ref);
						rows.push(`<tr><td colspan="4">All fields of <a href="#${anchor("schema", name)}">${escapeHtml(name)}</a>, and:</td></tr>`);
					} else visit(this.resolve(part), depth + 1);
				}
			}
			const props = isObject(s.properties) ? s.properties : {};
			const required = Array.isArray(s.required) ? (s.required as string[]) : [];
			for (const [name, prop] of Object.entries(props)) {
				const p = isObject(prop) ? prop : {};
				const described =
					typeof p.description === "string"
						? p.description
						: typeof this.resolve(p).description === "string" && typeof p.$ref !== "string"
							? String(this.resolve(p).description)
							: "";
				const limits = this.constraints(p);
				rows.push(
					`<tr><td><code>${escapeHtml(name)}</code></td><td>${this.typeOf(p)}</td><td>${required.includes(name) ? "yes" : "no"}</td><td>${inlineMarkdown(described)}${limits ? `<div class="limits">${limits}</div>` : ""}</td></tr>`,
				);
			}
		};
		visit(schema, 0);
		return rows.join("\n");
	}

	schemaTable(schema: Json): string {
		const rows = this.propertyRows(schema);
		if (!rows) {
			const limits = this.constraints(schema);
			return `<p>Type: ${this.typeOf(schema)}${limits ? ` (${limits})` : ""}</p>`;
		}
		return `<table><thead><tr><th>Field</th><th>Type</th><th>Required</th><th>Description</th></tr></thead><tbody>${rows}</tbody></table>`;
	}

	responseBody(response: Json): string {
		const content = isObject(response.content) ? response.content : {};
		const parts: string[] = [];
		for (const [mediaType, media] of Object.entries(content)) {
			const m = isObject(media) ? media : {};
			const schema = isObject(m.schema) ? m.schema : {};
			let codes = "";
			if (Array.isArray(schema.allOf)) {
				for (const part of schema.allOf) {
					const code = isObject(part) && isObject(part.properties) && isObject(part.properties.code) ? part.properties.code : undefined;
					if (code && Array.isArray(code.enum)) codes = code.enum.map((c) => `<code>${escapeHtml(String(c))}</code>`).join(" ");
				}
			}
			parts.push(
				`${escapeHtml(mediaType)}: ${codes ? `${this.typeOf({ $ref: "#/components/schemas/Error" })} with code ${codes}` : this.typeOf(schema)}`,
			);
		}
		return parts.join("<br>");
	}

	headersOf(response: Json): string {
		const headers = isObject(response.headers) ? Object.keys(response.headers) : [];
		return headers.map((h) => `<code>${escapeHtml(h)}</code>`).join(" ");
	}

	operation(method: string, path: string, op: Json, id: string): string {
		const parameters = (Array.isArray(op.parameters) ? op.parameters : []).map((p) => this.resolve(p));
		const security = Array.isArray(op.security) ? op.security : this.doc.security;
		const needsAuth = Array.isArray(security) && security.length > 0;
		const body = isObject(op.requestBody) ? op.requestBody : undefined;
		const bodySchema =
			body && isObject(body.content) && isObject(body.content["application/json"]) ? (body.content["application/json"] as Json).schema : undefined;
		const responses = isObject(op.responses) ? op.responses : {};
		const parts: string[] = [
			`<section class="op" id="${id}">`,
			`<h3><span class="method ${escapeHtml(method)}">${escapeHtml(method.toUpperCase())}</span> <code>${escapeHtml(path)}</code> — ${inlineMarkdown(String(op.summary ?? ""))}</h3>`,
		];
		if (typeof op.description === "string") parts.push(blockMarkdown(op.description));
		parts.push(`<p class="auth">${needsAuth ? "Requires <code>Authorization: Bearer &lt;apiKey&gt;</code>." : "No authentication."}</p>`);
		if (parameters.length > 0) {
			parts.push("<h4>Headers</h4><table><thead><tr><th>Name</th><th>Required</th><th>Description</th></tr></thead><tbody>");
			for (const p of parameters) {
				parts.push(
					`<tr><td><code>${escapeHtml(String(p.name))}</code></td><td>${p.required ? "yes" : "no"}</td><td>${inlineMarkdown(String(p.description ?? ""))}${this.constraints(p.schema) ? `<div class="limits">${this.constraints(p.schema)}</div>` : ""}</td></tr>`,
				);
			}
			parts.push("</tbody></table>");
		}
		if (isObject(bodySchema)) {
			parts.push(`<h4>Request body: ${this.typeOf(bodySchema)}</h4>`);
			parts.push(this.schemaTable(this.resolve(bodySchema)));
		}
		if (isObject(op.callbacks)) parts.push(`<p>Webhooks of this ride go to its <code>webhookURL</code>: see <a href="#webhooks">Webhooks</a>.</p>`);
		parts.push("<h4>Responses</h4><table><thead><tr><th>Status</th><th>Body</th><th>Meaning</th><th>Headers</th></tr></thead><tbody>");
		for (const [status, response] of Object.entries(responses)) {
			const r = this.resolve(response);
			parts.push(
				`<tr><td><strong>${escapeHtml(status)}</strong></td><td>${this.responseBody(r)}</td><td>${inlineMarkdown(String(r.description ?? ""))}</td><td>${this.headersOf(r)}</td></tr>`,
			);
		}
		parts.push("</tbody></table></section>");
		return parts.join("\n");
	}

	render(): string {
		const doc = this.doc;
		const info = doc.info as Json;
		const nav: string[] = [];
		const body: string[] = [];

		body.push(`<section id="overview"><h2>Overview</h2>${blockMarkdown(String(info.description ?? ""))}</section>`);
		nav.push(`<li><a href="#overview">Overview</a></li>`);

		const tags = Array.isArray(doc.tags) ? (doc.tags as Json[]) : [];
		for (const tag of tags) {
			const tagName = String(tag.name);
			body.push(`<section id="${anchor("tag", tagName)}"><h2>${escapeHtml(tagName)}</h2>${blockMarkdown(String(tag.description ?? ""))}`);
			nav.push(`<li><a href="#${anchor("tag", tagName)}">${escapeHtml(tagName)}</a><ul>`);
			for (const [path, item] of Object.entries(doc.paths)) {
				for (const method of HTTP_METHODS) {
					const op = isObject(item) ? item[method] : undefined;
					if (!isObject(op) || !(Array.isArray(op.tags) && op.tags.includes(tagName))) continue;
					const id = anchor("op", `${method}${path}`);
					nav.push(`<li><a href="#${id}"><span class="method ${method}">${method.toUpperCase()}</span> ${escapeHtml(path)}</a></li>`);
					body.push(this.operation(method, path, op, id));
				}
			}
			nav.push("</ul></li>");
			body.push("</section>");
		}

		body.push(`<section id="webhooks"><h2>Webhooks</h2>`);
		nav.push(`<li><a href="#webhooks">Webhooks</a></li>`);
		for (const [name, item] of Object.entries(doc.webhooks)) {
			const resolved = this.resolve(item);
			for (const method of HTTP_METHODS) {
				const op = resolved[method];
				if (isObject(op)) body.push(this.operation(method, `{webhookURL}  (${name})`, { ...op, security: [] }, anchor("webhook", name)));
			}
		}
		body.push("</section>");

		const schemas = isObject(doc.components.schemas) ? doc.components.schemas : {};
		body.push(`<section id="schemas"><h2>Schemas</h2>`);
		nav.push(`<li><a href="#schemas">Schemas</a><ul>`);
		for (const [name, schema] of Object.entries(schemas)) {
			const s = isObject(schema) ? schema : {};
			nav.push(`<li><a href="#${anchor("schema", name)}">${escapeHtml(name)}</a></li>`);
			body.push(
				`<div class="schema" id="${anchor("schema", name)}"><h3>${escapeHtml(name)}</h3>${typeof s.description === "string" ? blockMarkdown(s.description) : ""}${this.schemaTable(s)}</div>`,
			);
		}
		nav.push("</ul></li>");
		body.push("</section>");

		const title = `${String(info.title ?? "API")} ${String(info.version ?? "")}`.trim();
		return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} — reference</title>
<style>
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d232a;background:#fff}
nav{position:fixed;top:0;bottom:0;left:0;width:270px;overflow:auto;padding:16px;background:#f4f6f8;border-right:1px solid #dde2e7;box-sizing:border-box;font-size:14px}
nav ul{list-style:none;padding-left:12px;margin:4px 0}nav>ul{padding-left:0}
nav a{color:#1d232a;text-decoration:none}nav a:hover{text-decoration:underline}
main{margin-left:270px;padding:24px 40px;max-width:1100px}
h1{margin-top:0}h2{border-bottom:2px solid #dde2e7;padding-bottom:4px;margin-top:40px}
.op{border:1px solid #dde2e7;border-radius:6px;padding:8px 20px 16px;margin:20px 0}
.method{display:inline-block;min-width:44px;text-align:center;border-radius:4px;padding:0 6px;color:#fff;font-size:12px;font-weight:700;background:#57606a}
.method.post{background:#1f7a3a}.method.get{background:#1f5fa8}
table{border-collapse:collapse;width:100%;margin:8px 0;font-size:14px}
th,td{border:1px solid #dde2e7;padding:5px 8px;text-align:left;vertical-align:top}th{background:#f4f6f8}
code{font:13px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f0f2f4;padding:0 3px;border-radius:3px}
.limits{color:#57606a;font-size:13px}.auth{color:#57606a}
.schema{margin:24px 0}
</style>
</head>
<body>
<nav><strong>${escapeHtml(title)}</strong><ul>${nav.join("\n")}</ul><p><a href="/openapi.json">openapi.json</a></p></nav>
<main>
<h1>${escapeHtml(title)}</h1>
${body.join("\n")}
</main>
</body>
</html>
`;
	}
}

export function renderDocsPage(doc: OpenApiDocument): string {
	return new Renderer(doc).render();
}
