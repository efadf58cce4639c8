import type { ServiceSchema } from "moleculer";

/**
 * Every service this codebase can run, by name. `SERVICES` picks a subset per
 * process; unset means all of them in one process. Each name maps to
 * `services/<name>/<name>.service.ts`, loaded only when asked for, except
 * where SERVICE_FILES says otherwise.
 */
export const ALL_SERVICES = ["partners", "gateway", "pricing", "riders", "orders", "dispatch", "notifications", "fleet"] as const;
export type ServiceName = (typeof ALL_SERVICES)[number];

export function isServiceName(name: string): name is ServiceName {
	return (ALL_SERVICES as readonly string[]).includes(name);
}

/** Services that live in another service's folder: the simulated fleet is dispatch's (a client of its driver actions). */
const SERVICE_FILES: Partial<Record<ServiceName, string>> = { fleet: "./dispatch/fleet.service" };

export function loadServiceSchema(name: ServiceName): ServiceSchema {
	// eslint-disable-next-line @typescript-eslint/no-require-imports
	const mod = require(SERVICE_FILES[name] ?? `./${name}/${name}.service`) as { default: ServiceSchema };
	return mod.default;
}
