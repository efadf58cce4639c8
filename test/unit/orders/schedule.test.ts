import { checkPickupAt, dispatchAtOf, readScheduleSettings } from "../../../lib/schedule";
import { SettingError } from "../../../lib/settings";
import { ScheduleLoop, scheduledStep } from "../../../services/orders/schedule";
import type { MoveResult, OrdersRepo } from "../../../services/orders/orders.repo";
import { orderRowFixture } from "../../helpers/order-rows";

const NOW = Date.UTC(2026, 11, 24, 12, 0, 0);
const S = readScheduleSettings({});

describe("schedule settings", () => {
	it("defaults to 30 minutes to 7 days ahead, dispatch 15 minutes before, search ending 1 minute before, a poll a minute", () => {
		expect(S).toEqual({ minLeadMs: 1_800_000, maxAheadMs: 604_800_000, dispatchLeadMs: 900_000, searchMarginMs: 60_000, pollMs: 60_000 });
	});

	it("refuses settings that could not dispatch a booking in time, naming the setting", () => {
		expect(() => readScheduleSettings({ SCHEDULE_DISPATCH_LEAD_SECONDS: "3600" })).toThrow(/SCHEDULE_DISPATCH_LEAD_SECONDS/);
		expect(() => readScheduleSettings({ SCHEDULE_SEARCH_MARGIN_SECONDS: "900" })).toThrow(/SCHEDULE_SEARCH_MARGIN_SECONDS/);
		expect(() => readScheduleSettings({ SCHEDULE_MAX_AHEAD_SECONDS: "60" })).toThrow(SettingError);
		expect(() => readScheduleSettings({ SCHEDULE_MIN_LEAD_SECONDS: "soon" })).toThrow(/SCHEDULE_MIN_LEAD_SECONDS/);
	});
});

describe("pickupAt", () => {
	const at = (ms: number) => new Date(NOW + ms).toISOString();

	it("accepts the window's ends and any offset, keeping whole seconds", () => {
		expect(checkPickupAt(at(S.minLeadMs), NOW, S)).toEqual({ ok: true, pickupAtMs: NOW + S.minLeadMs });
		expect(checkPickupAt(at(S.maxAheadMs), NOW, S)).toEqual({ ok: true, pickupAtMs: NOW + S.maxAheadMs });
		expect(checkPickupAt("2026-12-24T18:00:00.999+05:30", NOW, S)).toEqual({ ok: true, pickupAtMs: NOW + 30 * 60_000 });
		expect(dispatchAtOf(NOW + 3_600_000, S)).toBe(NOW + 2_700_000);
	});

	it("refuses a time outside the window, or one badly written or not in the calendar", () => {
		expect(checkPickupAt(at(S.minLeadMs - 1), NOW, S)).toMatchObject({
			ok: false,
			code: "PICKUP_TIME_OUT_OF_RANGE",
			message: expect.stringMatching(/30 minutes to 7 days/),
		});
		expect(checkPickupAt(at(S.maxAheadMs + 1000), NOW, S)).toMatchObject({ ok: false, code: "PICKUP_TIME_OUT_OF_RANGE" });
		expect(checkPickupAt(at(-60_000), NOW, S)).toMatchObject({ ok: false, code: "PICKUP_TIME_OUT_OF_RANGE" });
		for (const bad of ["2026-12-25T10:00:00", "2026-12-25 10:00:00Z", "2026-12-25", "2027-02-29T10:00:00Z", "2026-12-25T24:00:00Z", "next tuesday"]) {
			expect({ bad, check: checkPickupAt(bad, NOW, S) }).toMatchObject({ bad, check: { ok: false, code: "VALIDATION_ERROR" } });
		}
	});
});

describe("a due scheduled ride", () => {
	it("starts when its rider is free, waits while busy, and gives up once its search could not end before pickup", () => {
		expect(scheduledStep({ riderBusy: false, tooLate: false })).toBe("start");
		expect(scheduledStep({ riderBusy: true, tooLate: false })).toBe("wait");
		expect(scheduledStep({ riderBusy: true, tooLate: true })).toBe("give_up");
		expect(scheduledStep({ riderBusy: false, tooLate: true })).toBe("give_up");
	});
});

describe("the schedule loop", () => {
	function fakeRepo(due: number, next: Date | null) {
		let left = due;
		const repo = {
			takes: 0,
			nextReads: 0,
			async takeDueScheduled() {
				repo.takes++;
				if (left === 0) return null;
				left--;
				const row = orderRowFixture({ status: "scheduled" });
				return { step: "start" as const, row, moved: { row: { ...row, status: "searching" as const }, eventId: "evt_1" } as MoveResult };
			},
			async nextDispatchAt() {
				repo.nextReads++;
				return next;
			},
		};
		return repo;
	}

	it("takes the due rides one by one, announces each, then arms for the next due time: work per due ride, not per backlog", async () => {
		const repo = fakeRepo(3, new Date(Date.now() + 3_600_000));
		const moved: string[] = [];
		const loop = new ScheduleLoop({
			orders: repo as unknown as Pick<OrdersRepo, "nextDispatchAt" | "takeDueScheduled">,
			settings: { searchMarginMs: 1000, pollMs: 60_000 },
			onMoved: (_from, r) => moved.push(r.row.status),
			log: { warn: () => undefined },
		});
		loop.start();
		for (let i = 0; i < 100 && repo.nextReads === 0; i++) await new Promise((r) => setTimeout(r, 5));
		await loop.stop();
		expect(moved).toEqual(["searching", "searching", "searching"]);
		// Three rides and the take that found none; one read of the next due time.
		expect(repo.takes).toBe(4);
		expect(repo.nextReads).toBe(1);
	});

	it("fires early for a booking due before the armed time, and not at all once stopped", async () => {
		const repo = fakeRepo(0, null);
		const loop = new ScheduleLoop({
			orders: repo as unknown as Pick<OrdersRepo, "nextDispatchAt" | "takeDueScheduled">,
			settings: { searchMarginMs: 1000, pollMs: 60_000 },
			onMoved: () => undefined,
			log: { warn: () => undefined },
		});
		loop.start();
		for (let i = 0; i < 100 && repo.nextReads === 0; i++) await new Promise((r) => setTimeout(r, 5));
		expect(repo.takes).toBe(1);
		loop.noteDue(Date.now() + 20);
		for (let i = 0; i < 100 && repo.takes < 2; i++) await new Promise((r) => setTimeout(r, 5));
		expect(repo.takes).toBe(2);
		await loop.stop();
		loop.noteDue(Date.now());
		await new Promise((r) => setTimeout(r, 30));
		expect(repo.takes).toBe(2);
	});
});
