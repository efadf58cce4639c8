import type { ServiceSchema } from "moleculer";

/**
 * Every service this codebase can run, by name. `SERVICES` picks a subset per
 * process; unset means all of them in one process. Each name maps to
 * `services/<name>/<name>.service.ts`, loaded only when asked for.
 */
export const ALL_SERVICES = ["partners", "gateway", "pricing", "riders", "orders", "dispatch", "notifications", "fleet"] as const;
export type ServiceName = (typeof ALL_SERVICES)[number];

export function isServiceName(name: string): name is ServiceName {
	return (ALL_SERVICES as readonly string[]).includes(name);
}

export function loadServiceSchema(name: ServiceName): ServiceSchema {
	// eslint-disable-next-line @typescript-eslint/no-require-imports
	const mod = require(`./${name}/${name}.service`) as { default: ServiceSchema };
	return mod.default;
}
