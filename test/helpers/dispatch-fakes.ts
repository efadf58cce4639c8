import type { Transaction } from "sequelize";
import { DriverMoves } from "../../services/dispatch/driver-moves";
import { DriverPresence } from "../../services/dispatch/driver-presence";
import { RideSteps } from "../../services/dispatch/ride-steps";
import type { InternalOrder } from "../../contracts/orders";
import type { Point } from "../../contracts/common";
import { destinationPoint } from "../../lib/geo";
import type { DispatchMetrics } from "../../services/dispatch/dispatch.metrics";
import type { DispatchRepo } from "../../services/dispatch/dispatch.repo";
import { readDispatchSettings, type DispatchSettings } from "../../services/dispatch/dispatch.settings";
import type { DispatchLog } from "../../services/dispatch/dispatch.types";
import type { DriverTokensRepo } from "../../services/dispatch/driver-tokens.repo";
import type { DriverRow, DriversRepo } from "../../services/dispatch/drivers.repo";
import type { MatchingRepo } from "../../services/dispatch/matching.repo";
import type { OrdersClient } from "../../services/dispatch/orders-client";
import type { RideMirrorRepo, RideRow } from "../../services/dispatch/ride-mirror.repo";

/**
 * Fakes for the dispatch parts' unit tests (test/unit/dispatch/): rows,
 * orders, a log, and repos whose every method is a `jest.fn()` with a
 * harmless default (nothing found, nothing changed). No broker, no
 * PostgreSQL: a test sets the answers it needs with `mockResolvedValue…`
 * and asserts the calls.
 */

type Fn = (...args: never[]) => unknown;
/** The public methods of `T` (a class's private fields are not in `keyof`). */
type Methods<T> = { [K in keyof T as T[K] extends Fn ? K : never]: T[K] };
/** `T` with every method a typed jest mock. */
export type Fake<T> = { [K in keyof T]: T[K] extends (...args: infer A) => infer R ? jest.Mock<R, A> : T[K] };

/** A fake whose methods start with `defaults` (every method must have one, so a new repo method shows up here at compile time). */
function fakeOf<T>(defaults: { [K in keyof Methods<T>]: Methods<T>[K] }): Fake<Methods<T>> {
	const out: Record<string, jest.Mock> = {};
	for (const [name, impl] of Object.entries(defaults)) out[name] = jest.fn(impl as (...args: unknown[]) => unknown);
	return out as unknown as Fake<Methods<T>>;
}

// ---- places and settings -----------------------------------------------------------

/** Bengaluru: where every fake ride and driver is, unless moved. */
export const BLR: Point = { lat: 12.9716, lng: 77.5946 };

/** The point `metres` from `from` (east by default). */
export function away(from: Point, metres: number, bearingDeg = 90): Point {
	return destinationPoint(from, bearingDeg, metres);
}

/** Dispatch's defaults (search radius 5 km, supply radius 3 km, …), with overrides. */
export function dispatchSettings(overrides: Partial<DispatchSettings> = {}): DispatchSettings {
	return { ...readDispatchSettings({}), ...overrides };
}

// ---- rows and orders ----------------------------------------------------------------

/** An available test-mode cab driver at BLR. */
export function driverRow(overrides: Partial<DriverRow> = {}): DriverRow {
	return {
		id: "drv_1",
		name: "Ravi K",
		phone: "+919800000001",
		vehicle_number: "KA01AB1234",
		service_type: "cab",
		status: "available",
		order_id: null,
		lat: BLR.lat,
		lng: BLR.lng,
		heading: 0,
		location_at: null,
		simulated: false,
		mode: "test",
		wrong_otp_count: 0,
		rev: 1,
		offline_reason: null,
		...overrides,
	};
}

/** A searching test-mode cab ride picked up at BLR, as `lockRide` reads it (no lease running). */
export function rideRow(overrides: Partial<RideRow & { lease_active: boolean }> = {}): RideRow & { lease_active: boolean } {
	const at = new Date("2026-01-01T10:00:00.000Z");
	return {
		order_id: "ord_1",
		service_type: "cab",
		pickup_lat: BLR.lat,
		pickup_lng: BLR.lng,
		drop_lat: away(BLR, 4000).lat,
		drop_lng: away(BLR, 4000).lng,
		partner_id: "prt_1",
		mode: "test",
		state: "searching",
		order_status: "searching",
		order_version: 0,
		order_updated_at: at,
		driver_id: null,
		sandbox: null,
		search_started_at: at,
		next_match_at: at,
		excluded_driver_ids: [],
		drop_outs: 0,
		phase_since: at,
		origin_lat: null,
		origin_lng: null,
		lease_until: null,
		next_location_at: null,
		created_at: at,
		lease_active: false,
		...overrides,
	};
}

/** A searching ride as matching's `lockDueSearch` reads it: not timed out, no pending offer. */
export function dueRide(
	overrides: Partial<RideRow & { timed_out: boolean; pending_expiry: Date | null }> = {},
): RideRow & { timed_out: boolean; pending_expiry: Date | null } {
	const { lease_active: _unused, ...ride } = rideRow();
	return { ...ride, timed_out: false, pending_expiry: null, ...overrides };
}

/** A searching test-mode cab order at BLR, version 1. */
export function internalOrder(overrides: Partial<InternalOrder> = {}): InternalOrder {
	return {
		orderId: "ord_1",
		status: "searching",
		serviceType: "cab",
		pickup: { ...BLR },
		drop: away(BLR, 4000),
		fare: { totalAmount: 120, currency: "INR" },
		distance: 5200,
		duration: 900,
		driver: null,
		metadata: null,
		createdAt: "2026-01-01T10:00:00.000Z",
		updatedAt: "2026-01-01T10:00:01.000Z",
		partnerId: "prt_1",
		mode: "test",
		riderId: "rdr_1",
		version: 1,
		location: null,
		eta: null,
		webhookURL: "https://partner.example/hooks",
		quoteId: null,
		fareBreakdown: null,
		cancelReason: null,
		...overrides,
	};
}

/** The order's driver as orders stores it, from a driver row. */
export function orderDriver(d: DriverRow): NonNullable<InternalOrder["driver"]> {
	return { id: d.id, name: d.name, phone: d.phone, vehicleNumber: d.vehicle_number, location: null };
}

// ---- collaborators --------------------------------------------------------------------

export function fakeLog(): Fake<DispatchLog> {
	return { info: jest.fn(), debug: jest.fn(), trouble: jest.fn() };
}

export function fakeDriversRepo(): Fake<Methods<DriversRepo>> {
	return fakeOf<DriversRepo>({
		insertDriver: async () => undefined,
		driverByPhone: async () => undefined,
		driver: async () => undefined,
		setDriverLocation: async () => undefined,
		setDriverOffline: async () => undefined,
		freeDrivers: async () => [],
		freeOrphanDrivers: async () => [],
		claimDriver: async () => undefined,
		startTrip: async () => undefined,
		holdForRide: async () => [],
		countWrongOtp: async () => undefined,
		listDrivers: async () => [],
		driverCounts: async () => [],
		indexDrivers: async () => [],
		driversChangedSince: async () => [],
		availableInBox: async () => [],
		recordPositions: async () => undefined,
		offlineSilent: async () => [],
		backFromSilence: async () => undefined,
	});
}

export function fakeMirrorRepo(): Fake<Methods<RideMirrorRepo>> {
	return fakeOf<RideMirrorRepo>({
		ride: async () => undefined,
		lockRide: async () => undefined,
		insertRide: async () => true,
		insertNewRides: async (rides) => rides.map(() => true),
		startTransition: async () => undefined,
		sawOrder: async () => undefined,
		closeRide: async () => undefined,
		searchAgain: async () => undefined,
		resumeSearch: async () => undefined,
		assignRide: async () => undefined,
		staleTransitions: async () => [],
		openRideIds: async () => [],
		mirrorStates: async () => [],
		demandRides: async () => [],
	});
}

export function fakeMatchingRepo(): Fake<Methods<MatchingRepo>> {
	return fakeOf<MatchingRepo>({
		// Typed as always finding a row (`rows[0]`), though both answer undefined when none matches.
		lockDueSearch: async () => undefined as never,
		matchAgainAt: async () => undefined,
		matchAgainBackoff: async () => undefined,
		wakeSearches: async () => 0,
		excludeAndRematch: async () => undefined,
		dueSearches: async () => [],
		claimDueLocations: async () => [],
		insertOffer: async () => new Date("2026-01-01T10:00:15.000Z"),
		acceptOffer: async () => false,
		endOffer: async () => false,
		settleOffers: async () => undefined,
		expiredOffers: async () => [],
		offersOfRide: async () => [],
		openOfferOf: async () => undefined as never,
		simulatedOffers: async () => [],
		simulatedRides: async () => [],
		unofferedSearches: async () => [],
	});
}

export function fakeTokensRepo(): Fake<Methods<DriverTokensRepo>> {
	return fakeOf<DriverTokensRepo>({
		insert: async () => null,
		liveToken: async () => undefined,
		revokeOne: async () => "missing" as const,
		revokeAll: async () => 0,
		workingCount: async () => 0,
		list: async () => [],
		wasOffered: async () => false,
	});
}

/** The transaction every fake `tx` passes: the fakes never look inside it. */
export const TX = {} as Transaction;

/** A fake `DispatchRepo`: the part repos, `tx` running its function at once with `TX`, and a database clock. */
export function fakeRepo() {
	return {
		drivers: fakeDriversRepo(),
		mirror: fakeMirrorRepo(),
		matching: fakeMatchingRepo(),
		tokens: fakeTokensRepo(),
		tx: jest.fn(<T>(fn: (t: Transaction) => Promise<T>): Promise<T> => fn(TX)),
		now: jest.fn(async () => new Date("2026-01-01T10:00:00.000Z")),
	};
}
export type FakeRepo = ReturnType<typeof fakeRepo>;

/**
 * The fake where a part's deps ask for `DispatchRepo` (or one of its part
 * repos): those classes have a private `db`, so no plain object is one by
 * type, although the parts only call the public methods the fake has.
 */
export function asDispatchRepo(repo: FakeRepo): DispatchRepo {
	return repo as unknown as DispatchRepo;
}
export function asTokensRepo(repo: Fake<Methods<DriverTokensRepo>>): DriverTokensRepo {
	return repo as unknown as DriverTokensRepo;
}

/** A fake orders client: every call unanswered until a test says otherwise. */
export function fakeOrders(): Fake<Methods<OrdersClient>> {
	return fakeOf<OrdersClient>({
		get: async () => null,
		transition: async () => {
			throw new Error("orders.transition not stubbed");
		},
		listActiveStates: async () => ({ rides: [], nextCursor: null }),
		recordLocation: async () => undefined,
	});
}

export function fakeMetrics(): Fake<Methods<DispatchMetrics>> {
	return fakeOf<DispatchMetrics>({
		offerMade: () => undefined,
		offerEnded: () => undefined,
		matched: () => undefined,
		noDriverFound: () => undefined,
		wrongOtp: () => undefined,
		driverCounts: () => undefined,
	});
}

/** A promise with its resolve exposed (a lookup a test finishes when it wants). */
export function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
	let resolve!: (v: T) => void;
	let reject!: (e: unknown) => void;
	const promise = new Promise<T>((res, rej) => {
		resolve = res;
		reject = rej;
	});
	return { promise, resolve, reject };
}

/** Lets pending promise callbacks (and `setImmediate`s already queued) run: a part's fire-and-forget work settles. */
export function settle(): Promise<void> {
	return new Promise((resolve) => setImmediate(resolve));
}

/**
 * DriverMoves and RideSteps wired as dispatch wires them, over a real
 * DriverPresence and fake repos, index, mirror, matcher, orders and metrics.
 */
export function driverParts() {
	const settings = dispatchSettings();
	const repo = fakeRepo();
	const index = { publish: jest.fn(), moved: jest.fn((): string[] => []), wake: jest.fn() };
	const mirror = { applyOrder: jest.fn(async () => undefined), afterRefusal: jest.fn(async () => undefined), reconcile: jest.fn(async () => undefined) };
	const matcher = { endOffer: jest.fn(async () => false), kick: jest.fn() };
	const orders = fakeOrders();
	const metrics = fakeMetrics();
	const log = fakeLog();
	const announcePositions = jest.fn(async () => undefined);
	const presence = new DriverPresence({ settings, repo: asDispatchRepo(repo).drivers, index, announcePositions, log });
	const moves = new DriverMoves({ repo: asDispatchRepo(repo), index, presence, matcher });
	// The ride steps over the real moves: their driver reads run the moves' code against the same fakes.
	const steps = new RideSteps({ settings, repo: asDispatchRepo(repo), index, presence, moves, mirror, matcher, orders, metrics, log });
	return { settings, repo, index, mirror, matcher, orders, metrics, log, moves, steps, presence };
}
