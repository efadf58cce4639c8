import type { FleetMode } from "../../contracts/dispatch";
import { ORDERS_RETRY_AFTER_SECONDS, type Order } from "../../contracts/orders";
import type { KeyMode } from "../../contracts/partners";
import type { SandboxAdvanceParams } from "../../contracts/sandbox";
import { ApiError, orderNotFound } from "../../lib/errors";
import { isPeerUnavailable } from "../../lib/peer-unavailable";
import { isManualDirective } from "../../lib/sandbox-directive";
import { toOrder, type OrderRow } from "./order-view";
import { planSandboxSteps, STEP_RESULT, type AdvanceStep } from "./sandbox-plan";

/**
 * POST /ride/sandbox/advance: moves a manual sandbox ride one step, or
 * step by step to `to` (sandbox-plan.ts), and answers the ride as
 * /ride/status does. Orders owns the order and decides the steps; the
 * simulated fleet takes each one as the driver (`fleet.sandboxStep`), so
 * every step runs the live path and writes the webhooks a real ride
 * writes. A manual `scheduled` ride's first step is orders' own: its
 * dispatch starts now (`startDispatch`, the schedule's start and its
 * `searching` webhook), refused with `409 RIDER_HAS_ACTIVE_RIDE` while its
 * rider is on another ride (the schedule makes it wait then). One advance
 * per ride at a time: a lease on the order (a conditional update) makes a
 * racing second one a 409, never a double step.
 */

/** An advance takes a few calls per step; a crashed one frees the ride after this. */
export const ADVANCE_LEASE_MS = 30_000;

export interface SandboxAdvanceDeps {
	fleetMode: FleetMode;
	findOrder(orderId: string, scope: { partnerId: string; mode: KeyMode }): Promise<OrderRow | null>;
	lease: { takeLease(orderId: string, ms: number): Promise<boolean>; releaseLease(orderId: string): Promise<void> };
	/** One step by the simulated fleet (`fleet.sandboxStep`). */
	takeStep(orderId: string, step: Exclude<AdvanceStep, "dispatch">): Promise<void>;
	/**
	 * A scheduled ride's dispatch starts now (`scheduled → searching`, its hints
	 * sent): "started", "rider_busy" (nothing changed), or "not_scheduled" when
	 * it had moved already (the re-read after the step judges that).
	 */
	startDispatch(orderId: string): Promise<"started" | "rider_busy" | "not_scheduled">;
	log: { debug(message: string): void };
}

export async function sandboxAdvance(deps: SandboxAdvanceDeps, params: SandboxAdvanceParams, caller: { partnerId: string; mode: KeyMode }): Promise<Order> {
	if (caller.mode === "live")
		throw new ApiError("SANDBOX_ONLY", "Sandbox controls are for test keys (ride_test_…): live rides are driven by real drivers only");
	if (deps.fleetMode !== "simulated") {
		throw new ApiError("SANDBOX_UNAVAILABLE", "This deployment runs no simulated fleet (FLEET_MODE=live): test rides wait for test drivers");
	}
	const { orderId } = params;
	const scope = { partnerId: caller.partnerId, mode: caller.mode };
	const first = await deps.findOrder(orderId, scope);
	if (!first) throw orderNotFound();
	if (!isManualDirective(first.metadata)) {
		throw new ApiError("SANDBOX_NOT_MANUAL", 'Only a ride booked with "metadata": { "sandbox": "manual" } waits to be advanced');
	}
	const plan = planSandboxSteps(first.status, params.to);
	if (!plan.ok) throw new ApiError(plan.code, plan.message);

	if (!(await deps.lease.takeLease(orderId, ADVANCE_LEASE_MS))) {
		throw new ApiError("CONFLICT", "Another advance of this ride is in progress; try again when it has answered", {
			retryAfter: ORDERS_RETRY_AFTER_SECONDS,
		});
	}
	try {
		// Judged again under the lease: the ride may have moved since the first read (a cancel, an advance that just ended).
		let row = (await deps.findOrder(orderId, scope)) ?? first;
		const steps = planSandboxSteps(row.status, params.to);
		if (!steps.ok) throw new ApiError(steps.code, steps.message);
		for (const step of steps.steps) {
			await takeStep(deps, orderId, step);
			row = (await deps.findOrder(orderId, scope)) ?? row;
			// Somebody else moved the ride meanwhile (the partner cancelled): stop and say so.
			if (row.status !== STEP_RESULT[step]) {
				throw new ApiError("CONFLICT", `The ride changed while it was advanced (it is ${row.status})`, { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
			}
		}
		return toOrder(row);
	} finally {
		await deps.lease.releaseLease(orderId).catch((err: unknown) => deps.log.debug(`Advance lease of ${orderId} kept until it runs out: ${String(err)}`));
	}
}

/** A step's refusal by a service below (a driver action's 409, …) is a conflict for the partner; outages pass through as they are. */
async function takeStep(deps: SandboxAdvanceDeps, orderId: string, step: AdvanceStep): Promise<void> {
	if (step === "dispatch") {
		if ((await deps.startDispatch(orderId)) === "rider_busy") {
			throw new ApiError(
				"RIDER_HAS_ACTIVE_RIDE",
				"The rider is on another active ride: this scheduled ride waits until that one has ended (as the schedule makes it wait); advance it then",
			);
		}
		return;
	}
	try {
		await deps.takeStep(orderId, step);
	} catch (err) {
		const e = err as { code?: number; type?: string; message?: string };
		deps.log.debug(`Sandbox step ${step} of ${orderId}: ${e?.type ?? "ERROR"}: ${e?.message ?? String(err)}`);
		if (isPeerUnavailable(err)) {
			throw new ApiError("SERVICE_UNAVAILABLE", "A required service is temporarily unavailable", { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
		}
		if (e?.type === "SANDBOX_UNAVAILABLE" || e?.type === "SERVICE_UNAVAILABLE") throw err;
		if (typeof e?.code === "number" && e.code >= 400 && e.code < 500) {
			throw new ApiError("CONFLICT", `The ${step} step could not be taken now; try again`, { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
		}
		throw err;
	}
}
