import { ACTIVE_STATUSES, RIDE_STATUSES, TERMINAL_STATUSES, type Actor, type RideStatus } from "../../../contracts/orders";
import { canTransition, defaultActorFor, emitsEvent, isActive, isRideStatus, isTerminal } from "../../../services/orders/ride-state";

/** The contract's diagram (API.md, "Ride states"), written out as the full list of legal moves. */
const LEGAL: Array<[RideStatus, RideStatus, Actor]> = [
	["searching", "accepted", "driver"],
	["accepted", "arrived", "driver"],
	["arrived", "started", "driver"],
	["started", "dropped", "driver"],
	["searching", "customer_cancelled", "partner"],
	["accepted", "customer_cancelled", "partner"],
	["arrived", "customer_cancelled", "partner"],
	["started", "customer_cancelled", "partner"],
	["searching", "no_driver_found", "system"],
	["accepted", "searching", "driver"],
	["arrived", "searching", "driver"],
	["accepted", "searching", "system"],
	["arrived", "searching", "system"],
	// Scheduled rides: dispatch starts at the lead time, or the rider stayed busy until too late; the partner cancels.
	["scheduled", "searching", "system"],
	["scheduled", "no_driver_found", "system"],
	["scheduled", "customer_cancelled", "partner"],
];

const ACTORS: Actor[] = ["partner", "driver", "system"];

describe("ride state machine", () => {
	it("allows exactly the moves of the contract's diagram, for exactly their actors", () => {
		const legal = new Set(LEGAL.map(([f, t, a]) => `${f}>${t}:${a}`));
		let checked = 0;
		for (const from of RIDE_STATUSES) {
			for (const to of RIDE_STATUSES) {
				for (const actor of ACTORS) {
					expect({ move: `${from}>${to}:${actor}`, ok: canTransition(from, to, actor) }).toEqual({
						move: `${from}>${to}:${actor}`,
						ok: legal.has(`${from}>${to}:${actor}`),
					});
					checked++;
				}
			}
		}
		expect(checked).toBe(8 * 8 * 3);
	});

	it("never leaves a terminal status", () => {
		for (const from of TERMINAL_STATUSES) {
			for (const to of RIDE_STATUSES) {
				for (const actor of ACTORS) expect(canTransition(from, to, actor)).toBe(false);
			}
		}
	});

	it("lets only the partner cancel, from every active status", () => {
		for (const from of ACTIVE_STATUSES) {
			expect(canTransition(from, "customer_cancelled", "partner")).toBe(true);
			expect(canTransition(from, "customer_cancelled", "driver")).toBe(false);
			expect(canTransition(from, "customer_cancelled", "system")).toBe(false);
		}
	});

	it("does not let a started ride go back to searching, nor skip a step", () => {
		expect(canTransition("started", "searching", "driver")).toBe(false);
		expect(canTransition("started", "searching", "system")).toBe(false);
		expect(canTransition("searching", "arrived", "driver")).toBe(false);
		expect(canTransition("accepted", "started", "driver")).toBe(false);
		expect(canTransition("searching", "dropped", "driver")).toBe(false);
		expect(canTransition("accepted", "no_driver_found", "system")).toBe(false);
	});

	it("does not treat staying put as a move", () => {
		for (const s of RIDE_STATUSES) for (const a of ACTORS) expect(canTransition(s, s, a)).toBe(false);
	});

	it("splits statuses into active and terminal", () => {
		expect([...ACTIVE_STATUSES]).toEqual(["searching", "accepted", "arrived", "started"]);
		expect([...TERMINAL_STATUSES]).toEqual(["dropped", "customer_cancelled", "no_driver_found"]);
		// A scheduled ride waits for its dispatch: neither active (dispatch's) nor over.
		for (const s of RIDE_STATUSES) expect(isActive(s)).toBe(s !== "scheduled" && !isTerminal(s));
		expect(isTerminal("scheduled")).toBe(false);
		expect(isRideStatus("accepted")).toBe(true);
		expect(isRideStatus("location_updated")).toBe(false);
		expect(isRideStatus(42)).toBe(false);
	});

	it("sends a webhook for every status but the return to searching", () => {
		for (const s of RIDE_STATUSES) expect(emitsEvent(s)).toBe(s !== "searching");
	});

	it("picks the platform as the internal actor only for no_driver_found, never the partner", () => {
		expect(defaultActorFor("no_driver_found")).toBe("system");
		expect(defaultActorFor("accepted")).toBe("driver");
		expect(defaultActorFor("searching")).toBe("driver");
		expect(defaultActorFor("dropped")).toBe("driver");
		// Internal moves never act for the partner: cancelling stays with orders.cancel.
		expect(defaultActorFor("customer_cancelled")).toBe("driver");
		for (const from of RIDE_STATUSES) expect(canTransition(from, "customer_cancelled", defaultActorFor("customer_cancelled"))).toBe(false);
		// Every other status is reachable by its default actor (a ride is only ever born scheduled).
		for (const to of RIDE_STATUSES) {
			if (to === "customer_cancelled" || to === "scheduled") continue;
			expect({ to, reachable: RIDE_STATUSES.some((from) => canTransition(from, to, defaultActorFor(to))) }).toEqual({ to, reachable: true });
		}
	});
});
