import { randomBytes } from "node:crypto";
import { userInfo } from "node:os";
import { parseArgs as parseCliArgs, type ParseArgsOptionsConfig } from "node:util";
import { ServiceBroker } from "moleculer";
import { buildBrokerConfig, busNodeIdFor } from "../moleculer.config";
import { startNode, type RunningNode } from "../runtime/node";
import type { ServiceName } from "../services";
import { OPERATOR_META, OPERATOR_PATTERN } from "../contracts/audit";

/**
 * What `npm run partner` and `npm run driver` share: an operator command runs
 * its action on a private, quiet, local broker against the database, prints
 * the answer as one JSON line on stdout, and, when the change must reach
 * running instances at once (a revoked key or token), asks one of them over
 * the bus to broadcast it. Without TRANSPORTER the caches' TTL is the bound.
 */

/** A command line that does not make sense: exit code 2 with the usage. */
export class UsageError extends Error {}

export interface OperatorCommand {
	verb: string;
}

/** A verb and its `--name value` options (every option takes a string). */
export interface VerbCommand<V extends string, O extends string> extends OperatorCommand {
	verb: V;
	options: Partial<Record<O, string>>;
}

/**
 * `<verb> --option value …`, strictly: an unknown verb or option, a missing
 * value, a stray positional or a missing required option is a UsageError.
 */
export function parseVerb<V extends string, O extends string>(
	argv: string[],
	options: Record<V, ParseArgsOptionsConfig>,
	required: Partial<Record<V, readonly O[]>> = {},
): VerbCommand<V, O> {
	const [verb, ...rest] = argv;
	if (!verb || !Object.hasOwn(options, verb)) throw new UsageError(verb ? `Unknown command "${verb}"` : "No command given");
	const v = verb as V;
	let values: Partial<Record<O, string>>;
	try {
		values = parseCliArgs({ args: rest, options: options[v], strict: true, allowPositionals: false }).values as Partial<Record<O, string>>;
	} catch (err) {
		throw new UsageError(`${(err as Error).message} (${v})`);
	}
	for (const name of required[v] ?? []) {
		if (!values[name]?.trim()) throw new UsageError(`${v} needs --${name} <${name}>`);
	}
	return { verb: v, options: values };
}

/** The login name of this process's user, or "" when the system has none for it. */
function loginName(): string {
	try {
		return userInfo().username;
	} catch {
		return "";
	}
}

/**
 * Who runs the command, for the audit trail (contracts/audit.ts): `--operator
 * <name>` (any position), else `OPERATOR`, else `USER` (or the login name). Taken out of argv
 * before the verb is parsed; none at all, or a malformed one, is a UsageError.
 */
export function operatorOf(argv: string[], env: Record<string, string | undefined>): { operator: string; argv: string[] } {
	const rest: string[] = [];
	let given: string | undefined;
	for (let i = 0; i < argv.length; i++) {
		const arg = argv[i];
		if (arg === "--operator") {
			given = argv[++i];
			if (given === undefined) throw new UsageError("--operator needs a value");
		} else if (arg.startsWith("--operator=")) {
			given = arg.slice("--operator=".length);
		} else {
			rest.push(arg);
		}
	}
	const operator = (given ?? (env.OPERATOR?.trim() || env.USER?.trim() || env.LOGNAME?.trim() || loginName())).trim();
	if (!operator) throw new UsageError("Who runs this? Give --operator <name> or set OPERATOR (recorded in the audit trail)");
	if (!OPERATOR_PATTERN.test(operator)) throw new UsageError("--operator must be 1..100 printable characters");
	return { operator, argv: rest };
}

/** A broadcast to ask for after the change: `action` on a running instance of the service. */
export interface Announcement {
	action: string;
	params: unknown;
}

export interface OperatorCli<C extends OperatorCommand> {
	/** `partner` or `driver`: messages, node ids and the `<NAME>_CLI_LOGLEVEL` setting. */
	name: string;
	/** The one service the private broker runs. */
	service: ServiceName;
	usage: string;
	parse(argv: string[]): C;
	actionOf(c: C): { action: string; params: unknown };
	/** The broadcast the change needs, if any. */
	announcementOf(c: C, answer: unknown): Announcement | undefined;
	/** Said on stderr when there is no bus to announce on, or it did not answer: how soon running instances see the change anyway. */
	ttlNote: string;
	/** Settings of the private broker beyond the quiet defaults. */
	env?: Record<string, string>;
}

/** How long to look for an instance on the bus before leaving the change to the caches' TTL. */
const ANNOUNCE_WAIT_MS = 10_000;

function fail(message: string, code: number): never {
	process.stderr.write(`${message}\n`);
	process.exit(code);
}

function logLevel(name: string): string {
	return process.env[`${name.toUpperCase()}_CLI_LOGLEVEL`] || "warn";
}

async function announce(cli: OperatorCli<OperatorCommand>, announcement: Announcement, operator: string): Promise<void> {
	if (!process.env.TRANSPORTER) {
		process.stderr.write(`No TRANSPORTER: ${cli.ttlNote}\n`);
		return;
	}
	const env = { ...process.env, METRICS_PORT: "0", HEALTH_PORT: "", LOGLEVEL: logLevel(cli.name) };
	const broker = new ServiceBroker({
		...buildBrokerConfig(env),
		nodeID: busNodeIdFor(env, `${cli.name}-cli-${process.pid}-${randomBytes(3).toString("hex")}`),
		metrics: false,
	});
	try {
		await broker.start();
		await broker.waitForServices([cli.service], ANNOUNCE_WAIT_MS);
		await broker.call(announcement.action, announcement.params, { meta: { [OPERATOR_META]: operator } });
	} catch (err) {
		process.stderr.write(`Could not announce the change on the bus (${(err as Error)?.name ?? "error"}): ${cli.ttlNote}\n`);
	} finally {
		await broker.stop().catch(() => undefined);
	}
}

export async function runOperatorCli<C extends OperatorCommand>(cli: OperatorCli<C>): Promise<void> {
	let command: C;
	let operator: string;
	try {
		const who = operatorOf(process.argv.slice(2), process.env);
		operator = who.operator;
		command = cli.parse(who.argv);
	} catch (err) {
		if (err instanceof UsageError) fail(`${err.message}\n${cli.usage}`, 2);
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
			services: [cli.service],
			// A private, quiet, local broker: no NATS, no metrics, no health port.
			env: { ...process.env, TRANSPORTER: "", METRICS_PORT: "0", HEALTH_PORT: "", LOGLEVEL: logLevel(cli.name), ...cli.env },
		});
		const { action, params } = cli.actionOf(command);
		const answer = await node.broker.call(action, params, { meta: { [OPERATOR_META]: operator } });
		await node.stop();
		node = undefined;
		const announcement = cli.announcementOf(command, answer);
		if (announcement) await announce(cli as unknown as OperatorCli<OperatorCommand>, announcement, operator);
		await new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(answer)}\n`, () => resolve()));
		process.exit(0);
	} catch (err) {
		await node?.stop().catch(() => undefined);
		type Detail = { field: string; message: string };
		const e = err as { message?: string; data?: { details?: Detail[] } | Detail[] };
		// Our envelope's details, or a Moleculer validation error's list (its `actual` values, a key maybe, are never printed).
		const list = Array.isArray(e?.data) ? e.data : e?.data?.details;
		const details = list?.map((d) => `  ${d.field}: ${d.message}`).join("\n");
		fail(`${cli.name} ${command.verb} failed: ${e?.message ?? String(err)}${details ? `\n${details}` : ""}`, 1);
	}
}
