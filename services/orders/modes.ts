import type { KeyMode } from "../../contracts/partners";

/**
 * Key modes in orders (pure). Every partner call carries its key's mode
 * (`ctx.meta.mode`, set by the gateway); a call without one (the REPL) is
 * a test call.
 * Sandbox controls steer simulated drivers, so they belong to test keys:
 * on a live key `metadata.sandbox` is refused, never silently ignored.
 */

export function modeOf(meta: { mode?: KeyMode | string }): KeyMode {
	return meta.mode === "live" ? "live" : "test";
}

/** Why this create-order may not carry `metadata.sandbox`, or null when it may. */
export function sandboxRefusal(mode: KeyMode, metadata: Record<string, unknown> | undefined): { field: string; message: string } | null {
	if (mode !== "live" || metadata === undefined || metadata === null || !Object.prototype.hasOwnProperty.call(metadata, "sandbox")) return null;
	return {
		field: "metadata.sandbox",
		message: "metadata.sandbox (sandbox controls) is only accepted with a test key (ride_test_…); live rides are driven by real drivers only",
	};
}

/** The rider OTP helper stands in for a rider of a simulated ride: test rides only. */
export function otpReadable(orderMode: KeyMode): boolean {
	return orderMode === "test";
}
