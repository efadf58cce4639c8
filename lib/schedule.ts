import { PICKUP_AT_PATTERN } from "../contracts/common";
import { envNumber, SettingError, type Env } from "./settings";

/**
 * Scheduled rides (API.md, "Scheduled rides"): the booking window and the
 * lead times that orders (booking, starting dispatch), pricing (quotes for a
 * pickup time) and dispatch (the search's deadline) all read. Read once here
 * so every service, in whatever process, agrees on every default. Pure.
 */
export interface ScheduleSettings {
	/** A pickup time at least this far ahead (`SCHEDULE_MIN_LEAD_SECONDS`, default 30 min). */
	minLeadMs: number;
	/** A pickup time at most this far ahead (`SCHEDULE_MAX_AHEAD_SECONDS`, default 7 days). */
	maxAheadMs: number;
	/** Dispatch starts this long before the pickup time (`SCHEDULE_DISPATCH_LEAD_SECONDS`, default 15 min). */
	dispatchLeadMs: number;
	/**
	 * The search ends `no_driver_found` at the latest this long before the
	 * pickup time, so its webhook reaches the partner before then
	 * (`SCHEDULE_SEARCH_MARGIN_SECONDS`, default 60 s).
	 */
	searchMarginMs: number;
	/** An orders instance looks at the schedule at least this often, and a rider still on another ride is looked at again after it (`SCHEDULE_POLL_SECONDS`, default 60 s). */
	pollMs: number;
}

const seconds = (env: Env, name: string, fallback: number, min: number): number =>
	envNumber(env, name, fallback, (n) => Number.isFinite(n) && n >= min && n <= 30 * 86_400, `a number of seconds ${min}..2592000`) * 1000;

export function readScheduleSettings(env: Env): ScheduleSettings {
	const s: ScheduleSettings = {
		minLeadMs: seconds(env, "SCHEDULE_MIN_LEAD_SECONDS", 30 * 60, 1),
		maxAheadMs: seconds(env, "SCHEDULE_MAX_AHEAD_SECONDS", 7 * 86_400, 1),
		dispatchLeadMs: seconds(env, "SCHEDULE_DISPATCH_LEAD_SECONDS", 15 * 60, 0.1),
		searchMarginMs: seconds(env, "SCHEDULE_SEARCH_MARGIN_SECONDS", 60, 0),
		pollMs: seconds(env, "SCHEDULE_POLL_SECONDS", 60, 0.1),
	};
	// Every booking must be dispatched after it is made and searched for a while before its pickup time.
	if (s.maxAheadMs <= s.minLeadMs)
		throw new SettingError("SCHEDULE_MAX_AHEAD_SECONDS", "more than SCHEDULE_MIN_LEAD_SECONDS", String(env.SCHEDULE_MAX_AHEAD_SECONDS));
	if (s.dispatchLeadMs > s.minLeadMs)
		throw new SettingError("SCHEDULE_DISPATCH_LEAD_SECONDS", "at most SCHEDULE_MIN_LEAD_SECONDS", String(env.SCHEDULE_DISPATCH_LEAD_SECONDS));
	if (s.searchMarginMs >= s.dispatchLeadMs)
		throw new SettingError("SCHEDULE_SEARCH_MARGIN_SECONDS", "less than SCHEDULE_DISPATCH_LEAD_SECONDS", String(env.SCHEDULE_SEARCH_MARGIN_SECONDS));
	return s;
}

export type PickupCheck = { ok: true; pickupAtMs: number } | { ok: false; code: "VALIDATION_ERROR" | "PICKUP_TIME_OUT_OF_RANGE"; message: string };

/**
 * Whether `pickupAt` is a pickup time a ride may be booked for now: a real
 * instant, from the minimum lead to the maximum ahead. The instant is kept in
 * whole seconds (rounded down), as quotes carry it.
 */
export function checkPickupAt(pickupAt: string, nowMs: number, s: Pick<ScheduleSettings, "minLeadMs" | "maxAheadMs">): PickupCheck {
	const parsed = PICKUP_AT_PATTERN.test(pickupAt) && realCalendarTime(pickupAt) ? Date.parse(pickupAt) : NaN;
	if (!Number.isFinite(parsed)) {
		return { ok: false, code: "VALIDATION_ERROR", message: "pickupAt must be an ISO 8601 date and time with an offset, e.g. 2026-12-24T18:30:00+05:30" };
	}
	if (parsed < nowMs + s.minLeadMs || parsed > nowMs + s.maxAheadMs) {
		return {
			ok: false,
			code: "PICKUP_TIME_OUT_OF_RANGE",
			message: `pickupAt must be from ${describe(s.minLeadMs)} to ${describe(s.maxAheadMs)} ahead`,
		};
	}
	return { ok: true, pickupAtMs: Math.floor(parsed / 1000) * 1000 };
}

/** Whether the written date and time exist (Date.parse rolls 2030-02-30 over into March). */
function realCalendarTime(text: string): boolean {
	const [y, mo, d, h, mi, s] = text.slice(0, 19).split(/[-T:]/).map(Number);
	const daysInMonth = new Date(Date.UTC(y, mo, 0)).getUTCDate();
	return mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth && h <= 23 && mi <= 59 && s <= 59;
}

/** When dispatch of a ride picked up at `pickupAtMs` starts. */
export function dispatchAtOf(pickupAtMs: number, s: Pick<ScheduleSettings, "dispatchLeadMs">): number {
	return pickupAtMs - s.dispatchLeadMs;
}

function describe(ms: number): string {
	if (ms % 86_400_000 === 0) return `${ms / 86_400_000} day${ms === 86_400_000 ? "" : "s"}`;
	if (ms % 60_000 === 0) return `${ms / 60_000} minute${ms === 60_000 ? "" : "s"}`;
	return `${ms / 1000} seconds`;
}
