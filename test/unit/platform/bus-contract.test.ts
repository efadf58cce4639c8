import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { BUS_USERS, type BusUser } from "../../../contracts/bus";
import { DRIVER_TOKEN_EVENTS } from "../../../contracts/driver";
import { DISPATCH_EVENTS } from "../../../contracts/dispatch";
import { ORDER_EVENTS } from "../../../contracts/orders";
import { PARTNER_EVENTS } from "../../../contracts/partners";
import { ALL_SERVICES } from "../../../services";

/**
 * The table in contracts/bus.ts against the code: every action or event of
 * another service that a service's code names (a string literal
 * `"orders.transition"`, a contract constant `ORDER_EVENTS.created`, or a
 * `dispatch.${…}` call with the action names it passes) must be in the row
 * of the user that runs it, or that user's nodes would be refused it on a
 * bus with permissions (BUS_PERMISSION_DENIED).
 */

const ROOT = join(__dirname, "../../..");

function sourcesOf(dir: string): string[] {
	const out: string[] = [];
	for (const entry of readdirSync(dir)) {
		const path = join(dir, entry);
		if (statSync(path).isDirectory()) out.push(...sourcesOf(path));
		else if (entry.endsWith(".ts")) out.push(path);
	}
	return out;
}

/** Contract constants a service may name an event by, with their values. */
const CONSTANTS: Record<string, Record<string, string>> = { ORDER_EVENTS, DISPATCH_EVENTS, PARTNER_EVENTS, DRIVER_TOKEN_EVENTS };

/** What a source names of `<service>.<name>`: literals, contract constants, and `svc.${…}` calls completed by the file's `"driverX"`-style literals. */
export function namedOnTheBus(source: string): string[] {
	// Comments name actions for the reader (`orders.unlockOtp` is an operator's call), not calls.
	const text = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:])\/\/.*$/gm, "$1");
	const names = new Set<string>();
	const services = ALL_SERVICES.join("|");
	for (const m of text.matchAll(new RegExp(`["'\`]((?:${services})\\.[A-Za-z][A-Za-z0-9]*)["'\`]`, "g"))) names.add(m[1]);
	for (const m of text.matchAll(/\b([A-Z_]+_EVENTS)\.([A-Za-z]+)\b/g)) {
		const value = CONSTANTS[m[1]]?.[m[2]];
		if (value) names.add(value);
	}
	for (const m of text.matchAll(new RegExp(`\`(${services})\\.\\$\\{`, "g"))) {
		// A computed action of that service: every plain word literal of the file that is an action name candidate.
		for (const w of text.matchAll(/"([a-z][A-Za-z0-9]*)"/g)) names.add(`${m[1]}.${w[1]}`);
	}
	return [...names];
}

/** Known actions and events, so a word literal completing `svc.${…}` counts only when it is really one. */
function known(): Set<string> {
	const all = new Set<string>();
	for (const row of Object.values(BUS_USERS) as BusUser[]) for (const n of [...row.calls, ...row.emits, ...row.receives]) all.add(n);
	return all;
}

describe("contracts/bus.ts matches what each service's code calls", () => {
	test.each(Object.entries(BUS_USERS) as Array<[string, BusUser]>)("%s", (_user, row) => {
		const allowed = new Set([...row.calls, ...row.emits, ...row.receives]);
		const missing: string[] = [];
		for (const service of row.services) {
			for (const file of sourcesOf(join(ROOT, "services", service))) {
				const text = readFileSync(file, "utf8");
				const computed = new RegExp(`\`(${ALL_SERVICES.join("|")})\\.\\$\\{`).test(text);
				for (const name of namedOnTheBus(text)) {
					const owner = name.slice(0, name.indexOf("."));
					if (row.services.includes(owner)) continue; // its own services' actions and events
					if (allowed.has(name)) continue;
					// A word completing a computed call that is not a known action: not a call.
					if (computed && !text.includes(`"${name}"`) && !text.includes(`'${name}'`) && !known().has(name)) continue;
					missing.push(`${file.slice(ROOT.length + 1)}: ${name}`);
				}
			}
		}
		expect(missing).toEqual([]);
	});

	test("the check sees a call the table lacks", () => {
		const text = `await this.broker.call("orders.transition", {});\nawait this.broker.call(\`dispatch.\${action}\`, p); this.asDriver(id, "driverAccept", {});`;
		expect(namedOnTheBus(text)).toEqual(expect.arrayContaining(["orders.transition", "dispatch.driverAccept"]));
		expect(namedOnTheBus("ctx.emit(ORDER_EVENTS.created, {})")).toEqual(["orders.created"]);
	});
});
