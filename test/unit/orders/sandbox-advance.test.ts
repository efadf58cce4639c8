import { sandboxDirectiveOf, isManualDirective } from "../../../lib/sandbox-directive";
import { sandboxAdvance, type SandboxAdvanceDeps } from "../../../services/orders/sandbox-advance";
import { planSandboxSteps, type AdvanceStep } from "../../../services/orders/sandbox-plan";
import type { OrderRow } from "../../../services/orders/order-view";
import { orderRowFixture } from "../../helpers/order-rows";

describe("planSandboxSteps (which steps an advance takes)", () => {
	it("takes one step along the ride without a target", () => {
		expect(planSandboxSteps("searching")).toEqual({ ok: true, steps: ["accept"] });
		expect(planSandboxSteps("accepted")).toEqual({ ok: true, steps: ["arrive"] });
		expect(planSandboxSteps("arrived")).toEqual({ ok: true, steps: ["start"] });
		expect(planSandboxSteps("started")).toEqual({ ok: true, steps: ["drop"] });
	});

	it("walks every step up to a status target", () => {
		expect(planSandboxSteps("searching", "accepted")).toEqual({ ok: true, steps: ["accept"] });
		expect(planSandboxSteps("searching", "arrived")).toEqual({ ok: true, steps: ["accept", "arrive"] });
		expect(planSandboxSteps("searching", "dropped")).toEqual({ ok: true, steps: ["accept", "arrive", "start", "drop"] });
		expect(planSandboxSteps("arrived", "dropped")).toEqual({ ok: true, steps: ["start", "drop"] });
	});

	it("ends only a search as no_driver_found, and drops a driver out only before the start", () => {
		expect(planSandboxSteps("searching", "no_driver_found")).toEqual({ ok: true, steps: ["noDriver"] });
		expect(planSandboxSteps("searching", "driver_drop_out")).toEqual({ ok: true, steps: ["accept", "dropOut"] });
		expect(planSandboxSteps("accepted", "driver_drop_out")).toEqual({ ok: true, steps: ["dropOut"] });
		expect(planSandboxSteps("arrived", "driver_drop_out")).toEqual({ ok: true, steps: ["dropOut"] });
		for (const [status, to] of [
			["accepted", "no_driver_found"],
			["started", "driver_drop_out"],
			["started", "accepted"],
			["arrived", "arrived"],
		] as const) {
			expect(planSandboxSteps(status, to)).toMatchObject({ ok: false, code: "SANDBOX_TARGET_UNREACHABLE" });
		}
	});

	it("starts a scheduled ride's dispatch first, then walks on as from searching", () => {
		expect(planSandboxSteps("scheduled")).toEqual({ ok: true, steps: ["dispatch"] });
		expect(planSandboxSteps("scheduled", "accepted")).toEqual({ ok: true, steps: ["dispatch", "accept"] });
		expect(planSandboxSteps("scheduled", "dropped")).toEqual({ ok: true, steps: ["dispatch", "accept", "arrive", "start", "drop"] });
		expect(planSandboxSteps("scheduled", "no_driver_found")).toEqual({ ok: true, steps: ["dispatch", "noDriver"] });
		expect(planSandboxSteps("scheduled", "driver_drop_out")).toEqual({ ok: true, steps: ["dispatch", "accept", "dropOut"] });
	});

	it("refuses every step of an ended ride", () => {
		for (const status of ["dropped", "customer_cancelled", "no_driver_found"] as const) {
			expect(planSandboxSteps(status)).toMatchObject({ ok: false, code: "RIDE_NOT_ACTIVE" });
			expect(planSandboxSteps(status, "dropped")).toMatchObject({ ok: false, code: "RIDE_NOT_ACTIVE" });
		}
	});
});

describe("sandbox directives in metadata", () => {
	it("reads both shapes, and nothing else", () => {
		expect(sandboxDirectiveOf({ sandbox: "manual" })).toBe("manual");
		expect(sandboxDirectiveOf({ sandbox: { scenario: "fast" } })).toBe("fast");
		expect(sandboxDirectiveOf({ sandbox: { scenario: 3 } })).toBeNull();
		expect(sandboxDirectiveOf({ other: "manual" })).toBeNull();
		expect(sandboxDirectiveOf(null)).toBeNull();
		expect(isManualDirective({ sandbox: { scenario: "manual" } })).toBe(true);
		expect(isManualDirective({ sandbox: "fast" })).toBe(false);
	});
});

describe("sandboxAdvance (the use case, with its services faked)", () => {
	const CALLER = { partnerId: "ptn_1", mode: "test" as const };

	function fixture(
		over: Partial<SandboxAdvanceDeps> = {},
		metadata: Record<string, unknown> = { sandbox: "manual" },
		from: OrderRow["status"] = "searching",
	) {
		let status = from;
		const steps: AdvanceStep[] = [];
		const leases = { taken: 0, released: 0 };
		const deps: SandboxAdvanceDeps = {
			fleetMode: "simulated",
			findOrder: async (orderId) => orderRowFixture({ id: orderId, status, metadata, partner_id: CALLER.partnerId, mode: "test" }),
			lease: {
				takeLease: async () => {
					leases.taken++;
					return true;
				},
				releaseLease: async () => {
					leases.released++;
				},
			},
			takeStep: async (_orderId, step) => {
				steps.push(step);
				status = (
					{ accept: "accepted", arrive: "arrived", start: "started", drop: "dropped", dropOut: "searching", noDriver: "no_driver_found" } as const
				)[step];
			},
			startDispatch: async () => {
				steps.push("dispatch");
				status = "searching";
				return "started";
			},
			log: { debug: () => undefined },
			...over,
		};
		return { deps, steps, leases };
	}

	const codeOf = (p: Promise<unknown>) =>
		p.then(
			() => "resolved",
			(err: { type?: string; code?: number }) => `${err.code} ${err.type}`,
		);

	it("refuses a live key (403) and a deployment without the simulated fleet (409) before reading anything", async () => {
		const { deps, steps, leases } = fixture();
		expect(await codeOf(sandboxAdvance(deps, { orderId: "ord_1" }, { ...CALLER, mode: "live" }))).toBe("403 SANDBOX_ONLY");
		expect(await codeOf(sandboxAdvance({ ...deps, fleetMode: "live" }, { orderId: "ord_1" }, CALLER))).toBe("409 SANDBOX_UNAVAILABLE");
		expect(steps).toEqual([]);
		expect(leases.taken).toBe(0);
	});

	it("refuses an unknown order (404) and a ride not booked in manual mode (409)", async () => {
		expect(await codeOf(sandboxAdvance(fixture({ findOrder: async () => null }).deps, { orderId: "ord_x" }, CALLER))).toBe("404 ORDER_NOT_FOUND");
		expect(await codeOf(sandboxAdvance(fixture({}, { sandbox: "fast" }).deps, { orderId: "ord_1" }, CALLER))).toBe("409 SANDBOX_NOT_MANUAL");
	});

	it("takes the planned steps under the lease, releases it, and answers the ride's status", async () => {
		const { deps, steps, leases } = fixture();
		const order = await sandboxAdvance(deps, { orderId: "ord_1", to: "started" }, CALLER);
		expect(order).toMatchObject({ orderId: "ord_1", status: "started" });
		expect(steps).toEqual(["accept", "arrive", "start"]);
		expect(leases).toEqual({ taken: 1, released: 1 });
	});

	it("answers 409 CONFLICT when another advance holds the lease, taking no step", async () => {
		const { deps, steps } = fixture({ lease: { takeLease: async () => false, releaseLease: async () => undefined } });
		expect(await codeOf(sandboxAdvance(deps, { orderId: "ord_1" }, CALLER))).toBe("409 CONFLICT");
		expect(steps).toEqual([]);
	});

	it("turns a step refused below into 409 CONFLICT and a missing fleet into 503, releasing the lease", async () => {
		const refused = fixture({ takeStep: async () => Promise.reject(Object.assign(new Error("x"), { code: 409, type: "INVALID_TRANSITION" })) });
		expect(await codeOf(sandboxAdvance(refused.deps, { orderId: "ord_1" }, CALLER))).toBe("409 CONFLICT");
		expect(refused.leases.released).toBe(1);
		const gone = fixture({
			takeStep: async () => Promise.reject(Object.assign(new Error("x"), { name: "ServiceNotFoundError", code: 404, type: "SERVICE_NOT_FOUND" })),
		});
		expect(await codeOf(sandboxAdvance(gone.deps, { orderId: "ord_1" }, CALLER))).toBe("503 SERVICE_UNAVAILABLE");
	});

	it("stops with 409 CONFLICT when the ride did not end up where the step leads (moved by somebody else)", async () => {
		const { deps } = fixture({ takeStep: async () => undefined });
		expect(await codeOf(sandboxAdvance(deps, { orderId: "ord_1" }, CALLER))).toBe("409 CONFLICT");
	});

	it("starts a scheduled ride's dispatch itself, then has the fleet take the rest", async () => {
		const { deps, steps, leases } = fixture({}, { sandbox: "manual" }, "scheduled");
		expect(await sandboxAdvance(deps, { orderId: "ord_1", to: "arrived" }, CALLER)).toMatchObject({ status: "arrived" });
		expect(steps).toEqual(["dispatch", "accept", "arrive"]);
		expect(leases).toEqual({ taken: 1, released: 1 });
	});

	it("refuses a scheduled ride whose rider is on another ride with 409 RIDER_HAS_ACTIVE_RIDE, taking no fleet step", async () => {
		const busy = fixture({ startDispatch: async () => "rider_busy" }, { sandbox: "manual" }, "scheduled");
		expect(await codeOf(sandboxAdvance(busy.deps, { orderId: "ord_1", to: "dropped" }, CALLER))).toBe("409 RIDER_HAS_ACTIVE_RIDE");
		expect(busy.steps).toEqual([]);
		expect(busy.leases.released).toBe(1);
	});

	it("takes a scheduled ride the schedule started meanwhile as started, and one cancelled meanwhile as a conflict", async () => {
		let status: OrderRow["status"] = "scheduled";
		const raced = fixture(
			{
				findOrder: async (orderId) =>
					orderRowFixture({ id: orderId, status, metadata: { sandbox: "manual" }, partner_id: CALLER.partnerId, mode: "test" }),
				startDispatch: async () => {
					status = "searching";
					return "not_scheduled";
				},
			},
			{ sandbox: "manual" },
			"scheduled",
		);
		expect(await sandboxAdvance(raced.deps, { orderId: "ord_1" }, CALLER)).toMatchObject({ status: "searching" });
		status = "scheduled";
		const cancelled = fixture({
			findOrder: raced.deps.findOrder,
			startDispatch: async () => {
				status = "customer_cancelled";
				return "not_scheduled";
			},
		});
		expect(await codeOf(sandboxAdvance(cancelled.deps, { orderId: "ord_1" }, CALLER))).toBe("409 CONFLICT");
	});
});
