import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";

/**
 * The SDK's generated types must be what the committed docs/openapi.json
 * makes (regenerate: npm run openapi). openapi-typescript is an ES module,
 * so the generator runs in a child process, as `npm run openapi` runs it.
 */

const ROOT = resolve(__dirname, "../../..");

const PROBE = `
const { readFileSync } = require("node:fs");
const { sdkTypesText, SDK_TYPES_PATH } = require("./scripts/generate-sdk-types.ts");
(async () => {
	const doc = readFileSync("docs/openapi.json", "utf8");
	const committed = readFileSync(SDK_TYPES_PATH, "utf8");
	const changed = JSON.parse(doc);
	changed.components.schemas.Order.properties.driftProbe = { type: "string" };
	const fromChanged = await sdkTypesText(JSON.stringify(changed));
	const current = (await sdkTypesText(doc)) === committed;
	process.stdout.write(JSON.stringify({ current, changedDiffers: fromChanged !== committed, changedNames: fromChanged.includes("driftProbe?: string") }));
})().catch((err) => { console.error(err); process.exit(1); });
`;

it("packages/sdk/src/generated/openapi.ts is what docs/openapi.json makes, and a changed document makes other types", async () => {
	const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "-e", PROBE], { cwd: ROOT, timeout: 60_000 });
	const result = JSON.parse(stdout) as { current: boolean; changedDiffers: boolean; changedNames: boolean };
	expect({ ...result, fix: result.current ? "" : "run npm run openapi" }).toEqual({ current: true, changedDiffers: true, changedNames: true, fix: "" });
});
