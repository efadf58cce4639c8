import type { RideStatus } from "../../contracts/orders";
import type { SandboxAdvanceTarget, SandboxStep } from "../../contracts/sandbox";

/**
 * Which steps a sandbox advance takes (POST /ride/sandbox/advance). Pure:
 * from the order's status and the partner's `to`. Without `to`, one step
 * along the ride (scheduled → searching → accepted → arrived → started →
 * dropped); a status `to` walks every step up to it, so each produces the
 * webhooks a real ride would; `no_driver_found` only ends a search;
 * `driver_drop_out` needs a driver on the way (one accepts first when the
 * ride is searching). A `scheduled` ride's first step is `dispatch`: its
 * dispatch starts now, as the schedule starts it at its dispatch time.
 */

/**
 * A step of an advance: one the simulated fleet takes (`fleet.sandboxStep`),
 * or `dispatch`, which orders takes itself (`scheduled → searching`, the
 * schedule's start).
 */
export type AdvanceStep = SandboxStep | "dispatch";

/** The ride's statuses in the order a ride passes them, and the step that leaves each. */
const PATH: ReadonlyArray<[RideStatus, SandboxStep | null]> = [
	["searching", "accept"],
	["accepted", "arrive"],
	["arrived", "start"],
	["started", "drop"],
	["dropped", null],
];

/** The status a step leaves the ride in. */
export const STEP_RESULT: Readonly<Record<AdvanceStep, RideStatus>> = {
	dispatch: "searching",
	accept: "accepted",
	arrive: "arrived",
	start: "started",
	drop: "dropped",
	dropOut: "searching",
	noDriver: "no_driver_found",
};

export type SandboxPlan = { ok: true; steps: AdvanceStep[] } | { ok: false; code: "RIDE_NOT_ACTIVE" | "SANDBOX_TARGET_UNREACHABLE"; message: string };

const position = (status: RideStatus): number => PATH.findIndex(([s]) => s === status);

export function planSandboxSteps(status: RideStatus, to?: SandboxAdvanceTarget): SandboxPlan {
	if (status === "scheduled") {
		// Every target is ahead of a scheduled ride: start its dispatch, then walk on as from `searching`.
		if (to === undefined) return { ok: true, steps: ["dispatch"] };
		const after = planSandboxSteps("searching", to);
		return after.ok ? { ok: true, steps: ["dispatch", ...after.steps] } : after;
	}
	const at = position(status);
	if (at < 0 || PATH[at][1] === null) return { ok: false, code: "RIDE_NOT_ACTIVE", message: `The ride is ${status}: it has ended and cannot be advanced` };
	const unreachable = (why: string): SandboxPlan => ({ ok: false, code: "SANDBOX_TARGET_UNREACHABLE", message: `The ride is ${status}: ${why}` });
	if (to === undefined) return { ok: true, steps: [PATH[at][1] as SandboxStep] };
	if (to === "no_driver_found")
		return status === "searching" ? { ok: true, steps: ["noDriver"] } : unreachable("only a searching ride ends as no_driver_found");
	if (to === "driver_drop_out") {
		if (status === "searching") return { ok: true, steps: ["accept", "dropOut"] };
		if (status === "accepted" || status === "arrived") return { ok: true, steps: ["dropOut"] };
		return unreachable("a driver can only drop out before the ride started");
	}
	const target = position(to);
	if (target <= at) return unreachable(`${to} is not ahead of it`);
	return { ok: true, steps: PATH.slice(at, target).map(([, step]) => step as SandboxStep) };
}
