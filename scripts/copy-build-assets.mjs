// Part of `npm run build`: tsc compiles the TypeScript to dist/; this copies
// the other files the code reads or runs at run time (JSON, YAML, HTML, SQL, plain .cjs beside a
// service, e.g. an OpenAPI document or the /docs page) to the same place in
// dist/, so `node dist/bin/server.js` finds them exactly as tsx does.
import { cpSync, existsSync, readdirSync, statSync } from "node:fs";
import { dirname, extname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const SOURCE_DIRS = ["services", "contracts", "lib", "mixins", "middlewares", "runtime", "bin", "docs"];
const ASSET_EXT = new Set([".json", ".yaml", ".yml", ".html", ".css", ".sql", ".cjs"]);

let copied = 0;
function walk(dir) {
	for (const entry of readdirSync(dir)) {
		const path = join(dir, entry);
		if (statSync(path).isDirectory()) walk(path);
		else if (ASSET_EXT.has(extname(entry))) {
			cpSync(path, join(dist, relative(root, path)));
			copied += 1;
		}
	}
}
for (const d of SOURCE_DIRS) if (existsSync(join(root, d))) walk(join(root, d));
console.log(`copied ${copied} asset file(s) to dist/`);
