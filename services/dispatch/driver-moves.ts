import type { DriverJob } from "../../contracts/dispatch";
import type { InternalOrder } from "../../contracts/orders";
import { ApiError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { bearingDegrees, haversineMeters } from "../../lib/geo";
import { errorType, etaBetween, isDefinitiveRefusal, legTarget } from "./dispatch-rules";
import { dropOf, locationOf, pickupOf, rideJob, toDriverView } from "./dispatch-views";
import type { DispatchPart } from "./dispatch.types";

/**
 * Driver moves: what a driver (app, REPL or the simulated fleet) does —
 * register, go online/offline, report its location, accept or decline an
 * offer, arrive, start with the rider's OTP, drop, drop out. Ride steps go
 * through `orders.transition`; on a definitive refusal dispatch takes the
 * order's truth.
 */

const driverNotFound = (): ApiError => new ApiError(404, "DRIVER_NOT_FOUND", "Driver not found");
const conflict = (message: string): ApiError => new ApiError(409, "CONFLICT", message);
const NOT_ON_RIDE = "The driver is not on this ride";

export const driverMoveMethods: DispatchPart<
	| "loadDriver"
	| "registerDriver"
	| "goOnline"
	| "goOffline"
	| "setDriverLocation"
	| "acceptOffer"
	| "declineOffer"
	| "requireOnRide"
	| "moveRide"
	| "dropOut"
	| "etaFor"
	| "driverJob"
> = {
	async loadDriver(driverId, t) {
		const row = await this.repo.drivers.driver(driverId, t);
		if (!row) throw driverNotFound();
		return row;
	},

	/** Idempotent by phone: a known phone answers that driver unchanged. A driver is `live` unless registered as `test` (the simulated fleet, test driver apps). */
	async registerDriver(p) {
		const inserted = await this.repo.drivers.insertDriver(newId("drv"), { ...p, mode: p.mode ?? (p.simulated ? "test" : "live") });
		if (inserted) return toDriverView(inserted);
		const existing = await this.repo.drivers.driverByPhone(p.phone);
		if (!existing) throw conflict("Driver registration raced; try again");
		return toDriverView(existing);
	},

	async goOnline(driverId, location) {
		const row = await this.repo.drivers.setDriverLocation(driverId, location, true);
		if (!row) throw driverNotFound();
		this.publishDrivers([row]);
		this.kick();
		return toDriverView(row);
	},

	/** A pending offer is declined first; a driver on a ride must drop it (or drop out) first. */
	async goOffline(driverId) {
		for (let attempt = 0; attempt < 5; attempt++) {
			const driver = await this.loadDriver(driverId);
			if (driver.status === "on_trip") {
				throw new ApiError(409, "DRIVER_NOT_AVAILABLE", "The driver is on a ride: drop it or drop out first");
			}
			if (driver.status === "offered" && driver.order_id) {
				await this.endOffer(driverId, driver.order_id, "declined");
				continue;
			}
			const row = await this.repo.drivers.setDriverOffline(driverId);
			if (row) {
				this.publishDrivers([row]);
				return toDriverView(row);
			}
		}
		throw conflict("The driver's state keeps changing; try again");
	},

	async setDriverLocation(driverId, location) {
		let heading = location.heading;
		if (heading === undefined) {
			// No heading given: face the way the driver moved (kept when it barely moved).
			const prev = await this.loadDriver(driverId);
			if (prev.lat !== null && prev.lng !== null && haversineMeters({ lat: prev.lat, lng: prev.lng }, location) > 5) {
				heading = Math.round(bearingDegrees({ lat: prev.lat, lng: prev.lng }, location)) % 360;
			}
		}
		const row = await this.repo.drivers.setDriverLocation(driverId, { lat: location.lat, lng: location.lng, heading }, false);
		if (!row) throw driverNotFound();
		this.publishDrivers([row]);
		return row;
	},

	/**
	 * Only an open (pending, unexpired) offer can be accepted; the ride becomes
	 * `accepted` with this driver through `orders.transition`.
	 */
	async acceptOffer(ctx) {
		const { driverId, orderId } = ctx.params;
		const repo = this.repo;
		const claimed = await repo.tx(async (t) => {
			const ride = await repo.mirror.lockRide(orderId, t);
			if (!ride || !(await repo.matching.acceptOffer(orderId, driverId, t))) return null;
			const driver = await repo.drivers.startTrip(driverId, orderId, t);
			if (!driver) return null;
			await repo.mirror.startTransition(orderId, "accepting", this.cfg.transitionLeaseMs, t, driver);
			return { driver, ride };
		});
		if (!claimed) {
			// Nothing changed; tell the driver why.
			const driver = await this.loadDriver(driverId);
			throw conflict(driver.order_id === orderId && driver.status === "on_trip" ? "Offer already accepted" : "No open offer for this driver and ride (expired, declined or cancelled)");
		}
		this.publishDrivers([claimed.driver]);
		const { driver, ride } = claimed;
		this.metrics.offerEnded("accepted", ride.service_type);
		let order: InternalOrder;
		try {
			order = await this.transition(
				{
					orderId,
					from: "searching",
					to: "accepted",
					driver: { id: driver.id, name: driver.name, phone: driver.phone, vehicleNumber: driver.vehicle_number },
					location: locationOf(driver) ?? undefined,
					eta: this.etaFor(driver, ride, "accepted"),
				},
				ctx,
			);
		} catch (err) {
			if (isDefinitiveRefusal(err)) {
				// Somebody moved first (cancel, no_driver_found): the ride is not this driver's.
				await this.afterRefusal(orderId, err);
				throw conflict("The ride is no longer available");
			}
			// No answer: the transition may or may not have happened. The lease
			// runs out and the sweep settles it with the order's truth.
			throw err;
		}
		this.metrics.matched(ride.service_type, order.createdAt);
		await this.applyOrder(order, { abandonInFlight: true });
		return { driver: toDriverView(await this.loadDriver(driverId)), offer: null, ride: rideJob(ride, order.status) };
	},

	async declineOffer(driverId, orderId) {
		const declined = await this.endOffer(driverId, orderId, "declined");
		if (!declined) {
			await this.loadDriver(driverId);
			throw conflict("No open offer for this driver and ride");
		}
		return toDriverView(await this.loadDriver(driverId));
	},

	async requireOnRide(driverId, orderId, location) {
		let driver = location ? await this.setDriverLocation(driverId, location) : await this.loadDriver(driverId);
		if (driver.status !== "on_trip" || driver.order_id !== orderId) throw conflict(NOT_ON_RIDE);
		const ride = await this.repo.mirror.ride(orderId);
		if (!ride) throw conflict(NOT_ON_RIDE);
		if (ride.state !== "accepting") return { driver, ride };
		// The accept is still being recorded (or was lost): settle it before moving on.
		await this.reconcileOrder(orderId, { abandonInFlight: Date.now() > new Date(ride.lease_until ?? 0).getTime() });
		driver = await this.loadDriver(driverId);
		const settled = await this.repo.mirror.ride(orderId);
		if (!settled || settled.state !== "assigned" || driver.order_id !== orderId) throw conflict(NOT_ON_RIDE);
		return { driver, ride: settled };
	},

	/**
	 * A driver action that moves its ride one step (arrive, start, drop):
	 * the driver must hold the ride; orders decides. On a definitive refusal
	 * dispatch takes the order's truth; a wrong OTP (only `started` carries
	 * one) is counted on the driver instead.
	 */
	async moveRide(ctx, from, to, otp) {
		const { driverId, orderId } = ctx.params;
		const { driver, ride } = await this.requireOnRide(driverId, orderId, ctx.params.location);
		// At the pickup or the drop the driver is there (eta 0); once started, the eta is to the drop.
		const eta = to === "started" ? this.etaFor(driver, ride, to) : 0;
		let order: InternalOrder;
		try {
			order = await this.transition({ orderId, from, to, otp, location: locationOf(driver) ?? undefined, eta }, ctx);
		} catch (err) {
			if (otp !== undefined && errorType(err) === "INVALID_OTP") {
				await this.repo.drivers.countWrongOtp(driverId);
				this.logger.info(`Wrong OTP from driver ${driverId} for ${orderId}`);
				this.metrics.wrongOtp(ride.service_type);
			} else if (isDefinitiveRefusal(err)) {
				await this.afterRefusal(orderId, err);
			}
			throw err;
		}
		await this.applyOrder(order);
		return { driver: toDriverView(await this.loadDriver(driverId)), offer: null, ride: rideJob(ride, order.status) };
	},

	/** `accepted`/`arrived` → `searching` (no webhook): dispatch offers the ride to another driver. */
	async dropOut(ctx) {
		const { driverId, orderId, reason } = ctx.params;
		const { ride } = await this.requireOnRide(driverId, orderId, ctx.params.location);
		let from = ride.order_status;
		let order: InternalOrder | undefined;
		for (let attempt = 0; attempt < 2 && !order; attempt++) {
			if (from !== "accepted" && from !== "arrived") {
				throw new ApiError(409, "INVALID_TRANSITION", `A driver can only drop out before the ride started (it is ${from})`);
			}
			try {
				// `driver.id`: orders applies the drop-out only while this driver is still the ride's driver.
				order = await this.transition({ orderId, from, to: "searching", driver: { id: driverId }, reason: reason ?? "driver dropped out" }, ctx);
			} catch (err) {
				if (errorType(err) !== "CONFLICT") {
					if (isDefinitiveRefusal(err)) await this.afterRefusal(orderId, err);
					throw err;
				}
				// Our view was behind (e.g. arrived a moment ago): ask orders and try once more.
				const current = await this.getOrder(orderId, ctx);
				if (!current || current.driver?.id !== driverId) {
					if (current) await this.applyOrder(current);
					throw conflict("The driver is no longer on this ride");
				}
				from = current.status;
			}
		}
		if (!order) throw conflict("The ride kept changing; try again");
		await this.applyOrder(order, { abandonInFlight: true });
		this.kick();
		return toDriverView(await this.loadDriver(driverId));
	},

	/** Seconds from the driver to where it is heading in `status`. */
	etaFor(driver, ride, status) {
		const target = legTarget(status, pickupOf(ride), dropOf(ride));
		const from = status === "started" ? pickupOf(ride) : driver.lat !== null && driver.lng !== null ? { lat: driver.lat, lng: driver.lng } : null;
		if (!target || !from) return undefined;
		return etaBetween(from, target, ride.service_type, this.cfg.speedsKmh, this.cfg.roadFactor);
	},

	/** A driver and its current job (pending offer or ride), as a driver app shows it. */
	async driverJob(driverId) {
		const driver = await this.loadDriver(driverId);
		const job: DriverJob = { driver: toDriverView(driver), offer: null, ride: null };
		if (driver.status === "offered") {
			const r = await this.repo.matching.openOfferOf(driver.id);
			if (r) job.offer = { orderId: r.order_id, expiresAt: new Date(r.expires_at).toISOString(), pickup: pickupOf(r), drop: dropOf(r), distanceM: r.distance_m, eta: r.eta };
		} else if (driver.status === "on_trip" && driver.order_id) {
			const r = await this.repo.mirror.ride(driver.order_id);
			if (r) job.ride = rideJob(r);
		}
		return job;
	},
};
