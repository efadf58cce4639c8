#!/usr/bin/env node
// Keeps `npm ci` working from the committed package-lock.json:
//
//   node scripts/lock-placeholders.mjs        # after an `npm install` that rewrote the lock
//   node scripts/lock-placeholders.mjs --check # exit 1 when an entry is missing (CI)
//
// Why: the registry reachable here answers 404 for other platforms' optional
// native binaries (e.g. @unrs/resolver-binding-darwin-arm64, pulled in by
// jest's resolver), so `npm install` leaves them out of the lock, and `npm ci`
// then refuses the lock as "not in sync". Every optional dependency the lock
// names but does not list gets a placeholder entry: version, platform (os,
// cpu, libc read from the package name) and optional, no tarball. npm skips
// such a package on any other platform without fetching it, so the install
// stays exactly what the lock says; on its own platform npm fetches that
// exact version.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const lockPath = join(root, "package-lock.json");
const check = process.argv.includes("--check");

const OS = { android: "android", darwin: "darwin", freebsd: "freebsd", linux: "linux", openharmony: "openharmony", win32: "win32" };
const CPU = { "arm-eabi": "arm", arm64: "arm64", arm: "arm", loong64: "loong64", ppc64: "ppc64", riscv64: "riscv64", s390x: "s390x", x64: "x64", ia32: "ia32" };

/** os/cpu/libc of a binary package named like `<scope>/<prefix>-<os>-<cpu>[-<abi>]`, or {} when the name does not say. */
function platformOf(name) {
	const parts = name.split("/").pop().split("-");
	const at = parts.findIndex((p) => p in OS);
	if (at < 0) return {};
	const rest = parts.slice(at + 1);
	const cpu = CPU[rest.slice(0, 2).join("-")] ? CPU[rest.slice(0, 2).join("-")] : CPU[rest[0]];
	const abi = rest.slice(1).join("-");
	const platform = { os: [OS[parts[at]]] };
	if (cpu) platform.cpu = [cpu];
	if (OS[parts[at]] === "linux") {
		if (/musl/.test(abi)) platform.libc = ["musl"];
		else if (/gnu/.test(abi)) platform.libc = ["glibc"];
	}
	return platform;
}

const lock = JSON.parse(readFileSync(lockPath, "utf8"));
const packages = lock.packages;
const added = [];
for (const [path, entry] of Object.entries(packages)) {
	for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
		const nested = path ? `${path}/node_modules/${name}` : `node_modules/${name}`;
		if (packages[nested] || packages[`node_modules/${name}`]) continue;
		if (!/^\d+\.\d+\.\d+(?:[-+][\w.-]+)?$/.test(version))
			throw new Error(`${path || "(root)"}: optional ${name}@${version} is not an exact version; cannot add a placeholder`);
		const fields = { ...(entry.dev ? { dev: true } : {}), optional: true, ...platformOf(name) };
		// npm's own layout (version, then the other keys sorted), so a later `npm install` rewrites nothing.
		packages[`node_modules/${name}`] = { version, ...Object.fromEntries(Object.entries(fields).sort(([a], [b]) => a.localeCompare(b, "en"))) };
		added.push(`${name}@${version}`);
	}
}

if (check) {
	if (added.length > 0) {
		console.error(
			`package-lock.json lacks ${added.length} optional entr${added.length === 1 ? "y" : "ies"} (npm ci would refuse it): ${added.join(", ")}\nrun: node scripts/lock-placeholders.mjs`,
		);
		process.exit(1);
	}
	console.log("package-lock.json: every optional dependency has an entry");
} else {
	if (added.length > 0) {
		// npm keeps `packages` sorted by path; so do we, so a later `npm install` leaves them in place.
		lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b, "en"))));
		writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
	}
	console.log(`package-lock.json: ${added.length} placeholder entr${added.length === 1 ? "y" : "ies"} added${added.length ? `: ${added.join(", ")}` : ""}`);
}
