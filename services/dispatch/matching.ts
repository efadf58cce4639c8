import { randomBytes } from "node:crypto";
import { DISPATCH_EVENTS, type OfferCreatedEvent, type SimRide } from "../../contracts/dispatch";
import type { RecordLocationParams } from "../../contracts/orders";
import { ApiError } from "../../lib/errors";
import { haversineMeters, type LatLng } from "../../lib/geo";
import { etaBetween, etaSeconds, isDefinitiveRefusal, isMovingStatus, legTarget, shortError } from "./dispatch-rules";
import { dropOf, pickupOf, toRideView, toSimOffer, toSimRide } from "./dispatch-views";
import type { DriverRow } from "./drivers.repo";
import type { DispatchPart } from "./dispatch.types";

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

export const matchingMethods: DispatchPart<
	"kick" | "tick" | "tickSteps" | "matchPass" | "expireOffers" | "matchRides" | "matchRide" | "endRide" | "endOffer" | "sendLocations" | "simulatedWork" | "rideView"
> = {
	/**
	 * Matches due rides soon (a new ride, a decline, a driver coming online or
	 * freed): only the matching step, not the whole tick (offer expiries and
	 * location events keep the timer), so a burst of new rides costs one
	 * statement per pass. Passes do not overlap; kicks during one make one more.
	 */
	kick() {
		this.matcher.kick();
	},

	/** One pass over due work now (or one more after the running one). */
	async tick() {
		return this.ticker.run();
	},

	/** The steps of one tick: expired offers, rides to match or end, location events. */
	async tickSteps() {
		for (const step of [this.expireOffers, this.matchRides, this.sendLocations]) {
			if (this.stopping) return;
			try {
				await step.call(this);
			} catch (err) {
				this.trouble(`Dispatch tick (${step.name}): ${shortError(err)}`);
			}
		}
	},

	/** The matcher's pass: the matching step alone (a tick's may run beside it; the row locks share the rides). */
	async matchPass() {
		if (this.stopping) return;
		try {
			await this.matchRides();
		} catch (err) {
			this.trouble(`Dispatch matching: ${shortError(err)}`);
		}
	},

	async expireOffers() {
		for (const o of await this.repo.matching.expiredOffers()) await this.endOffer(o.driver_id, o.order_id, "expired");
	},

	/**
	 * The rides due a look. The ones nobody is near are backed off in bulk by
	 * the same statement that finds them (`dueSearches`); only those with a
	 * driver in reach, an offer to settle or a deadline reached get a
	 * transaction of their own. A full page with rides backed off asks for
	 * another pass at once, so a burst of new rides does not wait a tick per page.
	 */
	async matchRides() {
		const due = await this.repo.matching.dueSearches(DUE_PAGE, {
			minMs: this.cfg.retryMatchMs,
			maxMs: this.cfg.retryMaxMs,
			dispatchTimeoutMs: this.cfg.dispatchTimeoutMs,
			radiusM: this.cfg.searchRadiusM,
		});
		if (due.length === DUE_PAGE && due.some((r) => r.backed_off)) this.kick();
		for (const { order_id, backed_off } of due) {
			if (backed_off) continue;
			if (this.stopping) return;
			try {
				await this.matchRide(order_id);
			} catch (err) {
				this.trouble(`Matching ${order_id}: ${shortError(err)}`);
				// A holder the database refused (e.g. a stale claim): take the order's truth.
				await this.afterRefusal(order_id, err);
			}
		}
	},

	/**
	 * One matching step for a ride, in one short transaction holding the
	 * ride's row (SKIP LOCKED: another instance on it means skip): end it
	 * when its time is up, else claim the nearest available driver with a
	 * conditional update and record the offer.
	 */
	async matchRide(orderId) {
		const repo = this.repo;
		const result = await repo.tx(async (t) => {
			const ride = await repo.matching.lockDueSearch(orderId, this.cfg.dispatchTimeoutMs, t);
			if (!ride) return null;
			if (ride.pending_expiry) {
				await repo.matching.matchAgainAt(orderId, ride.pending_expiry, t);
				return null;
			}
			if (ride.timed_out || ride.sandbox === "no_driver_found") {
				await repo.mirror.startTransition(orderId, "ending", this.cfg.transitionLeaseMs, t);
				return { ending: true as const };
			}
			const pickup = pickupOf(ride);
			const excluded = new Set(ride.excluded_driver_ids);
			const tried = new Set<string>();
			let claimed: DriverRow | undefined;
			for (let round = 0; round < 2 && !claimed; round++) {
				// Only drivers of the ride's mode: test rides go to test drivers, live rides to live ones.
				for (const c of await this.candidates(pickup, ride.service_type, ride.mode, new Set([...excluded, ...tried]), t)) {
					tried.add(c.driverId);
					claimed = await repo.drivers.claimDriver(c.driverId, orderId, ride.service_type, ride.mode, t);
					if (claimed) break;
					// Not available after all: this instance's index was behind.
					this.available[ride.mode][ride.service_type].remove(c.driverId);
				}
			}
			if (!claimed || claimed.lat === null || claimed.lng === null) {
				await repo.matching.matchAgainBackoff(orderId, this.cfg.retryMatchMs, this.cfg.retryMaxMs, this.cfg.dispatchTimeoutMs, t);
				return null;
			}
			const distanceM = haversineMeters({ lat: claimed.lat, lng: claimed.lng }, pickup);
			const eta = etaSeconds(distanceM, this.cfg.speedsKmh[ride.service_type], this.cfg.roadFactor);
			const expiresAt = await repo.matching.insertOffer({ id: offerId(), orderId, driverId: claimed.id, distanceM: Math.round(distanceM), eta, timeoutMs: this.cfg.offerTimeoutMs }, t);
			await repo.matching.matchAgainAt(orderId, expiresAt, t);
			return { driver: claimed, expiresAt };
		});
		if (!result) return;
		if ("ending" in result) {
			await this.endRide(orderId);
			return;
		}
		this.publishDrivers([result.driver]);
		this.metrics.offerMade(result.driver.service_type);
		const event: OfferCreatedEvent = { orderId, driverId: result.driver.id, simulated: result.driver.simulated, expiresAt: new Date(result.expiresAt).toISOString() };
		this.broker.broadcast(DISPATCH_EVENTS.offerCreated, event).catch(() => undefined);
	},

	/** Nobody took the ride in time: `searching → no_driver_found` (orders decides if somebody moved first). */
	async endRide(orderId) {
		try {
			const order = await this.transition({ orderId, from: "searching", to: "no_driver_found", reason: "no driver accepted within the dispatch timeout" });
			this.metrics.noDriverFound(order.serviceType);
			await this.applyOrder(order, { abandonInFlight: true });
		} catch (err) {
			if (isDefinitiveRefusal(err)) await this.afterRefusal(orderId, err);
			else this.trouble(`no_driver_found for ${orderId} not recorded yet: ${shortError(err)} (retried when its lease runs out)`);
		}
	},

	/** Ends a pending offer without a ride for the driver; the ride goes to the next driver. */
	async endOffer(driverId, orderId, how) {
		const repo = this.repo;
		const released = await repo.tx(async (t) => {
			const ride = await repo.mirror.lockRide(orderId, t);
			if (!(await repo.matching.endOffer(orderId, driverId, how, t))) return null;
			const drivers = await repo.drivers.freeDrivers(orderId, t, { offeredDriverId: driverId });
			await repo.matching.excludeAndRematch(orderId, driverId, t);
			return { drivers, serviceType: ride?.service_type };
		});
		if (!released) return false;
		if (released.serviceType) this.metrics.offerEnded(how, released.serviceType);
		this.publishDrivers(released.drivers);
		this.kick();
		return true;
	},

	/**
	 * `location_updated` at the cadence: each due moving ride is claimed by
	 * pushing its next due time forward (SKIP LOCKED, so instances share the
	 * work), then its driver's latest location and ETA go to orders.
	 */
	async sendLocations() {
		const due = await this.repo.matching.claimDueLocations(this.cfg.locationIntervalMs, this.cfg.liveLocationIntervalMs);
		const work = due.filter((r) => isMovingStatus(r.order_status) && r.d_lat !== null && r.d_lng !== null);
		const send = async (r: (typeof work)[number]) => {
			const location = { lat: r.d_lat as number, lng: r.d_lng as number, heading: Math.round(r.d_heading ?? 0) % 360 };
			const target = legTarget(r.order_status, pickupOf(r), dropOf(r)) as LatLng;
			const eta = etaBetween(location, target, r.service_type, this.cfg.speedsKmh, this.cfg.roadFactor);
			try {
				await this.broker.call<unknown, RecordLocationParams>("orders.recordLocation", { orderId: r.order_id, location, eta });
			} catch (err) {
				if (isDefinitiveRefusal(err)) await this.afterRefusal(r.order_id, err);
				else this.trouble(`Location event for ${r.order_id}: ${shortError(err)}`);
			}
		};
		for (let i = 0; i < work.length; i += 20) await Promise.all(work.slice(i, i + 20).map(send));
	},

	/**
	 * The simulated fleet's inbox: pending offers and rides of simulated
	 * drivers (with the phase and when it began, so the simulator derives
	 * where each driver is), and searching rides with no driver in reach.
	 */
	async simulatedWork() {
		const now = await this.repo.dbNow();
		const offers = await this.repo.matching.simulatedOffers();
		const rides = await this.repo.matching.simulatedRides();
		const searching = await this.repo.matching.unofferedSearches();
		return {
			serverTime: new Date(now).toISOString(),
			offers: offers.map(toSimOffer),
			rides: rides.map(toSimRide).filter((r): r is SimRide => r !== null),
			searching: searching.map((r) => ({ orderId: r.order_id, serviceType: r.service_type, pickup: pickupOf(r), sandbox: r.sandbox, hasCandidate: this.hasCandidate(r) })),
		};
	},

	async rideView(orderId) {
		const ride = await this.repo.mirror.ride(orderId);
		if (!ride) throw new ApiError(404, "ORDER_NOT_FOUND", "Dispatch does not know this ride");
		return toRideView(ride, await this.repo.matching.offersOfRide(orderId));
	},
};
