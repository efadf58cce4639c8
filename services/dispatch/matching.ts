import { randomBytes } from "node:crypto";
import type { OfferCreatedEvent, RideView, SimRide, SimulatedWork } from "../../contracts/dispatch";
import { ApiError } from "../../lib/errors";
import { CoalescedPass } from "../../lib/coalesced-pass";
import type { Point } from "../../contracts/common";
import { haversineMeters } from "../../lib/geo";
import { etaBetween, etaSeconds, isDefinitiveRefusal, isMovingStatus, legTarget, shortError } from "./dispatch-rules";
import { dropOf, pickupOf, toRideView, toSimOffer, toSimRide } from "./dispatch-views";
import type { DispatchMetrics, OfferOutcome } from "./dispatch.metrics";
import type { DispatchRepo } from "./dispatch.repo";
import type { DispatchSettings } from "./dispatch.settings";
import type { DispatchLog } from "./dispatch.types";
import type { DriverIndex } from "./driver-index";
import type { DriverRow } from "./drivers.repo";
import type { OrdersClient } from "./orders-client";
import type { RideMirror } from "./ride-mirror";

/**
 * Matching: the tick that offers searching rides to the nearest available
 * driver (claimed with a conditional update, so instances never double-book),
 * expires unanswered offers, ends rides nobody took in time, and sends
 * `location_updated` at the contract's cadence. Plus the reads of that
 * progress: one ride's offers, and the simulated fleet's inbox.
 */

/** Due rides looked at per statement. */
const DUE_PAGE = 100;

function offerId(): string {
	return `ofr_${randomBytes(12).toString("hex")}`;
}

export interface MatcherDeps {
	settings: Pick<
		DispatchSettings,
		| "retryMatchMs"
		| "retryMaxMs"
		| "dispatchTimeoutMs"
		| "searchRadiusM"
		| "offerTimeoutMs"
		| "transitionLeaseMs"
		| "speedsKmh"
		| "roadFactor"
		| "locationIntervalMs"
		| "liveLocationIntervalMs"
	>;
	repo: Pick<DispatchRepo, "drivers" | "mirror" | "matching" | "tx" | "now">;
	index: Pick<DriverIndex, "candidates" | "forget" | "publish" | "hasCandidate">;
	mirror: Pick<RideMirror, "applyOrder" | "afterRefusal">;
	orders: Pick<OrdersClient, "transition" | "recordLocation">;
	metrics: Pick<DispatchMetrics, "offerMade" | "offerEnded" | "noDriverFound">;
	/** Tells every instance (`dispatch.offerCreated`): the driver's wait may be held by another one. */
	announceOffer: (event: OfferCreatedEvent) => void;
	stopping: () => boolean;
	log: DispatchLog;
}

export class Matcher {
	/** The whole tick (expiries, matching, location events): one at a time, a tick asked for meanwhile runs once more. */
	private readonly ticker: CoalescedPass;
	/** Matching alone, one pass at a time: what `kick` asks for. */
	private readonly matcher: CoalescedPass;

	constructor(private readonly deps: MatcherDeps) {
		this.ticker = new CoalescedPass(() => this.tickSteps(), deps.stopping);
		this.matcher = new CoalescedPass(() => this.step("matching", () => this.matchRides()), deps.stopping);
	}

	/** The passes in progress (to await at stop). */
	get current(): Array<Promise<void>> {
		return [this.ticker.current, this.matcher.current].filter((p): p is Promise<void> => p !== null);
	}

	/**
	 * Matches due rides soon (a new ride, a decline, a driver coming online or
	 * freed): only the matching step, not the whole tick (offer expiries and
	 * location events keep the timer), so a burst of new rides costs one
	 * statement per pass. Passes do not overlap; kicks during one make one more.
	 */
	kick(): void {
		this.matcher.kick();
	}

	/** One pass over due work now (or one more after the running one). */
	tick(): Promise<void> {
		return this.ticker.run();
	}

	private async tickSteps(): Promise<void> {
		await this.step("expireOffers", () => this.expireOffers());
		await this.step("matchRides", () => this.matchRides());
		await this.step("sendLocations", () => this.sendLocations());
	}

	/** A step's failure is logged and the next step still runs. */
	private async step(name: string, run: () => Promise<void>): Promise<void> {
		if (this.deps.stopping()) return;
		try {
			await run();
		} catch (err) {
			this.deps.log.trouble(`Dispatch tick (${name}): ${shortError(err)}`);
		}
	}

	private async expireOffers(): Promise<void> {
		for (const o of await this.deps.repo.matching.expiredOffers()) await this.endOffer(o.driver_id, o.order_id, "expired");
	}

	/**
	 * The rides due a look. The ones nobody is near are backed off in bulk by
	 * the same statement that finds them (`dueSearches`); only those with a
	 * driver in reach, an offer to settle or a deadline reached get a
	 * transaction of their own. A full page with rides backed off asks for
	 * another pass at once, so a burst of new rides does not wait a tick per page.
	 */
	private async matchRides(): Promise<void> {
		const s = this.deps.settings;
		const due = await this.deps.repo.matching.dueSearches(DUE_PAGE, {
			minMs: s.retryMatchMs,
			maxMs: s.retryMaxMs,
			dispatchTimeoutMs: s.dispatchTimeoutMs,
			radiusM: s.searchRadiusM,
		});
		if (due.length === DUE_PAGE && due.some((r) => r.backed_off)) this.kick();
		for (const { order_id, backed_off } of due) {
			if (backed_off) continue;
			if (this.deps.stopping()) return;
			try {
				await this.matchRide(order_id);
			} catch (err) {
				this.deps.log.trouble(`Matching ${order_id}: ${shortError(err)}`);
				// A holder the database refused (e.g. a stale claim): take the order's truth.
				await this.deps.mirror.afterRefusal(order_id, err);
			}
		}
	}

	/**
	 * One matching step for a ride, in one short transaction holding the
	 * ride's row (SKIP LOCKED: another instance on it means skip): end it
	 * when its time is up, else claim the nearest available driver with a
	 * conditional update and record the offer.
	 */
	private async matchRide(orderId: string): Promise<void> {
		const { repo, settings: s, index } = this.deps;
		const result = await repo.tx(async (t) => {
			const ride = await repo.matching.lockDueSearch(orderId, s.dispatchTimeoutMs, t);
			if (!ride) return null;
			if (ride.pending_expiry) {
				await repo.matching.matchAgainAt(orderId, ride.pending_expiry, t);
				return null;
			}
			if (ride.timed_out || ride.sandbox === "no_driver_found") {
				await repo.mirror.startTransition(orderId, "ending", s.transitionLeaseMs, t);
				return { ending: true as const };
			}
			const pickup = pickupOf(ride);
			const excluded = new Set(ride.excluded_driver_ids);
			const tried = new Set<string>();
			let claimed: DriverRow | undefined;
			for (let round = 0; round < 2 && !claimed; round++) {
				// Only drivers of the ride's mode: test rides go to test drivers, live rides to live ones.
				for (const c of await index.candidates(pickup, ride.service_type, ride.mode, new Set([...excluded, ...tried]), t)) {
					tried.add(c.driverId);
					claimed = await repo.drivers.claimDriver(c.driverId, orderId, ride.service_type, ride.mode, t);
					if (claimed) break;
					// Not available after all: this instance's index was behind.
					index.forget(ride.mode, ride.service_type, c.driverId);
				}
			}
			if (!claimed || claimed.lat === null || claimed.lng === null) {
				await repo.matching.matchAgainBackoff(orderId, s.retryMatchMs, s.retryMaxMs, s.dispatchTimeoutMs, t);
				return null;
			}
			const distanceM = haversineMeters({ lat: claimed.lat, lng: claimed.lng }, pickup);
			const eta = etaSeconds(distanceM, s.speedsKmh[ride.service_type], s.roadFactor);
			const expiresAt = await repo.matching.insertOffer(
				{ id: offerId(), orderId, driverId: claimed.id, distanceM: Math.round(distanceM), eta, timeoutMs: s.offerTimeoutMs },
				t,
			);
			await repo.matching.matchAgainAt(orderId, expiresAt, t);
			return { driver: claimed, expiresAt, pickup, drop: dropOf(ride), distanceM: Math.round(distanceM), eta };
		});
		if (!result) return;
		if ("ending" in result) {
			await this.endRide(orderId);
			return;
		}
		index.publish([result.driver]);
		this.deps.metrics.offerMade(result.driver.service_type);
		const { driver, pickup, drop, distanceM, eta } = result;
		this.deps.announceOffer({
			orderId,
			driverId: driver.id,
			simulated: driver.simulated,
			expiresAt: new Date(result.expiresAt).toISOString(),
			pickup,
			drop,
			distanceM,
			eta,
		});
	}

	/** Nobody took the ride in time (or a sandbox advance says so): `searching → no_driver_found` (orders decides if somebody moved first). */
	async endRide(orderId: string): Promise<void> {
		const { orders, mirror, metrics, log } = this.deps;
		try {
			const order = await orders.transition({
				orderId,
				from: "searching",
				to: "no_driver_found",
				reason: "no driver accepted within the dispatch timeout",
			});
			metrics.noDriverFound(order.serviceType);
			await mirror.applyOrder(order, { abandonInFlight: true });
		} catch (err) {
			if (isDefinitiveRefusal(err)) await mirror.afterRefusal(orderId, err);
			else log.trouble(`no_driver_found for ${orderId} not recorded yet: ${shortError(err)} (retried when its lease runs out)`);
		}
	}

	/** Ends a pending offer without a ride for the driver; the ride goes to the next driver. False when there was no such open offer. */
	async endOffer(driverId: string, orderId: string, how: Exclude<OfferOutcome, "accepted">): Promise<boolean> {
		const repo = this.deps.repo;
		const released = await repo.tx(async (t) => {
			const ride = await repo.mirror.lockRide(orderId, t);
			if (!(await repo.matching.endOffer(orderId, driverId, how, t))) return null;
			const drivers = await repo.drivers.freeDrivers(orderId, t, { offeredDriverId: driverId });
			await repo.matching.excludeAndRematch(orderId, driverId, t);
			return { drivers, serviceType: ride?.service_type };
		});
		if (!released) return false;
		if (released.serviceType) this.deps.metrics.offerEnded(how, released.serviceType);
		this.deps.index.publish(released.drivers);
		this.kick();
		return true;
	}

	/**
	 * `location_updated` at the cadence: each due moving ride is claimed by
	 * pushing its next due time forward (SKIP LOCKED, so instances share the
	 * work), then its driver's latest location and ETA go to orders.
	 */
	private async sendLocations(): Promise<void> {
		const { repo, settings: s, orders, mirror, log } = this.deps;
		const due = await repo.matching.claimDueLocations(s.locationIntervalMs, s.liveLocationIntervalMs);
		const work = due.filter((r) => isMovingStatus(r.order_status) && r.d_lat !== null && r.d_lng !== null);
		const send = async (r: (typeof work)[number]) => {
			const location = { lat: r.d_lat as number, lng: r.d_lng as number, heading: Math.round(r.d_heading ?? 0) % 360 };
			const target = legTarget(r.order_status, pickupOf(r), dropOf(r)) as Point;
			const eta = etaBetween(location, target, r.service_type, s.speedsKmh, s.roadFactor);
			try {
				await orders.recordLocation({ orderId: r.order_id, location, eta });
			} catch (err) {
				if (isDefinitiveRefusal(err)) await mirror.afterRefusal(r.order_id, err);
				else log.trouble(`Location event for ${r.order_id}: ${shortError(err)}`);
			}
		};
		for (let i = 0; i < work.length; i += 20) await Promise.all(work.slice(i, i + 20).map(send));
	}

	/**
	 * The simulated fleet's inbox: pending offers and rides of simulated
	 * drivers (with the phase and when it began, so the simulator derives
	 * where each driver is), and searching rides with no driver in reach.
	 */
	async simulatedWork(): Promise<SimulatedWork> {
		const { repo, index } = this.deps;
		const now = await repo.now();
		const offers = await repo.matching.simulatedOffers();
		const rides = await repo.matching.simulatedRides();
		const searching = await repo.matching.unofferedSearches();
		return {
			serverTime: new Date(now).toISOString(),
			offers: offers.map(toSimOffer),
			rides: rides.map(toSimRide).filter((r): r is SimRide => r !== null),
			searching: searching.map((r) => ({
				orderId: r.order_id,
				serviceType: r.service_type,
				pickup: pickupOf(r),
				sandbox: r.sandbox,
				hasCandidate: index.hasCandidate(r),
			})),
		};
	}

	async rideView(orderId: string): Promise<RideView> {
		const ride = await this.deps.repo.mirror.ride(orderId);
		if (!ride) throw new ApiError("ORDER_NOT_FOUND", "Dispatch does not know this ride");
		return toRideView(ride, await this.deps.repo.matching.offersOfRide(orderId));
	}
}
