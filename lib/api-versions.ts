import {
	API_VERSION_HEADER,
	API_VERSIONS,
	ANSWERS_WITH_WEBHOOK_BODIES,
	type ApiVersionEntry,
	type ApiVersionTable,
	type JsonObject,
	type Translation,
} from "../contracts/versions";
import { ApiError } from "./errors";
import { RIDE_ROUTES } from "../contracts/gateway";

const RIDE_PATHS = RIDE_ROUTES.map((r) => r.path);

/**
 * Walks the version table of contracts/versions.ts: which versions exist,
 * which one serves a request, and the translations of a request into the
 * core version's shape and of an answer or webhook body out of it. Pure.
 */

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A table that cannot be walked: start-up stops with this. */
export class ApiVersionTableError extends Error {
	constructor(message: string) {
		super(`API version table: ${message}`);
		this.name = "ApiVersionTableError";
	}
}

function isRealDate(version: string): boolean {
	const m = DATE.exec(version);
	if (!m) return false;
	const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
	return d.toISOString().slice(0, 10) === version;
}

type Kind = "requests" | "answers" | "webhooks";

/** The direction each kind is walked in for an entry at or below the core (above it, the other one). */
const DIRECTION_AT_OR_BELOW_CORE: Record<Kind, "up" | "down"> = { requests: "up", answers: "down", webhooks: "down" };

/**
 * Throws ApiVersionTableError unless the table can be walked: real dates,
 * strictly ascending, a known core, no translations on the first entry, only
 * known route paths, and each translation in the direction its place needs.
 */
export function checkVersionTable(table: ApiVersionTable, routePaths: readonly string[] = RIDE_PATHS): ApiVersionTable {
	const { versions, core } = table;
	if (!Array.isArray(versions) || versions.length === 0) throw new ApiVersionTableError("no versions");
	versions.forEach((entry, i) => {
		if (!isRealDate(entry.version)) throw new ApiVersionTableError(`"${entry.version}" is not a date YYYY-MM-DD`);
		if (i > 0 && entry.version <= versions[i - 1].version)
			throw new ApiVersionTableError(`${entry.version} comes after ${versions[i - 1].version}: versions must be in ascending order`);
	});
	const coreIndex = versions.findIndex((e) => e.version === core);
	if (coreIndex < 0) throw new ApiVersionTableError(`the core version ${core} is not in the list`);
	const first = versions[0];
	if (first.requests || first.answers || first.webhooks) throw new ApiVersionTableError(`the first version ${first.version} cannot have translations`);
	versions.forEach((entry, i) => {
		const flip = i > coreIndex;
		for (const kind of ["requests", "answers"] as const) {
			for (const [path, translation] of Object.entries<Translation>(entry[kind] ?? {})) {
				if (!routePaths.includes(path)) throw new ApiVersionTableError(`${entry.version} ${kind}: unknown route ${path}`);
				needs(entry, kind, path, translation, flip);
			}
		}
		if (entry.webhooks) needs(entry, "webhooks", "webhook bodies", entry.webhooks, flip);
	});
	return table;
}

function needs(entry: ApiVersionEntry, kind: Kind, what: string, translation: { up?: unknown; down?: unknown }, flip: boolean): void {
	const base = DIRECTION_AT_OR_BELOW_CORE[kind];
	const direction = flip ? (base === "up" ? "down" : "up") : base;
	if (typeof translation[direction] !== "function") {
		throw new ApiVersionTableError(`${entry.version} ${kind} ${what}: needs a "${direction}" translation (${flip ? "above" : "at or below"} the core)`);
	}
}

/** Every known version, oldest first. */
export function knownVersions(table: ApiVersionTable): string[] {
	return table.versions.map((e) => e.version);
}

/** The newest version: new partners are pinned to it. */
export function latestVersion(table: ApiVersionTable): string {
	return table.versions[table.versions.length - 1].version;
}

export function isKnownVersion(table: ApiVersionTable, version: string): boolean {
	return table.versions.some((e) => e.version === version);
}

/** `400 UNKNOWN_API_VERSION`, naming the known ones. */
export function unknownVersion(table: ApiVersionTable, given: string, field = API_VERSION_HEADER): ApiError {
	const message = `${field} must be one of: ${knownVersions(table).join(", ")}`;
	return new ApiError("UNKNOWN_API_VERSION", `Unknown API version "${given.slice(0, 40)}"; ${message}`, { details: [{ field, message }] });
}

/**
 * The version a request is served in: its `Ride-Version` header when sent
 * (unknown → UNKNOWN_API_VERSION), else the partner's pin. A pin this table
 * does not know (a newer release's, during a rollout) is served as the
 * newest known version before it; none pinned (a partners instance older
 * than versions) as the first.
 */
export function servedVersion(table: ApiVersionTable, header: string | string[] | undefined, pinned: string | undefined): string {
	if (header !== undefined) {
		const given = Array.isArray(header) ? header.join(",") : header;
		if (!isKnownVersion(table, given)) throw unknownVersion(table, given);
		return given;
	}
	if (pinned === undefined) return table.versions[0].version;
	if (isKnownVersion(table, pinned)) return pinned;
	const before = knownVersions(table).filter((v) => v < pinned);
	return before.length > 0 ? before[before.length - 1] : table.versions[0].version;
}

/** Applies one kind's translations between the core and `version`, in the order and direction the walk needs. */
function walk(
	table: ApiVersionTable,
	version: string,
	kind: Kind,
	pick: (entry: ApiVersionEntry) => { up?: unknown; down?: unknown } | undefined,
	body: JsonObject,
): JsonObject {
	const versions = table.versions;
	const at = versions.findIndex((e) => e.version === version);
	const core = versions.findIndex((e) => e.version === table.core);
	if (at < 0) throw new ApiVersionTableError(`unknown version ${version}`);
	if (at === core) return body;
	// Entries strictly after the lower of the two, up to and including the higher.
	const lo = Math.min(at, core);
	const hi = Math.max(at, core);
	const span = versions.slice(lo + 1, hi + 1);
	// Requests go towards the core, answers and webhooks away from it.
	const towardsNewer = kind === "requests" ? at < core : at > core;
	const ordered = towardsNewer ? span : [...span].reverse();
	const direction = towardsNewer ? "up" : "down";
	let out = body;
	for (const entry of ordered) {
		const fn = pick(entry)?.[direction];
		if (typeof fn === "function") out = (fn as (b: JsonObject) => JsonObject)(out);
	}
	return out;
}

/** A request body sent in `version`, in the core's shape. */
export function requestToCore(table: ApiVersionTable, version: string, path: string, body: JsonObject): JsonObject {
	return walk(table, version, "requests", (e) => e.requests?.[path], body);
}

/** A webhook body (or a `/ride/events` payload) in the core's shape, rendered in `version`. */
export function webhookFromCore(table: ApiVersionTable, version: string, body: JsonObject): JsonObject {
	return walk(table, version, "webhooks", (e) => e.webhooks, body);
}

/**
 * A success answer in the core's shape, rendered in `version`. Webhook bodies inside it (`/ride/events`
 * payloads) are rendered as a webhook of that version is, `apiVersion` included.
 */
export function answerFromCore(table: ApiVersionTable, version: string, path: string, answer: unknown): unknown {
	if (typeof answer !== "object" || answer === null || Array.isArray(answer)) return answer;
	let out = answer as JsonObject;
	const withBodies = ANSWERS_WITH_WEBHOOK_BODIES[path];
	if (withBodies) out = withBodies(out, (b) => ({ ...webhookFromCore(table, version, b), apiVersion: version }));
	return walk(table, version, "answers", (e) => e.answers?.[path], out);
}

/**
 * The version table a service runs with: the one `startNode` was handed
 * (`$apiVersions`, a secure setting: tests add a synthetic version there),
 * else this release's. Checked, so a bad table stops the start-up.
 */
export function apiVersionsOf(service: { settings?: unknown }): ApiVersionTable {
	const injected = (service.settings as { $apiVersions?: ApiVersionTable } | undefined)?.$apiVersions;
	return checkVersionTable(injected ?? API_VERSIONS);
}
