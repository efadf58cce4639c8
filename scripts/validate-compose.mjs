#!/usr/bin/env node
// Validates a docker-compose file offline:
//
//   node scripts/validate-compose.mjs [docker-compose.yml] [--builtin-only]
//
// 1. Always: a structural check of the Compose Specification subset this
//    project uses (known keys at every level, depends_on targets and
//    conditions, healthchecks, durations, ports, named volumes, variable
//    interpolation with required variables present in the environment).
// 2. When `docker-compose` (Debian's, `apt-get install docker-compose`) is on
//    the PATH and --builtin-only is not given: `docker-compose -f FILE config -q`,
//    Compose's own full schema validation.
//
// Exits 0 when valid; prints every problem and exits 1 otherwise.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const builtinOnly = args.includes("--builtin-only");
const file = resolve(args.find((a) => !a.startsWith("--")) ?? resolve(root, "docker-compose.yml"));

const problems = [];
const problem = (where, message) => problems.push(`${where}: ${message}`);

const TOP_KEYS = new Set(["version", "name", "services", "volumes", "networks", "secrets", "configs"]);
const SERVICE_KEYS = new Set([
	"image",
	"build",
	"command",
	"entrypoint",
	"environment",
	"env_file",
	"ports",
	"expose",
	"volumes",
	"depends_on",
	"healthcheck",
	"restart",
	"stop_grace_period",
	"stop_signal",
	"deploy",
	"networks",
	"labels",
	"logging",
	"user",
	"working_dir",
	"init",
	"read_only",
	"tmpfs",
	"ulimits",
	"cap_drop",
	"cap_add",
	"security_opt",
	"mem_limit",
	"cpus",
	"profiles",
	"container_name",
	"hostname",
	"extra_hosts",
	"secrets",
	"configs",
	"pull_policy",
	"shm_size",
	"tty",
	"stdin_open",
]);
const HEALTHCHECK_KEYS = new Set(["test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"]);
const BUILD_KEYS = new Set(["context", "dockerfile", "args", "target", "cache_from", "labels", "network", "shm_size", "extra_hosts"]);
const DEPENDS_CONDITIONS = new Set(["service_started", "service_healthy", "service_completed_successfully"]);
const RESTART = new Set(["no", "always", "on-failure", "unless-stopped"]);
const DURATION = /^(\d+(\.\d+)?(us|ms|s|m|h))+$/;
const PORT = /^((\d{1,3}(\.\d{1,3}){3}:)?(\d{1,5}(-\d{1,5})?:)?\d{1,5}(-\d{1,5})?(\/(tcp|udp))?)$/;
const VARIABLE = /\$\{([^}]*)\}|\$\$|\$([A-Za-z_][A-Za-z0-9_]*)/g;
const VARIABLE_BODY = /^([A-Za-z_][A-Za-z0-9_]*)((:?[-?+])(.*))?$/s;

const isMap = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const isExtension = (k) => typeof k === "string" && k.startsWith("x-");

/** Compose interpolation: checks the syntax and that required variables are set. */
function interpolate(value, where) {
	if (typeof value === "string") {
		return value.replace(VARIABLE, (match, braced, bare) => {
			if (match === "$$") return "$";
			const body = braced ?? bare;
			const m = VARIABLE_BODY.exec(body);
			if (!m) {
				problem(where, `invalid interpolation "${match}"`);
				return "";
			}
			const [, name, , op, rest] = m;
			const set = process.env[name];
			if (op === ":?" || op === "?") {
				const missing = op === ":?" ? !set : set === undefined;
				if (missing) problem(where, `required variable ${name} is not set (${rest || "no message"})`);
				return set ?? "";
			}
			if (op === ":-") return set ? set : rest;
			if (op === "-") return set ?? rest;
			return set ?? "";
		});
	}
	if (Array.isArray(value)) return value.map((v, i) => interpolate(v, `${where}[${i}]`));
	if (isMap(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, `${where}.${k}`)]));
	return value;
}

function checkDuration(value, where) {
	if (typeof value !== "string" || !DURATION.test(value)) problem(where, `"${value}" is not a duration like 10s or 1m30s`);
}

function checkService(name, svc, doc) {
	const at = `services.${name}`;
	if (!isMap(svc)) return problem(at, "must be a mapping");
	for (const key of Object.keys(svc)) if (!SERVICE_KEYS.has(key) && !isExtension(key)) problem(at, `unknown key "${key}"`);
	if (svc.image === undefined && svc.build === undefined) problem(at, "needs image or build");
	if (svc.image !== undefined && (typeof svc.image !== "string" || svc.image.length === 0)) problem(`${at}.image`, "must be a non-empty string");
	if (isMap(svc.build)) {
		for (const key of Object.keys(svc.build)) if (!BUILD_KEYS.has(key)) problem(`${at}.build`, `unknown key "${key}"`);
	} else if (svc.build !== undefined && typeof svc.build !== "string") problem(`${at}.build`, "must be a path or a mapping");
	for (const key of ["command", "entrypoint"]) {
		const v = svc[key];
		if (v !== undefined && typeof v !== "string" && !(Array.isArray(v) && v.every((x) => typeof x === "string"))) {
			problem(`${at}.${key}`, "must be a string or a list of strings");
		}
	}
	if (svc.restart !== undefined && !RESTART.has(String(svc.restart)) && !/^on-failure:\d+$/.test(String(svc.restart))) {
		problem(`${at}.restart`, `"${svc.restart}" is not one of ${[...RESTART].join(", ")}`);
	}
	if (svc.stop_grace_period !== undefined) checkDuration(svc.stop_grace_period, `${at}.stop_grace_period`);

	if (svc.environment !== undefined) {
		if (isMap(svc.environment)) {
			for (const [k, v] of Object.entries(svc.environment)) {
				if (v !== null && !["string", "number", "boolean"].includes(typeof v))
					problem(`${at}.environment.${k}`, "must be a string, number, boolean or null");
			}
		} else if (Array.isArray(svc.environment)) {
			for (const e of svc.environment) if (typeof e !== "string" || !/^[^=]+(=.*)?$/.test(e)) problem(`${at}.environment`, `"${e}" is not KEY=value`);
		} else problem(`${at}.environment`, "must be a mapping or a list");
	}

	if (svc.ports !== undefined) {
		if (!Array.isArray(svc.ports)) problem(`${at}.ports`, "must be a list");
		else
			for (const p of svc.ports) {
				if (isMap(p)) {
					if (!Number.isInteger(Number(p.target))) problem(`${at}.ports`, "long syntax needs an integer target");
				} else if (!PORT.test(String(p))) problem(`${at}.ports`, `"${p}" is not a port mapping`);
			}
	}

	if (svc.volumes !== undefined) {
		if (!Array.isArray(svc.volumes)) problem(`${at}.volumes`, "must be a list");
		else
			for (const v of svc.volumes) {
				const source = isMap(v) ? v.source : String(v).split(":")[0];
				const isNamed = typeof source === "string" && /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(source);
				if (isNamed && !(isMap(doc.volumes) && source in doc.volumes))
					problem(`${at}.volumes`, `named volume "${source}" is not declared under volumes`);
			}
	}

	if (svc.depends_on !== undefined) {
		const deps = Array.isArray(svc.depends_on) ? Object.fromEntries(svc.depends_on.map((d) => [d, {}])) : svc.depends_on;
		if (!isMap(deps)) problem(`${at}.depends_on`, "must be a list or a mapping");
		else
			for (const [dep, spec] of Object.entries(deps)) {
				if (!isMap(doc.services) || !(dep in doc.services)) problem(`${at}.depends_on`, `unknown service "${dep}"`);
				if (dep === name) problem(`${at}.depends_on`, "a service cannot depend on itself");
				if (isMap(spec)) {
					for (const key of Object.keys(spec))
						if (!["condition", "restart", "required"].includes(key)) problem(`${at}.depends_on.${dep}`, `unknown key "${key}"`);
					if (spec.condition !== undefined && !DEPENDS_CONDITIONS.has(spec.condition))
						problem(`${at}.depends_on.${dep}.condition`, `"${spec.condition}" is not one of ${[...DEPENDS_CONDITIONS].join(", ")}`);
					if (spec.condition === "service_healthy") {
						const target = doc.services?.[dep];
						if (!isMap(target?.healthcheck) || target.healthcheck.disable === true)
							problem(`${at}.depends_on.${dep}`, `waits for "${dep}" to be healthy but it has no healthcheck`);
					}
				} else if (spec !== null && !Array.isArray(svc.depends_on)) problem(`${at}.depends_on.${dep}`, "must be a mapping");
			}
	}

	if (svc.healthcheck !== undefined) {
		const hc = svc.healthcheck;
		if (!isMap(hc)) problem(`${at}.healthcheck`, "must be a mapping");
		else {
			for (const key of Object.keys(hc)) if (!HEALTHCHECK_KEYS.has(key)) problem(`${at}.healthcheck`, `unknown key "${key}"`);
			if (hc.disable !== true) {
				const test = hc.test;
				const ok =
					typeof test === "string" ||
					(Array.isArray(test) && ["CMD", "CMD-SHELL", "NONE"].includes(test[0]) && test.every((t) => typeof t === "string"));
				if (!ok) problem(`${at}.healthcheck.test`, 'must be a string or ["CMD" | "CMD-SHELL", …]');
			}
			for (const key of ["interval", "timeout", "start_period", "start_interval"])
				if (hc[key] !== undefined) checkDuration(hc[key], `${at}.healthcheck.${key}`);
			if (hc.retries !== undefined && !(Number.isInteger(hc.retries) && hc.retries > 0))
				problem(`${at}.healthcheck.retries`, "must be a positive integer");
		}
	}
}

function builtinCheck(text) {
	let doc;
	try {
		doc = parse(text, { merge: true, prettyErrors: true });
	} catch (err) {
		problem(file, `not valid YAML: ${err.message}`);
		return;
	}
	if (!isMap(doc)) return problem(file, "must be a mapping");
	doc = interpolate(doc, "");
	for (const key of Object.keys(doc)) if (!TOP_KEYS.has(key) && !isExtension(key)) problem(file, `unknown top-level key "${key}"`);
	if (!isMap(doc.services) || Object.keys(doc.services).length === 0) return problem(file, "needs at least one service");
	for (const [name, svc] of Object.entries(doc.services)) checkService(name, svc, doc);
	if (doc.volumes !== undefined && doc.volumes !== null && !isMap(doc.volumes)) problem("volumes", "must be a mapping");
}

builtinCheck(readFileSync(file, "utf8"));

let composeChecked = false;
if (!builtinOnly) {
	const which = spawnSync("docker-compose", ["version", "--short"], { encoding: "utf8" });
	if (which.status === 0) {
		composeChecked = true;
		const r = spawnSync("docker-compose", ["-f", file, "config", "-q"], { encoding: "utf8", cwd: dirname(file) });
		if (r.status !== 0) problem("docker-compose config -q", (r.stderr || r.stdout || `exit ${r.status}`).trim());
	}
}

if (problems.length > 0) {
	console.error(`${file} is invalid:\n- ${problems.join("\n- ")}`);
	process.exit(1);
}
console.log(`${file}: valid (built-in check${composeChecked ? " + docker-compose config -q" : "; docker-compose not installed"})`);
