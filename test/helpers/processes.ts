import { spawn, type ChildProcess } from "node:child_process";
import { resolve } from "node:path";

const ROOT = resolve(__dirname, "../..");

export interface ServiceProcess {
	name: string;
	child: ChildProcess;
	/** Everything the process printed so far (stdout + stderr). */
	output(): string;
	/** Resolves when the output contains `text` (bounded by `timeoutMs`). */
	waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
	/** Sends a signal and waits for the exit. */
	kill(signal?: NodeJS.Signals): Promise<number | null>;
	exited: Promise<number | null>;
}

/**
 * Starts `bin/server.ts` as a separate OS process on Node 24 (the
 * process.execPath jest runs under) with the given environment, the way a
 * container would run it. Resolves once the broker reports it started.
 */
export async function startServiceProcess(
	name: string,
	env: Record<string, string>,
	readyTimeoutMs = 60_000,
	/** Node arguments; e.g. ["dist/bin/server.js"] runs the compiled build (`npm run start:prod`). */
	args: string[] = ["--import", "tsx", "bin/server.ts"],
): Promise<ServiceProcess> {
	const child = spawn(process.execPath, args, {
		cwd: ROOT,
		env: { ...process.env, METRICS_PORT: "0", LOGLEVEL: "info", ...env },
		stdio: ["ignore", "pipe", "pipe"],
	});
	let out = "";
	const waiters: Array<{ test: (s: string) => boolean; done: () => void }> = [];
	const onData = (chunk: Buffer) => {
		out += chunk.toString();
		if (out.length > 2_000_000) out = out.slice(-1_000_000);
		for (const w of [...waiters]) {
			if (w.test(out)) {
				waiters.splice(waiters.indexOf(w), 1);
				w.done();
			}
		}
	};
	child.stdout!.on("data", onData);
	child.stderr!.on("data", onData);
	const exited = new Promise<number | null>((res) => child.on("exit", (code) => res(code)));

	const proc: ServiceProcess = {
		name,
		child,
		exited,
		output: () => out,
		waitFor(text, timeoutMs = 30_000) {
			const test = (s: string) => (typeof text === "string" ? s.includes(text) : text.test(s));
			if (test(out)) return Promise.resolve();
			return new Promise<void>((res, rej) => {
				const timer = setTimeout(() => {
					waiters.splice(waiters.indexOf(w), 1);
					rej(new Error(`${name}: "${String(text)}" not seen within ${timeoutMs} ms. Output tail:\n${out.slice(-3000)}`));
				}, timeoutMs);
				const w = { test, done: () => { clearTimeout(timer); res(); } };
				waiters.push(w);
				void exited.then(() => {
					if (waiters.includes(w)) {
						waiters.splice(waiters.indexOf(w), 1);
						clearTimeout(timer);
						rej(new Error(`${name} exited before "${String(text)}". Output tail:\n${out.slice(-3000)}`));
					}
				});
			});
		},
		async kill(signal = "SIGTERM") {
			if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
			child.kill(signal);
			return exited;
		},
	};
	try {
		await proc.waitFor("started successfully", readyTimeoutMs);
	} catch (err) {
		// Never leave a half-started process behind (jest would not exit).
		child.kill("SIGKILL");
		throw err;
	}
	return proc;
}
