import { createHash, timingSafeEqual } from "node:crypto";

/**
 * The rider's OTP as a guard on `arrived → started`: compared in constant
 * time, and a limited number of tries per order and driver. Every try is counted
 * (reserved atomically in PostgreSQL before the comparison, so concurrent
 * guesses through any number of orders or dispatch instances cannot exceed
 * the limit); once `maxTries` tries went wrong the start is locked for that
 * order: the driver drops out (the ride goes back to searching, which gives
 * the next driver a fresh set of tries: transition-plan.ts), the partner
 * cancels, or an operator unlocks it (`orders.unlockOtp`). Pure.
 */

/** Default number of OTP tries per order (`OTP_MAX_TRIES`). */
export const DEFAULT_OTP_MAX_TRIES = 5;

const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest();

/** Whether `given` is the OTP, in time independent of where they differ (equal-length digests). */
export function otpMatches(given: unknown, expected: string): boolean {
	if (typeof given !== "string") return false;
	return timingSafeEqual(digest(given), digest(expected));
}

/** Whether another try may be made after `tries` tries (each reserved try counts, a right one ends the ride's need for more). */
export function otpTryAllowed(tries: number, maxTries: number): boolean {
	return tries < maxTries;
}

/** Tries left after `tries` were made. */
export function otpTriesLeft(tries: number, maxTries: number): number {
	return Math.max(0, maxTries - tries);
}
