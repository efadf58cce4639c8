/**
 * The operations contract (API.md, "Operations contract") read from an
 * environment. Pure: pass any env object, get typed settings; nothing here
 * reads process.env by itself, so tests can build settings side by side.
 */
import type { Point } from "../contracts/common";

export interface RuntimeSettings {
	port: number;
	databaseUrl: string | undefined;
	transporter: string | undefined;
	services: string[] | undefined;
	fleetMode: "simulated" | "live";
	simSpeed: number;
	simCities: Point[];
	bootstrapPartnerKey: string | undefined;
	bootstrapWebhookSecret: string | undefined;
	webhookAllowPrivate: boolean;
	/**
	 * The ports a webhook URL may use (`WEBHOOK_PORTS`, comma list of 1..65535); undefined = any port.
	 * Default in production 80, 443, 8443; any port otherwise (local receivers in dev and tests).
	 */
	webhookPorts: number[] | undefined;
	namespace: string;
	logLevel: string;
	production: boolean;
	metricsPort: number;
	/** How long a call to another node waits for its answer (`REQUEST_TIMEOUT_MS`), then 503. */
	requestTimeoutMs: number;
	webhookRetryScheduleMs: number[] | undefined;
	dataDir: string;
	tracing: boolean;
	/** `/health/live` and `/health/ready` of this process (`HEALTH_PORT`, 0..65535); 0 = off. */
	healthPort: number;
	/** The broker's node id (`NODE_ID`); unset = `<host>-<services>-<pid>`, made by moleculer.config.ts. */
	nodeId: string | undefined;
	/** JSON log lines (`LOG_FORMAT=json`, or always in production) or readable ones. */
	logFormat: "json" | "readable";
	/** Span exporters (`TRACING_EXPORTER`, comma list), when `tracing` is on. */
	tracingExporters: TraceExporterName[];
	/** Base URL of the Zipkin exporter (`ZIPKIN_URL`). */
	zipkinUrl: string;
	/** Fraction of requests traced (`TRACING_SAMPLE_RATE`, 0..1). */
	tracingSampleRate: number;
	/** Param/meta names spans may keep the values of (`TRACING_TAGS_ALLOW`, comma list). */
	tracingTagsAllow: string[];
}

export const TRACE_EXPORTERS = ["Console", "Event", "Zipkin"] as const;
export type TraceExporterName = (typeof TRACE_EXPORTERS)[number];

export type Env = Record<string, string | undefined>;

export const DEFAULT_CITIES: Point[] = [
	{ lat: 12.9716, lng: 77.5946 }, // Bengaluru
	{ lat: 28.6139, lng: 77.209 }, // Delhi
	{ lat: 19.076, lng: 72.8777 }, // Mumbai
];

/**
 * One policy for every setting of every service: unset or blank means the
 * default (defined once, where the setting is read); any other value must be
 * valid, or start-up stops with a message naming the setting and the rule.
 */
export class SettingError extends Error {
	constructor(name: string, rule: string, raw: string) {
		super(`${name} must be ${rule}, got "${raw}"`);
		this.name = "SettingError";
	}
}

function rawOf(env: Env, name: string): string | undefined {
	const raw = env[name];
	return raw === undefined || raw.trim() === "" ? undefined : raw.trim();
}

const TRUE_WORDS = ["1", "true", "yes", "on"];
const FALSE_WORDS = ["0", "false", "no", "off"];

/** A yes/no setting: 1/true/yes/on or 0/false/no/off (any case). */
export function envBool(env: Env, name: string, fallback: boolean): boolean {
	const raw = rawOf(env, name);
	if (raw === undefined) return fallback;
	const word = raw.toLowerCase();
	if (TRUE_WORDS.includes(word)) return true;
	if (FALSE_WORDS.includes(word)) return false;
	throw new SettingError(name, "one of true/false (1/0, yes/no, on/off)", raw);
}

/**
 * A numeric setting: `fallback` when unset or blank; otherwise it must be a
 * finite number passing `check`, or start-up stops with a message naming the
 * setting and the rule (`rule` reads after "must be").
 */
export function envNumber(env: Env, name: string, fallback: number, check: (n: number) => boolean = () => true, rule = "a number"): number {
	const raw = rawOf(env, name);
	if (raw === undefined) return fallback;
	const n = Number(raw);
	if (!Number.isFinite(n) || !check(n)) throw new SettingError(name, rule, raw);
	return n;
}

/** A whole number of at least `min` (milliseconds, counts, sizes). */
export function envInt(env: Env, name: string, fallback: number, min = 0): number {
	return envNumber(env, name, fallback, (n) => Number.isInteger(n) && n >= min, `a whole number >= ${min}`);
}

/** A number greater than zero. */
export function envPositive(env: Env, name: string, fallback: number): number {
	return envNumber(env, name, fallback, (n) => n > 0, "a number greater than 0");
}

/** One of a fixed set of words. */
export function envEnum<T extends string>(env: Env, name: string, values: readonly T[], fallback: T): T {
	const raw = rawOf(env, name);
	if (raw === undefined) return fallback;
	if (!(values as readonly string[]).includes(raw)) throw new SettingError(name, `one of ${values.join(", ")}`, raw);
	return raw as T;
}

/** A comma list of words (blanks dropped), or `fallback` when unset or blank. */
export function envList(env: Env, name: string, fallback: string[] = []): string[] {
	const raw = rawOf(env, name);
	if (raw === undefined) return fallback;
	return raw
		.split(",")
		.map((s) => s.trim())
		.filter(Boolean);
}

/** Free text, or `fallback` when unset or blank. */
export function envString(env: Env, name: string): string | undefined;
export function envString(env: Env, name: string, fallback: string): string;
export function envString(env: Env, name: string, fallback?: string): string | undefined {
	return rawOf(env, name) ?? fallback;
}

/**
 * The environment a service reads its settings from: the one `startNode`
 * handed it (as the secure setting `$env`, never published on the bus), or
 * `process.env` for a service created some other way.
 */
export function serviceEnv(service: { settings?: unknown }): Env {
	return (service.settings as { $env?: Env } | undefined)?.$env ?? process.env;
}

/**
 * The one place a service's configuration lives: `this.settings` (Moleculer's
 * own), typed by the service's `<Name>Settings` and filled in `created()` by
 * `useServiceSettings(this, read<Name>Settings)` from
 * services/<name>/<name>.settings.ts. No `this.cfg` / `this.config` copies.
 *
 * - A mixin's settings (moleculer-web's `routes`, `port`, `onError`…) sit in
 *   the same object: the service's own knobs are merged in flat beside them,
 *   and must not reuse a name the mixin reads unless they mean the same thing
 *   (the gateway's `port` is moleculer-web's `port`, on purpose).
 * - Never published: Moleculer copies the public settings when the service is
 *   constructed, before `created()`, leaving out `$secureSettings`
 *   (`startNode` always sets it, for `$env`). What is merged here, secrets
 *   included, stays in this process.
 */
export function useServiceSettings<S extends object>(service: { settings: object }, read: (env: Env) => S): S {
	// Bad settings stop the start-up here, with a message that names the setting.
	return Object.assign(service.settings, read(serviceEnv(service)));
}

/** "12.97,77.59;28.61,77.20" → points. */
export function parseCities(value: string | undefined): Point[] {
	if (!value) return DEFAULT_CITIES;
	return value.split(";").map((pair) => {
		const [lat, lng] = pair.split(",").map((s) => Number(s.trim()));
		if (!Number.isFinite(lat) || !Number.isFinite(lng) || Math.abs(lat) > 90 || Math.abs(lng) > 180) {
			throw new Error(`SIM_CITIES: "${pair}" is not "lat,lng"`);
		}
		return { lat, lng };
	});
}

export function parseSchedule(value: string | undefined): number[] | undefined {
	if (!value) return undefined;
	const delays = value.split(",").map((s) => Number(s.trim()));
	if (delays.some((d) => !Number.isFinite(d) || d < 0)) {
		throw new Error("WEBHOOK_RETRY_SCHEDULE_MS must be comma-separated non-negative numbers");
	}
	return delays;
}

/** `TRACING_EXPORTER`: each name one of TRACE_EXPORTERS, in any case. */
function envTraceExporters(env: Env, name: string): TraceExporterName[] {
	return envList(env, name, ["Console"]).map((word) => {
		const known = TRACE_EXPORTERS.find((e) => e.toLowerCase() === word.toLowerCase());
		if (!known) throw new SettingError(name, `a comma list of ${TRACE_EXPORTERS.join(", ")}`, word);
		return known;
	});
}

/**
 * The ports webhooks go to in production unless `WEBHOOK_PORTS` says otherwise: the web's own (80, 443) and the
 * usual alternative HTTPS port. Anything else (a database, an admin console, a mail server on a public address)
 * is no partner's webhook receiver.
 */
export const DEFAULT_WEBHOOK_PORTS = [80, 443, 8443] as const;

/** A comma list of TCP ports (1..65535), or `fallback` when unset (undefined = any port). */
function envPorts(env: Env, name: string, fallback: number[] | undefined): number[] | undefined {
	const words = envList(env, name);
	if (words.length === 0) return fallback;
	return words.map((word) => {
		const n = /^[0-9]{1,5}$/.test(word) ? Number(word) : NaN;
		if (!(n >= 1 && n <= 65535)) throw new SettingError(name, "a comma list of port numbers 1..65535", word);
		return n;
	});
}

export function readSettings(env: Env): RuntimeSettings {
	const production = env.NODE_ENV === "production";
	const fleetMode = envEnum(env, "FLEET_MODE", ["simulated", "live"] as const, "simulated");
	const services = env.SERVICES
		? env.SERVICES.split(",")
				.map((s) => s.trim())
				.filter(Boolean)
		: undefined;
	return {
		port: envNumber(env, "PORT", 3000),
		databaseUrl: env.DATABASE_URL || undefined,
		transporter: env.TRANSPORTER || undefined,
		services: services && services.length > 0 && !services.includes("all") ? services : undefined,
		fleetMode,
		simSpeed: envNumber(env, "SIM_SPEED", 1),
		simCities: parseCities(env.SIM_CITIES),
		bootstrapPartnerKey: env.BOOTSTRAP_PARTNER_KEY || undefined,
		bootstrapWebhookSecret: env.BOOTSTRAP_WEBHOOK_SECRET || undefined,
		webhookAllowPrivate: envBool(env, "WEBHOOK_ALLOW_PRIVATE", !production),
		webhookPorts: envPorts(env, "WEBHOOK_PORTS", production ? [...DEFAULT_WEBHOOK_PORTS] : undefined),
		namespace: env.NAMESPACE ?? "",
		logLevel: env.LOGLEVEL || "info",
		production,
		metricsPort: envNumber(env, "METRICS_PORT", 3030),
		requestTimeoutMs: envInt(env, "REQUEST_TIMEOUT_MS", 15_000, 100),
		webhookRetryScheduleMs: parseSchedule(env.WEBHOOK_RETRY_SCHEDULE_MS),
		dataDir: env.DATA_DIR || "./data",
		tracing: envBool(env, "TRACING", false),
		healthPort: envNumber(env, "HEALTH_PORT", 0, (n) => Number.isInteger(n) && n >= 0 && n <= 65535, "a port number 0..65535"),
		nodeId: envString(env, "NODE_ID"),
		logFormat: production ? "json" : envEnum(env, "LOG_FORMAT", ["json", "readable"] as const, "readable"),
		tracingExporters: envTraceExporters(env, "TRACING_EXPORTER"),
		zipkinUrl: envString(env, "ZIPKIN_URL", "http://localhost:9411"),
		tracingSampleRate: envNumber(env, "TRACING_SAMPLE_RATE", 1, (n) => n >= 0 && n <= 1, "a fraction 0..1"),
		tracingTagsAllow: envList(env, "TRACING_TAGS_ALLOW"),
	};
}
