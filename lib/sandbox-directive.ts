/**
 * The sandbox directive a partner put in create-order's `metadata`:
 * `"sandbox": "<directive>"` or `"sandbox": { "scenario": "<directive>" }`
 * (docs/API.md, "The sandbox"). Pure. Orders and dispatch read the stored
 * metadata with this one rule, so they never disagree on what a ride asked
 * for; each decides itself whether the directive applies (dispatch:
 * `sandboxScenario`, orders: manual rides).
 */
export function sandboxDirectiveOf(metadata: unknown): string | null {
	if (typeof metadata !== "object" || metadata === null) return null;
	const sandbox = (metadata as Record<string, unknown>).sandbox;
	const directive = typeof sandbox === "object" && sandbox !== null ? (sandbox as Record<string, unknown>).scenario : sandbox;
	return typeof directive === "string" ? directive : null;
}

/** A ride booked in manual mode: it waits until the partner advances it (test keys, simulated fleet). */
export function isManualDirective(metadata: unknown): boolean {
	return sandboxDirectiveOf(metadata) === "manual";
}
