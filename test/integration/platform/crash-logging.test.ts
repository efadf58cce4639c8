import { spawn } from "node:child_process";
import { resolve } from "node:path";

/**
 * A process that dies of an error nobody caught: with NODE_ENV=production it
 * writes one JSON line with the error's name and message, no stack, and exits
 * 1 (runtime/crash-logging.ts, installed by bin/server.ts); elsewhere Node's
 * own stack trace stays.
 */

const ROOT = resolve(__dirname, "../../..");
const STACK_FRAME = /\n\s+at |\bat [^\s]+ \([^)]*:\d+:\d+\)/;

function crash(how: "throw" | "reject", nodeEnv: string): Promise<{ code: number | null; stderr: string }> {
	const script = `
		const { installCrashLogging } = require("./runtime/crash-logging");
		installCrashLogging(process.env.NODE_ENV === "production");
		setTimeout(() => { ${how === "throw" ? 'throw new TypeError("boom at a place")' : 'Promise.reject(new RangeError("rejected somewhere"))'} }, 10);
		setTimeout(() => {}, 5000);
	`;
	return new Promise((done, fail) => {
		const child = spawn(process.execPath, ["--import", "tsx", "-e", script], {
			cwd: ROOT,
			env: { ...process.env, NODE_ENV: nodeEnv },
			stdio: ["ignore", "ignore", "pipe"],
		});
		let stderr = "";
		child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
		child.on("error", fail);
		child.on("exit", (code) => done({ code, stderr }));
	});
}

it.each([
	["throw", "uncaughtException", "TypeError", "boom at a place"],
	["reject", "unhandledRejection", "RangeError", "rejected somewhere"],
] as const)(
	"in production an uncaught %s is one JSON line without a stack, exit 1",
	async (how, kind, name, message) => {
		const r = await crash(how, "production");
		expect(r.code).toBe(1);
		expect(r.stderr).not.toMatch(STACK_FRAME);
		const lines = r.stderr.trim().split("\n");
		expect(lines).toHaveLength(1);
		expect(JSON.parse(lines[0])).toMatchObject({ level: "fatal", msg: `Process ended: ${kind}`, err: { name, message } });
	},
	30_000,
);

it("outside production Node's own stack trace stays", async () => {
	const r = await crash("throw", "development");
	expect(r.code).toBe(1);
	expect(r.stderr).toMatch(STACK_FRAME);
}, 30_000);
