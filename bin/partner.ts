import { randomBytes } from "node:crypto";
import { parseArgs as parseCliArgs, type ParseArgsOptionsConfig } from "node:util";
import { ServiceBroker } from "moleculer";
import { buildBrokerConfig } from "../moleculer.config";
import { KEY_MODES, type PartnersChangedEvent } from "../contracts/partners";
import { startNode, type RunningNode } from "../runtime/node";

/**
 * Operators' partner management:
 *
 *   npm run partner -- create --name Acme [--mode test|live] [--api-key <key>] [--webhook-secret whsec_…]
 *   npm run partner -- list
 *   npm run partner -- list-keys [--partner ptn_…]
 *   npm run partner -- rotate-key --partner ptn_… --label <label> [--mode test|live] [--api-key <key>]
 *   npm run partner -- revoke-key --key key_…        (one key)
 *   npm run partner -- revoke-key --partner ptn_…    (the partner and every key of it)
 *   npm run partner -- rotate-webhook-secret --partner ptn_… [--grace 24h] [--webhook-secret whsec_…]
 *
 * Runs a broker with only the partners service, in this process and on no
 * transporter, against DATABASE_URL (or the embedded database in DATA_DIR
 * when it is unset; stop `npm start` first then, one process per data
 * directory — or use the REPL: `call partners.create --name Acme`).
 *
 * After a change, when TRANSPORTER is set, it joins the cluster for a moment
 * and asks a partners instance to broadcast partners.changed, so every
 * instance drops its caches at once; without it (or with no partners
 * instance up) running instances see the change within their cache TTL.
 *
 * --mode (create, rotate-key) is the key's mode, `test` by default: the key
 * comes out as `rk_test_…` or `rk_live_…`.
 *
 * stdout carries exactly one JSON value and nothing else: `create` prints
 * `{ "partnerId", "apiKey", "webhookSecret" }` (the only time the key is
 * shown), `rotate-key` the new key likewise, `list` and `list-keys` arrays.
 * Logs and errors go to stderr. Exit codes: 0 done, 1 failed, 2 bad usage.
 */

const USAGE = `Usage:
  npm run partner -- create --name <name> [--mode test|live] [--api-key <key>] [--webhook-secret <whsec_…>]
  npm run partner -- list
  npm run partner -- list-keys [--partner <partnerId>]
  npm run partner -- rotate-key --partner <partnerId> --label <label> [--mode test|live] [--api-key <key>]
  npm run partner -- revoke-key (--key <keyId> | --partner <partnerId>)
  npm run partner -- rotate-webhook-secret --partner <partnerId> [--grace <n>[s|m|h|d]] [--webhook-secret <whsec_…>]`;

class UsageError extends Error {}

const VERBS = ["create", "list", "list-keys", "rotate-key", "revoke-key", "rotate-webhook-secret"] as const;
type Verb = (typeof VERBS)[number];

type OptionName = "name" | "api-key" | "webhook-secret" | "partner" | "label" | "key" | "grace" | "mode";

interface Command {
	verb: Verb;
	options: Partial<Record<OptionName, string>>;
}

const str = { type: "string" } as const;

/** Every option takes a string value. */
const OPTIONS: Record<Verb, ParseArgsOptionsConfig> = {
	create: { name: str, "api-key": str, "webhook-secret": str, mode: str },
	list: {},
	"list-keys": { partner: str },
	"rotate-key": { partner: str, label: str, "api-key": str, mode: str },
	"revoke-key": { key: str, partner: str },
	"rotate-webhook-secret": { partner: str, grace: str, "webhook-secret": str },
};

const isVerb = (v: string | undefined): v is Verb => (VERBS as readonly string[]).includes(v ?? "");

/** `90`, `90s`, `30m`, `24h`, `7d` → seconds. */
export function parseGrace(value: string): number {
	const m = /^(\d{1,7})([smhd]?)$/.exec(value.trim());
	if (!m) throw new UsageError(`--grace must be a whole number of seconds, or with s, m, h or d (got "${value}")`);
	return Number(m[1]) * { "": 1, s: 1, m: 60, h: 3_600, d: 86_400 }[m[2] as "" | "s" | "m" | "h" | "d"];
}

export function parseArgs(argv: string[]): Command {
	const [verb, ...rest] = argv;
	if (!isVerb(verb)) throw new UsageError(verb ? `Unknown command "${verb}"` : "No command given");
	let options: Command["options"];
	try {
		// strict: an unknown option, a missing value or a stray positional is a usage error.
		options = parseCliArgs({ args: rest, options: OPTIONS[verb], strict: true, allowPositionals: false }).values as Command["options"];
	} catch (err) {
		throw new UsageError(`${(err as Error).message} (${verb})`);
	}
	const need = (name: OptionName) => {
		if (!options[name]?.trim()) throw new UsageError(`${verb} needs --${name} <${name}>`);
	};
	if (verb === "create") need("name");
	if (verb === "rotate-key") (need("partner"), need("label"));
	if (verb === "rotate-webhook-secret") need("partner");
	if (verb === "revoke-key" && !options.key === !options.partner) throw new UsageError("revoke-key needs exactly one of --key <keyId> or --partner <partnerId>");
	if (options.grace !== undefined) parseGrace(options.grace);
	if (options.mode !== undefined && !(KEY_MODES as readonly string[]).includes(options.mode)) {
		throw new UsageError(`--mode must be ${KEY_MODES.join(" or ")} (got "${options.mode}")`);
	}
	return { verb, options };
}

/** The action a command calls, its params, and what to announce after it. */
function actionOf(c: Command): { action: string; params: Record<string, unknown> } {
	const o = c.options;
	const defined = (p: Record<string, unknown>) => Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined && v !== ""));
	switch (c.verb) {
		case "create":
			return { action: "partners.create", params: defined({ name: o.name, apiKey: o["api-key"], webhookSecret: o["webhook-secret"], mode: o.mode }) };
		case "list":
			return { action: "partners.list", params: {} };
		case "list-keys":
			return { action: "partners.listKeys", params: defined({ partnerId: o.partner }) };
		case "rotate-key":
			return { action: "partners.createKey", params: defined({ partnerId: o.partner, label: o.label, apiKey: o["api-key"], mode: o.mode }) };
		case "revoke-key":
			return { action: "partners.revokeKey", params: defined({ keyId: o.key, partnerId: o.partner }) };
		case "rotate-webhook-secret":
			return {
				action: "partners.rotateWebhookSecret",
				params: defined({ partnerId: o.partner, graceSeconds: o.grace === undefined ? undefined : parseGrace(o.grace), webhookSecret: o["webhook-secret"] }),
			};
	}
}

function changeOf(c: Command, answer: unknown): PartnersChangedEvent | undefined {
	const partnerId = (answer as { partnerId?: string } | null)?.partnerId;
	if (!partnerId) return undefined;
	if (c.verb === "rotate-key" || c.verb === "create") return { partnerId, what: "keys" };
	if (c.verb === "revoke-key") return { partnerId, what: (answer as { partnerRevoked?: boolean }).partnerRevoked ? "partner" : "keys" };
	if (c.verb === "rotate-webhook-secret") return { partnerId, what: "webhookSecret" };
	return undefined;
}

/** How long to look for a partners instance on the bus before leaving it to the caches' TTL. */
const ANNOUNCE_WAIT_MS = 10_000;

/** Asks a partners instance of the cluster to broadcast partners.changed. */
async function announce(change: PartnersChangedEvent): Promise<void> {
	if (!process.env.TRANSPORTER) {
		process.stderr.write("No TRANSPORTER: running instances see the change within their cache TTL (30 s for keys, 60 s for webhook secrets)\n");
		return;
	}
	const env = { ...process.env, METRICS_PORT: "0", HEALTH_PORT: "", LOGLEVEL: process.env.PARTNER_CLI_LOGLEVEL || "warn" };
	const broker = new ServiceBroker({ ...buildBrokerConfig(env), nodeID: `partner-cli-${process.pid}-${randomBytes(3).toString("hex")}`, metrics: false });
	try {
		await broker.start();
		await broker.waitForServices(["partners"], ANNOUNCE_WAIT_MS);
		await broker.call("partners.announce", change);
	} catch (err) {
		process.stderr.write(`Could not announce the change on the bus (${(err as Error)?.name ?? "error"}): running instances see it within their cache TTL\n`);
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
		const { action, params } = actionOf(command);
		const answer = await node.broker.call(action, params);
		await node.stop();
		node = undefined;
		const change = changeOf(command, answer);
		if (change) await announce(change);
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
