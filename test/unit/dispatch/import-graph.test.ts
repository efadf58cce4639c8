import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

/**
 * Dispatch's parts depend one way: the import graph of services/dispatch,
 * type-only imports included, has no cycle, and nothing in it imports
 * another service's files.
 */

const DIR = join(__dirname, "../../../services/dispatch");

function sources(dir: string, prefix = ""): string[] {
	return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((e) =>
		e.isDirectory() ? sources(dir, join(prefix, e.name)) : e.name.endsWith(".ts") ? [join(prefix, e.name)] : [],
	);
}

/** Every module specifier of `import … from "x"` and `export … from "x"`, type-only included. */
function specifiers(text: string): string[] {
	return [...text.matchAll(/(?:import|export)\s[^;]*?from\s+"([^"]+)"/g)].map((m) => m[1]);
}

function graph(): Map<string, string[]> {
	const files = sources(DIR);
	const known = new Set(files);
	const edges = new Map<string, string[]>();
	for (const file of files) {
		const local = specifiers(readFileSync(join(DIR, file), "utf8"))
			.filter((s) => s.startsWith("./") || (s.startsWith("../") && !s.startsWith("../../")))
			.map((s) => join(file, "..", s))
			.map((p) => (known.has(`${p}.ts`) ? `${p}.ts` : join(p, "index.ts")));
		edges.set(file, local);
	}
	return edges;
}

function findCycle(edges: Map<string, string[]>): string[] | null {
	const state = new Map<string, "open" | "done">();
	const path: string[] = [];
	const visit = (node: string): string[] | null => {
		if (state.get(node) === "done") return null;
		if (state.get(node) === "open") return [...path.slice(path.indexOf(node)), node];
		state.set(node, "open");
		path.push(node);
		for (const next of edges.get(node) ?? []) {
			const cycle = visit(next);
			if (cycle) return cycle;
		}
		path.pop();
		state.set(node, "done");
		return null;
	};
	for (const node of edges.keys()) {
		const cycle = visit(node);
		if (cycle) return cycle;
	}
	return null;
}

describe("dispatch's import graph", () => {
	it("has no cycle, type-only imports included", () => {
		expect(findCycle(graph())).toBeNull();
	});

	it("finds a cycle when there is one (the check itself)", () => {
		const edges = new Map([
			["a.ts", ["b.ts"]],
			["b.ts", ["c.ts"]],
			["c.ts", ["a.ts"]],
		]);
		expect(findCycle(edges)).toEqual(["a.ts", "b.ts", "c.ts", "a.ts"]);
		expect(specifiers('import type { X } from "./x";\nexport { Y } from "./y";')).toEqual(["./x", "./y"]);
	});

	it("imports no other service's files", () => {
		const services = join(DIR, "..");
		for (const file of sources(DIR)) {
			const foreign = specifiers(readFileSync(join(DIR, file), "utf8"))
				.filter((s) => s.startsWith("."))
				.map((s) => resolve(DIR, file, "..", s))
				.filter((p) => p.startsWith(services) && !p.startsWith(DIR));
			expect({ file, foreign }).toEqual({ file, foreign: [] });
		}
	});
});
