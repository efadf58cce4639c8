import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

/**
 * @ride/sdk as a partner installs it: built with its own tsconfig into a
 * node_modules of a scratch folder, then loaded by CommonJS and by ESM
 * consumers through its package.json exports. Also: the README shows the
 * examples exactly as they are (they are type-checked by the root tsc, and
 * the quickstart is run against the platform in test/integration/sdk).
 */

const ROOT = resolve(__dirname, "../../..");
const SDK = join(ROOT, "packages/sdk");
const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(SDK, "package.json"), "utf8"));
let scratch: string;

beforeAll(() => {
	scratch = mkdtempSync(join(tmpdir(), "ride-sdk-package-"));
});

afterAll(() => {
	rmSync(scratch, { recursive: true, force: true });
});

it("the README includes every example verbatim", () => {
	const readme = readFileSync(join(SDK, "README.md"), "utf8");
	for (const example of ["quickstart.mts", "webhook-receiver.mts"]) {
		const text = readFileSync(join(SDK, "examples", example), "utf8");
		expect(readme).toContain(`<!-- examples/${example} -->\n\`\`\`ts\n${text}\`\`\``);
	}
});

it("pins its runtime dependency and the generator exactly", () => {
	expect(pkg.name).toBe("@ride/sdk");
	expect(pkg.dependencies["openapi-fetch"]).toMatch(/^\d+\.\d+\.\d+$/);
	const root = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
	expect(root.workspaces).toContain("packages/*");
	expect(root.devDependencies["openapi-typescript"]).toMatch(/^\d+\.\d+\.\d+$/);
});

it("builds with declarations, and loads from CommonJS and ESM through its exports", async () => {
	const installed = join(scratch, "node_modules/@ride/sdk");
	mkdirSync(installed, { recursive: true });
	await run(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", join(SDK, "tsconfig.build.json"), "--outDir", join(installed, "dist")], {
		cwd: ROOT,
		timeout: 120_000,
	});
	cpSync(join(SDK, "package.json"), join(installed, "package.json"));
	symlinkSync(join(ROOT, "node_modules/openapi-fetch"), join(scratch, "node_modules/openapi-fetch"));
	const exported = pkg.exports["."];
	for (const file of [exported.types, exported.default, "./dist/generated/openapi.d.ts"]) expect(existsSync(join(installed, file))).toBe(true);
	expect(readFileSync(join(installed, exported.types), "utf8")).not.toMatch(/\.\.\/src/);

	// One ESM process loads it both ways: `import` (named exports included) and `require`.
	const consumer = `import { createRequire } from "node:module";
		import * as esm from "@ride/sdk";
		import { RideClient, webhooks, RideApiError, WebhookVerificationError } from "@ride/sdk";
		const cjs = createRequire(import.meta.url)("@ride/sdk");
		const probe = (sdk) => {
			const client = new sdk.RideClient({ apiKey: "k", baseUrl: "http://127.0.0.1:9" });
			const err = new sdk.RideApiError({ status: 429, headers: new Headers(), body: { code: "RATE_LIMITED", message: "m", retryable: true } });
			return [typeof client.createOrder, typeof client.events, typeof sdk.webhooks.verify, err.code];
		};
		console.log(JSON.stringify({ esm: probe(esm), cjs: probe(cjs), named: [RideClient, webhooks, RideApiError, WebhookVerificationError].every(Boolean) }));`;
	writeFileSync(join(scratch, "consumer.mjs"), consumer);
	const { stdout } = await run(process.execPath, ["consumer.mjs"], { cwd: scratch, timeout: 30_000 });
	const loaded = ["function", "function", "function", "RATE_LIMITED"];
	expect(JSON.parse(stdout)).toEqual({ esm: loaded, cjs: loaded, named: true });
});
