import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { ALL_BUS_USERS } from "../../contracts/bus";
import { passwordVariable } from "../../lib/bus-permissions";
import { freePort } from "./http";
import { waitFor } from "./wait";

/** Debian's nats-server, for the tests that need a server of their own (users, permissions, TLS). */
export const NATS_SERVER = "/usr/sbin/nats-server";
export const hasNatsServer = existsSync(NATS_SERVER);

export interface OwnNatsServer {
	port: number;
	url: string;
	/** What the server printed so far. */
	output(): string;
	/** SIGTERM (or `signal`), resolved when it has exited (a no-op if it already has). */
	stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts nats-server on a free loopback port (or `port`: a restart on the port a killed one had) with the
 * configuration file `conf` (none: an open server, no users) and each bus user's password in its environment
 * (`passwords`, as `NATS_PASSWORD_<USER>`), and waits until it is ready.
 */
export async function startNatsServer(conf: string | undefined, passwords: Record<string, string> = {}, port?: number): Promise<OwnNatsServer> {
	port ??= await freePort();
	const env: Record<string, string> = { ...(process.env as Record<string, string>) };
	if (conf !== undefined) for (const user of ALL_BUS_USERS) env[passwordVariable(user)] = passwords[user];
	const args = [...(conf !== undefined ? ["-c", conf] : []), "-a", "127.0.0.1", "-p", String(port)];
	const child = spawn(NATS_SERVER, args, { env, stdio: ["ignore", "pipe", "pipe"] });
	let out = "";
	child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
	child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
	const stop = async (signal: NodeJS.Signals = "SIGTERM"): Promise<void> => {
		if (child.exitCode !== null || child.signalCode !== null) return;
		const exited = new Promise((r) => child.once("exit", r));
		child.kill(signal);
		await exited;
	};
	await waitFor("nats-server ready", () => out.includes("Server is ready") || child.exitCode !== null, 10_000).catch(async (err) => {
		await stop();
		throw err;
	});
	if (child.exitCode !== null) throw new Error(`nats-server did not start: ${out}`);
	return { port, url: `nats://127.0.0.1:${port}`, output: () => out, stop };
}
