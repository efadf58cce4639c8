import type { Context } from "moleculer";
import type { DriverJob, DriverView, ReportedLocation } from "../../contracts/dispatch";
import type { InternalOrder } from "../../contracts/orders";
import { ApiError } from "../../lib/errors";
import { haversineMeters } from "../../lib/geo";
import { errorType, etaBetween, isDefinitiveRefusal, legTarget } from "./dispatch-rules";
import { drivenMetersAtDrop } from "./driven-distance";
import { dropOf, locationOf, pickupOf, rideJob, toDriverView } from "./dispatch-views";
import type { DispatchMetrics } from "./dispatch.metrics";
import type { DispatchRepo } from "./dispatch.repo";
import type { DispatchSettings } from "./dispatch.settings";
import type { DispatchLog, DriverMoveFrom, DriverMoveTo } from "./dispatch.types";
import type { DriverIndex } from "./driver-index";
import type { DriverMoves } from "./driver-moves";
import type { DriverPresence } from "./driver-presence";
import type { DriverRow } from "./drivers.repo";
import type { Matcher } from "./matching";
import type { OrdersClient } from "./orders-client";
import type { RideMirror } from "./ride-mirror";
import type { RideRow } from "./ride-mirror.repo";

/**
 * Ride steps: what a driver does to its ride — accept an offer, arrive,
 * start with the rider's OTP, drop, drop out — and what revoking its tokens
 * does to it. Every step goes through `orders.transition`; on a definitive
 * refusal dispatch takes the order's truth. `ctx` is the request a step is
 * made for (its trace and timeouts reach orders).
 */

const conflict = (message: string): ApiError => new ApiError("CONFLICT", message);
const NOT_ON_RIDE = "The driver is not on this ride";
/** Thrown inside an accept's transaction to roll it back whole: nothing was claimed. */
const NO_CLAIM = new Error("no claim");

export interface RideStepsDeps {
	settings: Pick<DispatchSettings, "transitionLeaseMs" | "speedsKmh" | "roadFactor" | "arrivalRadiusM">;
	repo: Pick<DispatchRepo, "drivers" | "mirror" | "matching" | "tx">;
	index: Pick<DriverIndex, "publish">;
	presence: Pick<DriverPresence, "driver" | "withNewestPosition">;
	moves: Pick<DriverMoves, "loadDriver" | "setLocation" | "goOffline">;
	mirror: Pick<RideMirror, "applyOrder" | "afterRefusal" | "reconcile">;
	matcher: Pick<Matcher, "kick">;
	orders: Pick<OrdersClient, "transition" | "get">;
	metrics: Pick<DispatchMetrics, "offerEnded" | "matched" | "wrongOtp">;
	log: DispatchLog;
}

/** A ride step: who, which ride, and optionally where the driver is now. */
export interface RideStep {
	driverId: string;
	orderId: string;
	location?: ReportedLocation;
}

export class RideSteps {
	constructor(private readonly deps: RideStepsDeps) {}

	/**
	 * The driver's tokens were revoked: it goes offline at once. A pending
	 * offer is withdrawn and a ride not yet started goes back to searching (a
	 * drop-out); a started ride stays with it until an operator drops it
	 * (`dispatch.dropRide`), and it goes offline then.
	 */
	async revoked(driverId: string): Promise<DriverView> {
		for (let attempt = 0; attempt < 5; attempt++) {
			const driver = await this.deps.moves.loadDriver(driverId);
			if (driver.status === "on_trip" && driver.order_id) {
				const ride = await this.deps.repo.mirror.ride(driver.order_id);
				if (ride?.order_status === "started") return toDriverView(driver);
				await this.dropOut({ driverId, orderId: driver.order_id }, "driver's access revoked").catch(() => undefined);
				continue;
			}
			return await this.deps.moves.goOffline(driverId, "revoked");
		}
		throw conflict("The driver's state keeps changing; try again");
	}

	/** Only an open (pending, unexpired) offer can be accepted; the ride becomes `accepted` with this driver through `orders.transition`. */
	async accept(driverId: string, orderId: string, ctx?: Context): Promise<DriverJob> {
		const { repo, settings, index, mirror, orders, metrics } = this.deps;
		const claimed = await repo
			.tx(async (t) => {
				const ride = await repo.mirror.lockRide(orderId, t);
				if (!ride || !(await repo.matching.acceptOffer(orderId, driverId, t))) throw NO_CLAIM;
				// The offer is taken but the driver is not free for it: roll the offer back too.
				const driver = await repo.drivers.startTrip(driverId, orderId, t);
				if (!driver) throw NO_CLAIM;
				await repo.mirror.startTransition(orderId, "accepting", settings.transitionLeaseMs, t, driver);
				return { driver, ride };
			})
			.catch((err: unknown) => {
				if (err === NO_CLAIM) return null;
				throw err;
			});
		if (!claimed) {
			// Nothing changed; tell the driver why.
			const driver = await this.deps.moves.loadDriver(driverId);
			throw conflict(
				driver.order_id === orderId && driver.status === "on_trip"
					? "Offer already accepted"
					: "No open offer for this driver and ride (expired, declined or cancelled)",
			);
		}
		const { driver, ride } = claimed;
		index.publish([driver]);
		metrics.offerEnded("accepted", ride.service_type);
		let order: InternalOrder;
		try {
			const info = { id: driver.id, name: driver.name, phone: driver.phone, vehicleNumber: driver.vehicle_number };
			order = await orders.transition(
				{
					orderId,
					from: "searching",
					to: "accepted",
					driver: info,
					location: locationOf(driver) ?? undefined,
					eta: this.etaFor(driver, ride, "accepted"),
				},
				ctx,
			);
		} catch (err) {
			if (isDefinitiveRefusal(err)) {
				// Somebody moved first (cancel, no_driver_found): the ride is not this driver's.
				await mirror.afterRefusal(orderId, err);
				throw conflict("The ride is no longer available");
			}
			// No answer: the transition may or may not have happened. The lease
			// runs out and the sweep settles it with the order's truth.
			throw err;
		}
		metrics.matched(ride.service_type, order.createdAt);
		await mirror.applyOrder(order, { abandonInFlight: true });
		return { driver: toDriverView(await this.deps.moves.loadDriver(driverId)), offer: null, ride: rideJob(ride, order.status) };
	}

	/** The driver holds the ride (an accept still being recorded is settled first). */
	private async requireOnRide({ driverId, orderId, location }: RideStep): Promise<{ driver: DriverRow; ride: RideRow }> {
		const mirrorRepo = this.deps.repo.mirror;
		const presence = this.deps.presence;
		let driver = location ? await this.deps.moves.setLocation(driverId, location) : presence.withNewestPosition(await this.deps.moves.loadDriver(driverId));
		if (driver.status !== "on_trip" || driver.order_id !== orderId) throw conflict(NOT_ON_RIDE);
		const ride = await mirrorRepo.ride(orderId);
		if (!ride) throw conflict(NOT_ON_RIDE);
		if (ride.state !== "accepting") return { driver, ride };
		// The accept is still being recorded (or was lost): settle it before moving on.
		await this.deps.mirror.reconcile(orderId, { abandonInFlight: Date.now() > new Date(ride.lease_until ?? 0).getTime() });
		driver = await this.deps.moves.loadDriver(driverId);
		const settled = await mirrorRepo.ride(orderId);
		if (!settled || settled.state !== "assigned" || driver.order_id !== orderId) throw conflict(NOT_ON_RIDE);
		return { driver, ride: settled };
	}

	/**
	 * A driver action that moves its ride one step (arrive, start, drop):
	 * the driver must hold the ride; orders decides. On a definitive refusal
	 * dispatch takes the order's truth; a wrong OTP (only `started` carries
	 * one) is counted on the driver instead.
	 */
	async moveRide(step: RideStep, from: DriverMoveFrom, to: DriverMoveTo, otp?: string, ctx?: Context): Promise<DriverJob> {
		const { driverId, orderId } = step;
		const { driver, ride } = await this.requireOnRide(step);
		if (to === "arrived") await this.requireAtPickup(driverId, ride);
		// At the pickup or the drop the driver is there (eta 0); once started, the eta is to the drop.
		const eta = to === "started" ? this.etaFor(driver, ride, to) : 0;
		const location = locationOf(driver) ?? undefined;
		// The drop: the distance driven so far plus the last leg (orders meters a ride that ends elsewhere from it).
		const drivenMeters = to === "dropped" ? drivenMetersAtDrop(ride, location ?? null) : undefined;
		let order: InternalOrder;
		try {
			order = await this.deps.orders.transition({ orderId, from, to, otp, location, eta, ...(drivenMeters !== undefined ? { drivenMeters } : {}) }, ctx);
		} catch (err) {
			if (otp !== undefined && errorType(err) === "INVALID_OTP") {
				await this.deps.repo.drivers.countWrongOtp(driverId);
				this.deps.log.info(`Wrong OTP from driver ${driverId} for ${orderId}`);
				this.deps.metrics.wrongOtp(ride.service_type);
			} else if (isDefinitiveRefusal(err)) {
				await this.deps.mirror.afterRefusal(orderId, err);
			}
			throw err;
		}
		await this.deps.mirror.applyOrder(order);
		return { driver: toDriverView(await this.deps.moves.loadDriver(driverId)), offer: null, ride: rideJob(ride, order.status) };
	}

	/** `arrived` only near the pickup, by the driver's newest known position (simulated drivers are the sandbox's own and exempt). */
	private async requireAtPickup(driverId: string, ride: RideRow): Promise<void> {
		const driver = await this.deps.presence.driver(driverId);
		if (driver.simulated) return;
		const radiusM = this.deps.settings.arrivalRadiusM;
		const distanceM = driver.lat !== null && driver.lng !== null ? haversineMeters({ lat: driver.lat, lng: driver.lng }, pickupOf(ride)) : Infinity;
		if (distanceM <= radiusM) return;
		const where = Number.isFinite(distanceM) ? `${Math.round(distanceM)} m from the pickup` : "at no known position";
		throw new ApiError("NOT_AT_PICKUP", `The driver is ${where}; arrive within ${radiusM} m (send the position with the call)`);
	}

	/** `accepted`/`arrived` → `searching` (no webhook): dispatch offers the ride to another driver. */
	async dropOut(step: RideStep, reason: string | undefined, ctx?: Context): Promise<DriverView> {
		const { driverId, orderId } = step;
		const { orders, mirror } = this.deps;
		const { ride } = await this.requireOnRide(step);
		let from = ride.order_status;
		let order: InternalOrder | undefined;
		for (let attempt = 0; attempt < 2 && !order; attempt++) {
			if (from !== "accepted" && from !== "arrived")
				throw new ApiError("INVALID_TRANSITION", `A driver can only drop out before the ride started (it is ${from})`);
			try {
				// `driver.id`: orders applies the drop-out only while this driver is still the ride's driver.
				order = await orders.transition({ orderId, from, to: "searching", driver: { id: driverId }, reason: reason ?? "driver dropped out" }, ctx);
			} catch (err) {
				if (errorType(err) !== "CONFLICT") {
					if (isDefinitiveRefusal(err)) await mirror.afterRefusal(orderId, err);
					throw err;
				}
				// Our view was behind (e.g. arrived a moment ago): ask orders and try once more.
				const current = await orders.get(orderId, ctx);
				if (!current || current.driver?.id !== driverId) {
					if (current) await mirror.applyOrder(current);
					throw conflict("The driver is no longer on this ride");
				}
				from = current.status;
			}
		}
		if (!order) throw conflict("The ride kept changing; try again");
		await mirror.applyOrder(order, { abandonInFlight: true });
		this.deps.matcher.kick();
		return toDriverView(await this.deps.moves.loadDriver(driverId));
	}

	/** Seconds from the driver to where it is heading in `status`. */
	private etaFor(driver: DriverRow, ride: RideRow, status: string): number | undefined {
		const target = legTarget(status, pickupOf(ride), dropOf(ride));
		const from = status === "started" ? pickupOf(ride) : driver.lat !== null && driver.lng !== null ? { lat: driver.lat, lng: driver.lng } : null;
		if (!target || !from) return undefined;
		return etaBetween(from, target, ride.service_type, this.deps.settings.speedsKmh, this.deps.settings.roadFactor);
	}
}
