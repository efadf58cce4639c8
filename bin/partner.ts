import type { ParseArgsOptionsConfig } from "node:util";
import { KEY_MODES, type PartnersChangedEvent } from "../contracts/partners";
import { parseVerb, runOperatorCli, UsageError, type VerbCommand } from "./operator-cli";

/**
 * Operators' partner management:
 *
 *   npm run partner -- create --name Acme [--mode test|live] [--api-key <key>] [--webhook-secret whsec_…]
 *   npm run partner -- list
 *   npm run partner -- list-keys [--partner ptn_…]
 *   npm run partner -- rotate-key --partner ptn_… --label <label> [--mode test|live] [--api-key <key>]
 *   npm run partner -- revoke-key --key key_…        (one key)
 *   npm run partner -- revoke-key --partner ptn_…    (the partner and every key of it)
 *   npm run partner -- rotate-webhook-secret --partner ptn_… --mode test|live [--grace 24h] [--webhook-secret whsec_…]
 *   npm run partner -- audit [--partner ptn_…] [--limit 100] [--before <id>]
 *   npm run partner -- set-version --partner ptn_… --version 2026-12-01
 *
 * Every command takes `--operator <name>` (else OPERATOR, else USER): who
 * runs it, recorded with every change in the audit trail (`partners_audit`;
 * `audit` lists it, newest first, never a key or secret value).
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
 * comes out as `ride_test_…` or `ride_live_…`. A given --api-key is held to
 * the same rules on both verbs: 32 to 200 of A-Za-z0-9_-, not the other
 * mode's prefix nor `rk_` (Stripe's), unused. Every (partner, mode) has its
 * own webhook signing secret: `create` prints both (`webhookSecrets`), and
 * rotate-webhook-secret needs --mode (whose secret; rotating `test` also ends
 * the test use of a secret from before modes, docs/OPERATIONS.md).
 *
 * stdout carries exactly one JSON value and nothing else: `create` prints
 * `{ "partnerId", "apiKey", "webhookSecret", "webhookSecrets" }` (the only time the key is
 * shown), `rotate-key` the new key likewise, `list` and `list-keys` arrays.
 * `set-version` pins the partner to another API version (docs/API.md,
 * "Versions"; an unknown one exits 1 naming the known ones) and prints
 * `{ "partnerId", "apiVersion", "previousApiVersion" }`.
 * Logs and errors go to stderr. Exit codes: 0 done, 1 failed, 2 bad usage.
 */

const USAGE = `Usage:
  npm run partner -- create --name <name> [--mode test|live] [--api-key <key>] [--webhook-secret <whsec_…>]
  npm run partner -- list
  npm run partner -- list-keys [--partner <partnerId>]
  npm run partner -- rotate-key --partner <partnerId> --label <label> [--mode test|live] [--api-key <key>]
  npm run partner -- revoke-key (--key <keyId> | --partner <partnerId>)
  npm run partner -- rotate-webhook-secret --partner <partnerId> --mode test|live [--grace <n>[s|m|h|d]] [--webhook-secret <whsec_…>]
  npm run partner -- audit [--partner <partnerId>] [--limit <n>] [--before <id>]
  npm run partner -- set-version --partner <partnerId> --version <YYYY-MM-DD>
Every command: [--operator <name>] (default: OPERATOR, else USER), recorded in the audit trail.`;

type Verb = "create" | "list" | "list-keys" | "rotate-key" | "revoke-key" | "rotate-webhook-secret" | "audit" | "set-version";
type OptionName = "name" | "api-key" | "webhook-secret" | "partner" | "label" | "key" | "grace" | "mode" | "limit" | "before" | "version";

type Command = VerbCommand<Verb, OptionName>;

const str = { type: "string" } as const;

/** Every option takes a string value. */
const OPTIONS: Record<Verb, ParseArgsOptionsConfig> = {
	create: { name: str, "api-key": str, "webhook-secret": str, mode: str },
	list: {},
	"list-keys": { partner: str },
	"rotate-key": { partner: str, label: str, "api-key": str, mode: str },
	"revoke-key": { key: str, partner: str },
	"rotate-webhook-secret": { partner: str, mode: str, grace: str, "webhook-secret": str },
	audit: { partner: str, limit: str, before: str },
	"set-version": { partner: str, version: str },
};
const REQUIRED: Partial<Record<Verb, readonly OptionName[]>> = {
	create: ["name"],
	"rotate-key": ["partner", "label"],
	"rotate-webhook-secret": ["partner", "mode"],
	"set-version": ["partner", "version"],
};

/** `90`, `90s`, `30m`, `24h`, `7d` → seconds. */
export function parseGrace(value: string): number {
	const m = /^(\d{1,7})([smhd]?)$/.exec(value.trim());
	if (!m) throw new UsageError(`--grace must be a whole number of seconds, or with s, m, h or d (got "${value}")`);
	return Number(m[1]) * { "": 1, s: 1, m: 60, h: 3_600, d: 86_400 }[m[2] as "" | "s" | "m" | "h" | "d"];
}

export function parseArgs(argv: string[]): Command {
	const command = parseVerb<Verb, OptionName>(argv, OPTIONS, REQUIRED);
	const { options } = command;
	if (command.verb === "revoke-key" && !options.key === !options.partner)
		throw new UsageError("revoke-key needs exactly one of --key <keyId> or --partner <partnerId>");
	if (options.grace !== undefined) parseGrace(options.grace);
	if (options.mode !== undefined && !(KEY_MODES as readonly string[]).includes(options.mode)) {
		throw new UsageError(`--mode must be ${KEY_MODES.join(" or ")} (got "${options.mode}")`);
	}
	return command;
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
		case "set-version":
			return { action: "partners.setApiVersion", params: { partnerId: o.partner, apiVersion: o.version } };
		case "audit":
			return { action: "partners.audit", params: defined({ partnerId: o.partner, limit: o.limit, before: o.before }) };
		case "rotate-webhook-secret":
			return {
				action: "partners.rotateWebhookSecret",
				params: defined({
					partnerId: o.partner,
					mode: o.mode,
					graceSeconds: o.grace === undefined ? undefined : parseGrace(o.grace),
					webhookSecret: o["webhook-secret"],
				}),
			};
	}
}

function changeOf(c: Command, answer: unknown): PartnersChangedEvent | undefined {
	const partnerId = (answer as { partnerId?: string } | null)?.partnerId;
	if (!partnerId) return undefined;
	if (c.verb === "rotate-key" || c.verb === "create") return { partnerId, what: "keys" };
	if (c.verb === "revoke-key") return { partnerId, what: (answer as { partnerRevoked?: boolean }).partnerRevoked ? "partner" : "keys" };
	if (c.verb === "rotate-webhook-secret") return { partnerId, what: "webhookSecret" };
	if (c.verb === "set-version") return { partnerId, what: "apiVersion" };
	return undefined;
}

if (require.main === module) {
	void runOperatorCli<Command>({
		name: "partner",
		service: "partners",
		usage: USAGE,
		parse: parseArgs,
		actionOf,
		announcementOf: (c, answer) => {
			const change = changeOf(c, answer);
			return change ? { action: "partners.announce", params: change } : undefined;
		},
		ttlNote:
			"running instances see the change within their cache TTL (30 s for keys and API versions, 60 s for webhook secrets and the webhooks' API version)",
	});
}
