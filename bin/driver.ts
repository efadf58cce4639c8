import { randomBytes } from "node:crypto";
import { parseArgs as parseCliArgs, type ParseArgsOptionsConfig } from "node:util";
import { ServiceBroker } from "moleculer";
import { buildBrokerConfig } from "../moleculer.config";
import { startNode, type RunningNode } from "../runtime/node";

/**
 * Operators' driver management for the driver API (`/driver/*`):
 *
 *   npm run driver -- create --name "Ravi K" --phone +919800000001 --vehicle KA01AB1234 --service-type cab [--mode live|test]
 *   npm run driver -- revoke --driver drv_…
 *   npm run driver -- list
 *
 * `create` registers the driver (the same phone again is the same driver)
 * and prints `{ "driverId", "token", "tokenId" }`: the only time the token
 * is shown (only its SHA-256 is stored). A driver may hold several tokens;
 * `revoke` revokes all of them. `list` prints the tokens (never the token
 * itself). `--mode test` makes a driver that takes test-key rides (a driver
 * app's developer against the sandbox); live by default.
 *
 * Runs a broker with only the dispatch service, in this process and on no
 * transporter, against DATABASE_URL (or the embedded database in DATA_DIR;
 * stop `npm start` first then). After `revoke`, when TRANSPORTER is set, it
 * asks a dispatch instance on the bus to broadcast dispatch.driverTokensChanged,
 * so every instance refuses the token at once; otherwise within the 5 s cache.
 *
 * stdout carries exactly one JSON value; logs and errors go to stderr. Exit
 * codes: 0 done, 1 failed, 2 bad usage.
 */

const USAGE = `Usage:
  npm run driver -- create --name <name> --phone <+91…> --vehicle <number> --service-type <scooty|cab> [--mode <live|test>]
  npm run driver -- revoke --driver <driverId>
  npm run driver -- list`;

export class UsageError extends Error {}

const VERBS = ["create", "revoke", "list"] as const;
type Verb = (typeof VERBS)[number];
type OptionName = "name" | "phone" | "vehicle" | "service-type" | "mode" | "driver";

export interface Command {
	verb: Verb;
	options: Partial<Record<OptionName, string>>;
}

const str = { type: "string" } as const;
const OPTIONS: Record<Verb, ParseArgsOptionsConfig> = {
	create: { name: str, phone: str, vehicle: str, "service-type": str, mode: str },
	revoke: { driver: str },
	list: {},
};

const isVerb = (v: string | undefined): v is Verb => (VERBS as readonly string[]).includes(v ?? "");

export function parseArgs(argv: string[]): Command {
	const [verb, ...rest] = argv;
	if (!isVerb(verb)) throw new UsageError(verb ? `Unknown command "${verb}"` : "No command given");
	let options: Command["options"];
	try {
		options = parseCliArgs({ args: rest, options: OPTIONS[verb], strict: true, allowPositionals: false }).values as Command["options"];
	} catch (err) {
		throw new UsageError(`${(err as Error).message} (${verb})`);
	}
	const need = (name: OptionName) => {
		if (!options[name]?.trim()) throw new UsageError(`${verb} needs --${name} <${name}>`);
	};
	if (verb === "create") (need("name"), need("phone"), need("vehicle"), need("service-type"));
	if (verb === "revoke") need("driver");
	if (options.mode !== undefined && options.mode !== "live" && options.mode !== "test") throw new UsageError(`--mode must be live or test (got "${options.mode}")`);
	return { verb, options };
}

export function actionOf(c: Command): { action: string; params: Record<string, unknown> } {
	const o = c.options;
	switch (c.verb) {
		case "create":
			return { action: "dispatch.createDriverToken", params: { name: o.name, phone: o.phone, vehicleNumber: o.vehicle, serviceType: o["service-type"], ...(o.mode ? { mode: o.mode } : {}) } };
		case "revoke":
			return { action: "dispatch.revokeDriverTokens", params: { driverId: o.driver } };
		case "list":
			return { action: "dispatch.listDriverTokens", params: {} };
	}
}

const ANNOUNCE_WAIT_MS = 10_000;

async function announce(driverId: string): Promise<void> {
	if (!process.env.TRANSPORTER) {
		process.stderr.write("No TRANSPORTER: running instances refuse the token within their cache TTL (5 s)\n");
		return;
	}
	const env = { ...process.env, METRICS_PORT: "0", HEALTH_PORT: "", LOGLEVEL: process.env.DRIVER_CLI_LOGLEVEL || "warn" };
	const broker = new ServiceBroker({ ...buildBrokerConfig(env), nodeID: `driver-cli-${process.pid}-${randomBytes(3).toString("hex")}`, metrics: false });
	try {
		await broker.start();
		await broker.waitForServices(["dispatch"], ANNOUNCE_WAIT_MS);
		await broker.call("dispatch.announceDriverTokens", { driverId });
	} catch (err) {
		process.stderr.write(`Could not announce the revocation on the bus (${(err as Error)?.name ?? "error"}): running instances refuse the token within their cache TTL\n`);
	} finally {
		await broker.stop().catch(() => undefined);
	}
}

function fail(message: string, code: number): never {
	process.stderr.write(`${message}\n`);
	process.exit(code);
}

async function main(): Promise<void> {
	let command: Command;
	try {
		command = parseArgs(process.argv.slice(2));
	} catch (err) {
		if (err instanceof UsageError) fail(`${err.message}\n${USAGE}`, 2);
		throw err;
	}
	const toStderr = (...args: unknown[]) => console.error(...args);
	console.log = toStderr;
	console.info = toStderr;
	console.debug = toStderr;

	let node: RunningNode | undefined;
	try {
		node = await startNode({
			services: ["dispatch"],
			env: {
				...process.env,
				TRANSPORTER: "",
				METRICS_PORT: "0",
				HEALTH_PORT: "",
				// A short-lived operator process: it must not drive anybody's rides.
				FLEET_MODE: "live",
				LOGLEVEL: process.env.DRIVER_CLI_LOGLEVEL || "warn",
			},
		});
		const { action, params } = actionOf(command);
		const answer = await node.broker.call(action, params);
		await node.stop();
		node = undefined;
		if (command.verb === "revoke") await announce(String(command.options.driver));
		await new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(answer)}\n`, () => resolve()));
		process.exit(0);
	} catch (err) {
		await node?.stop().catch(() => undefined);
		const e = err as { message?: string; data?: { details?: Array<{ field: string; message: string }> } };
		const details = e?.data?.details?.map((d) => `  ${d.field}: ${d.message}`).join("\n");
		fail(`driver ${command.verb} failed: ${e?.message ?? String(err)}${details ? `\n${details}` : ""}`, 1);
	}
}

if (require.main === module) {
	void main();
}
