/**
 * The operations contract (API.md, "Operations contract") read from an
 * environment. Pure: pass any env object, get typed settings; nothing here
 * reads process.env by itself, so tests can build settings side by side.
 */
export interface Point {
	lat: number;
	lng: number;
}

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
	namespace: string;
	logLevel: string;
	production: boolean;
	metricsPort: number;
	webhookRetryScheduleMs: number[] | undefined;
	dataDir: string;
	tracing: boolean;
}

export type Env = Record<string, string | undefined>;

export const DEFAULT_CITIES: Point[] = [
	{ lat: 12.9716, lng: 77.5946 }, // Bengaluru
	{ lat: 28.6139, lng: 77.209 }, // Delhi
	{ lat: 19.076, lng: 72.8777 }, // Mumbai
];

function bool(value: string | undefined, fallback: boolean): boolean {
	if (value === undefined || value === "") return fallback;
	return ["1", "true", "yes", "on"].includes(value.toLowerCase());
}

/**
 * A numeric setting: `fallback` when unset or blank; otherwise it must be a
 * finite number passing `check`, or start-up stops with a message naming the
 * setting and the rule (`rule` reads after "must be").
 */
export function envNumber(env: Env, name: string, fallback: number, check: (n: number) => boolean = () => true, rule = "a number"): number {
	const raw = env[name];
	if (raw === undefined || raw.trim() === "") return fallback;
	const n = Number(raw);
	if (!Number.isFinite(n) || !check(n)) throw new Error(`${name} must be ${rule}, got "${raw}"`);
	return n;
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

export function readSettings(env: Env): RuntimeSettings {
	const production = env.NODE_ENV === "production";
	const fleetMode = (env.FLEET_MODE ?? "simulated") as RuntimeSettings["fleetMode"];
	if (fleetMode !== "simulated" && fleetMode !== "live") throw new Error("FLEET_MODE must be simulated or live");
	const services = env.SERVICES
		? env.SERVICES.split(",").map((s) => s.trim()).filter(Boolean)
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
		webhookAllowPrivate: bool(env.WEBHOOK_ALLOW_PRIVATE, !production),
		namespace: env.NAMESPACE ?? "",
		logLevel: env.LOGLEVEL || "info",
		production,
		metricsPort: envNumber(env, "METRICS_PORT", 3030),
		webhookRetryScheduleMs: parseSchedule(env.WEBHOOK_RETRY_SCHEDULE_MS),
		dataDir: env.DATA_DIR || "./data",
		tracing: bool(env.TRACING, false),
	};
}
