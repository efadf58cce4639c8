import type { ParseArgsOptionsConfig } from "node:util";
import { parseVerb, runOperatorCli, UsageError, type VerbCommand } from "./operator-cli";

/**
 * Operators' driver management for the driver API (`/driver/*`):
 *
 *   npm run driver -- create --name "Ravi K" --phone +919800000001 --vehicle KA01AB1234 --service-type cab [--mode live|test]
 *   npm run driver -- revoke --driver drv_…
 *   npm run driver -- list
 *   npm run driver -- audit [--driver drv_…] [--limit 100] [--before <id>]
 *
 * Every command takes `--operator <name>` (else OPERATOR, else USER): who
 * runs it, recorded with every change in the audit trail (`dispatch_audit`;
 * `audit` lists it, newest first, never a token).
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
  npm run driver -- list
  npm run driver -- audit [--driver <driverId>] [--limit <n>] [--before <id>]
Every command: [--operator <name>] (default: OPERATOR, else USER), recorded in the audit trail.`;

export { UsageError };

type Verb = "create" | "revoke" | "list" | "audit";
type OptionName = "name" | "phone" | "vehicle" | "service-type" | "mode" | "driver" | "limit" | "before";

export type Command = VerbCommand<Verb, OptionName>;

const str = { type: "string" } as const;
const OPTIONS: Record<Verb, ParseArgsOptionsConfig> = {
	create: { name: str, phone: str, vehicle: str, "service-type": str, mode: str },
	revoke: { driver: str },
	list: {},
	audit: { driver: str, limit: str, before: str },
};
const REQUIRED: Partial<Record<Verb, readonly OptionName[]>> = { create: ["name", "phone", "vehicle", "service-type"], revoke: ["driver"] };

export function parseArgs(argv: string[]): Command {
	const command = parseVerb<Verb, OptionName>(argv, OPTIONS, REQUIRED);
	const mode = command.options.mode;
	if (mode !== undefined && mode !== "live" && mode !== "test") throw new UsageError(`--mode must be live or test (got "${mode}")`);
	return command;
}

export function actionOf(c: Command): { action: string; params: Record<string, unknown> } {
	const o = c.options;
	switch (c.verb) {
		case "create":
			return {
				action: "dispatch.createDriverToken",
				params: { name: o.name, phone: o.phone, vehicleNumber: o.vehicle, serviceType: o["service-type"], ...(o.mode ? { mode: o.mode } : {}) },
			};
		case "revoke":
			return { action: "dispatch.revokeDriverTokens", params: { driverId: o.driver } };
		case "list":
			return { action: "dispatch.listDriverTokens", params: {} };
		case "audit":
			return {
				action: "dispatch.audit",
				params: Object.fromEntries(Object.entries({ driverId: o.driver, limit: o.limit, before: o.before }).filter(([, v]) => v !== undefined)),
			};
	}
}

if (require.main === module) {
	void runOperatorCli<Command>({
		name: "driver",
		service: "dispatch",
		usage: USAGE,
		parse: parseArgs,
		actionOf,
		announcementOf: (c) => (c.verb === "revoke" ? { action: "dispatch.announceDriverTokens", params: { driverId: String(c.options.driver) } } : undefined),
		ttlNote: "running instances refuse the token within their cache TTL (5 s)",
		// A short-lived operator process: it must not drive anybody's rides.
		env: { FLEET_MODE: "live" },
	});
}
