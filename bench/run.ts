import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * `npm run bench [name…]`: runs every bench in this folder (or the named
 * ones) one after another, each in its own process so figures do not disturb
 * each other. Benches print figures and ratios; none of them passes or fails.
 */
const dir = __dirname;
const wanted = process.argv.slice(2);
const benches = readdirSync(dir)
	.filter((f) => f.endsWith(".ts") && f !== "run.ts")
	.filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)));

let failed = 0;
for (const file of benches) {
	console.log(`\n=== ${file}`);
	const res = spawnSync(process.execPath, ["--import", "tsx", join(dir, file)], { stdio: "inherit", env: process.env });
	if (res.status !== 0) failed += 1;
}
process.exit(failed === 0 ? 0 : 1);
