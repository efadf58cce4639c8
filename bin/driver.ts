import type { ParseArgsOptionsConfig } from "node:util";
import { DRIVER_TOKEN_LIFETIME_MAX_S, lifetimeSeconds } from "../contracts/driver";
import { parseVerb, runOperatorCli, UsageError, type VerbCommand } from "./operator-cli";

/**
 * Operators' driver management for the driver API (`/driver/*`):
 *
 *   npm run driver -- create --name "Ravi K" --phone +919800000001 --vehicle KA01AB1234 --service-type cab [--mode live|test] [--expires-in 30d]
 *   npm run driver -- revoke --driver drv_…     (every token of the driver)
 *   npm run driver -- revoke --token dtk_…      (one token; or --prefix rdt_…, as `list` shows it)
 *   npm run driver -- list
 *   npm run driver -- audit [--driver drv_…] [--limit 100] [--before <id>]
 *
 * Every command takes `--operator <name>` (else OPERATOR, else USER): who
 * runs it, recorded with every change in the audit trail (`dispatch_audit`;
 * `audit` lists it, newest first, never a token).
 *
 * `create` registers the driver (the same phone again is the same driver)
 * and prints `{ "driverId", "token", "tokenId", "tokenPrefix", "expiresAt" }`:
 * the only time the token is shown (only its SHA-256 is stored).
 * `--expires-in` (`<n><s|m|h|d>`, at most 365d) gives it a lifetime; without
 * it the token lasts until revoked. A driver may hold several tokens;
 * `revoke --driver` revokes all of them, `revoke --token`/`--prefix` one
 * (the driver's others keep working). `list` prints the tokens with their
 * expiry and state (never the token itself). `--mode test` makes a driver
 * that takes test-key rides (a driver app's developer against the sandbox);
 * live by default.
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
  npm run driver -- create --name <name> --phone <+91…> --vehicle <number> --service-type <scooty|cab> [--mode <live|test>] [--expires-in <n><s|m|h|d>]
  npm run driver -- revoke (--driver <driverId> | --token <tokenId> | --prefix <tokenPrefix>)
  npm run driver -- list
  npm run driver -- audit [--driver <driverId>] [--limit <n>] [--before <id>]
Every command: [--operator <name>] (default: OPERATOR, else USER), recorded in the audit trail.`;

export { UsageError };

type Verb = "create" | "revoke" | "list" | "audit";
type OptionName = "name" | "phone" | "vehicle" | "service-type" | "mode" | "expires-in" | "driver" | "token" | "prefix" | "limit" | "before";

export type Command = VerbCommand<Verb, OptionName>;

const str = { type: "string" } as const;
const OPTIONS: Record<Verb, ParseArgsOptionsConfig> = {
	create: { name: str, phone: str, vehicle: str, "service-type": str, mode: str, "expires-in": str },
	revoke: { driver: str, token: str, prefix: str },
	list: {},
	audit: { driver: str, limit: str, before: str },
};
const REQUIRED: Partial<Record<Verb, readonly OptionName[]>> = { create: ["name", "phone", "vehicle", "service-type"] };

export function parseArgs(argv: string[]): Command {
	const command = parseVerb<Verb, OptionName>(argv, OPTIONS, REQUIRED);
	const { mode, "expires-in": expiresIn } = command.options;
	if (mode !== undefined && mode !== "live" && mode !== "test") throw new UsageError(`--mode must be live or test (got "${mode}")`);
	if (expiresIn !== undefined && lifetimeSeconds(expiresIn) === undefined) {
		throw new UsageError(`--expires-in must be <n><s|m|h|d>, at most ${DRIVER_TOKEN_LIFETIME_MAX_S / 86_400}d (got "${expiresIn}")`);
	}
	if (command.verb === "revoke" && [command.options.driver, command.options.token, command.options.prefix].filter((v) => v?.trim()).length !== 1) {
		throw new UsageError("revoke needs exactly one of --driver <driverId>, --token <tokenId> or --prefix <tokenPrefix>");
	}
	return command;
}

export function actionOf(c: Command): { action: string; params: Record<string, unknown> } {
	const o = c.options;
	switch (c.verb) {
		case "create":
			return {
				action: "dispatch.createDriverToken",
				params: {
					name: o.name,
					phone: o.phone,
					vehicleNumber: o.vehicle,
					serviceType: o["service-type"],
					...(o.mode ? { mode: o.mode } : {}),
					...(o["expires-in"] ? { expiresIn: o["expires-in"] } : {}),
				},
			};
		case "revoke":
			if (o.driver) return { action: "dispatch.revokeDriverTokens", params: { driverId: o.driver } };
			return { action: "dispatch.revokeDriverToken", params: o.token ? { tokenId: o.token } : { prefix: o.prefix } };
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
		announcementOf: (c, answer) => {
			const driverId = (answer as { driverId?: string } | null)?.driverId;
			if (!driverId) return undefined;
			// Whether one token or all: the driver's (the answer names it), so every instance forgets them.
			if (c.verb === "revoke") return { action: "dispatch.announceDriverTokens", params: { driverId } };
			// A new token: every dispatch instance knows it at once (the gateway's throttled addresses ask them with onlyKnown).
			if (c.verb === "create") return { action: "dispatch.announceDriverTokenCreated", params: { driverId } };
			return undefined;
		},
		ttlNote: "running instances refuse the token within their cache TTL (5 s)",
		// A short-lived operator process: it must not drive anybody's rides.
		env: { FLEET_MODE: "live" },
	});
}
