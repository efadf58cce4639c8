import { parseArgs as parseCliArgs, type ParseArgsOptionsConfig } from "node:util";
import { startNode, type RunningNode } from "../runtime/node";

/**
 * Operators' partner management:
 *
 *   npm run partner -- create --name Acme [--api-key <key>] [--webhook-secret whsec_…]
 *   npm run partner -- list
 *
 * Runs a broker with only the partners service, in this process and on no
 * transporter, against DATABASE_URL (or the embedded database in DATA_DIR
 * when it is unset; stop `npm start` first then, one process per data
 * directory — or use the REPL: `call partners.create --name Acme`).
 *
 * stdout carries exactly one JSON value and nothing else: `create` prints
 * `{ "partnerId", "apiKey", "webhookSecret" }` (the only time the key is
 * shown), `list` an array of partners. Logs and errors go to stderr.
 * Exit codes: 0 done, 1 failed, 2 bad usage.
 */

const USAGE = `Usage:
  npm run partner -- create --name <name> [--api-key <key>] [--webhook-secret <whsec_…>]
  npm run partner -- list`;

class UsageError extends Error {}

interface Command {
	verb: "create" | "list";
	options: { name?: string; "api-key"?: string; "webhook-secret"?: string };
}

/** Every option takes a string value. */
const OPTIONS: Record<Command["verb"], ParseArgsOptionsConfig> = {
	create: { name: { type: "string" }, "api-key": { type: "string" }, "webhook-secret": { type: "string" } },
	list: {},
};

export function parseArgs(argv: string[]): Command {
	const [verb, ...rest] = argv;
	if (verb !== "create" && verb !== "list") throw new UsageError(verb ? `Unknown command "${verb}"` : "No command given");
	let options: Command["options"];
	try {
		// strict: an unknown option, a missing value or a stray positional is a usage error.
		options = parseCliArgs({ args: rest, options: OPTIONS[verb], strict: true, allowPositionals: false }).values as Command["options"];
	} catch (err) {
		throw new UsageError(`${(err as Error).message} (${verb})`);
	}
	if (verb === "create" && !options.name?.trim()) throw new UsageError("create needs --name <name>");
	return { verb, options };
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

	// stdout is for the answer only: anything that would print there goes to stderr.
	const toStderr = (...args: unknown[]) => console.error(...args);
	console.log = toStderr;
	console.info = toStderr;
	console.debug = toStderr;

	let node: RunningNode | undefined;
	try {
		node = await startNode({
			services: ["partners"],
			env: {
				...process.env,
				// A private, quiet, local broker: no NATS, no metrics, no health port.
				TRANSPORTER: "",
				METRICS_PORT: "0",
				HEALTH_PORT: "",
				LOGLEVEL: process.env.PARTNER_CLI_LOGLEVEL || "warn",
			},
		});
		let answer: unknown;
		if (command.verb === "create") {
			const params: Record<string, string> = { name: command.options.name ?? "" };
			if (command.options["api-key"]) params.apiKey = command.options["api-key"];
			if (command.options["webhook-secret"]) params.webhookSecret = command.options["webhook-secret"];
			const created = await node.broker.call<{ partnerId: string; apiKey: string; webhookSecret: string }, Record<string, string>>("partners.create", params);
			answer = { partnerId: created.partnerId, apiKey: created.apiKey, webhookSecret: created.webhookSecret };
		} else {
			answer = await node.broker.call("partners.list");
		}
		await node.stop();
		node = undefined;
		await new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(answer)}\n`, () => resolve()));
		process.exit(0);
	} catch (err) {
		await node?.stop().catch(() => undefined);
		const e = err as { message?: string; data?: { details?: Array<{ field: string; message: string }> } };
		const details = e?.data?.details?.map((d) => `  ${d.field}: ${d.message}`).join("\n");
		fail(`partner ${command.verb} failed: ${e?.message ?? String(err)}${details ? `\n${details}` : ""}`, 1);
	}
}

if (require.main === module) {
	void main();
}
