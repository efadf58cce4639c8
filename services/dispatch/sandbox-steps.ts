import { randomBytes } from "node:crypto";
import type { OfferCreatedEvent } from "../../contracts/dispatch";
import type { SandboxRide } from "../../contracts/sandbox";
import type { ReportedLocation } from "../../contracts/dispatch";
import { ApiError } from "../../lib/errors";
import { haversineMeters } from "../../lib/geo";
import { etaBetween, etaSeconds, isMovingStatus, legTarget } from "./dispatch-rules";
import { dropOf, pickupOf } from "./dispatch-views";
import type { DispatchMetrics } from "./dispatch.metrics";
import type { DispatchRepo } from "./dispatch.repo";
import type { DispatchSettings } from "./dispatch.settings";
import type { DriverIndex } from "./driver-index";
import type { Matcher } from "./matching";
import type { OrdersClient } from "./orders-client";
import type { RideMirror } from "./ride-mirror";
import type { RideRow } from "./ride-mirror.repo";

/**
 * Dispatch's part of the sandbox's manual rides (`sandbox = 'manual'`,
 * contracts/sandbox.ts). Matching and the location cadence never touch
 * them (migration 009); when the partner advances one, the simulated fleet
 * asks for what matching would have done, and gets it through the same
 * statements: an offer to a driver (claimed with the conditional update,
 * recorded, announced), the end of the search (`ending`, then
 * `searching → no_driver_found` as the timeout does), and a
 * `location_updated` from the driver's reported position with the ETA the
 * cadence computes. Only manual test rides are served; anything else is a
 * 409, so these actions cannot steer a real ride.
 */

export interface SandboxStepsDeps {
	settings: Pick<DispatchSettings, "offerTimeoutMs" | "transitionLeaseMs" | "speedsKmh" | "roadFactor">;
	repo: Pick<DispatchRepo, "drivers" | "mirror" | "matching" | "tx">;
	index: Pick<DriverIndex, "publish">;
	mirror: Pick<RideMirror, "reconcile">;
	matcher: Pick<Matcher, "endRide">;
	orders: Pick<OrdersClient, "recordLocation">;
	metrics: Pick<DispatchMetrics, "offerMade">;
	announceOffer: (event: OfferCreatedEvent) => void;
}

const notManual = (orderId: string) => new ApiError("SANDBOX_NOT_MANUAL", `${orderId} is not a manual sandbox ride`);
const notSearching = (ride: RideRow) => new ApiError("CONFLICT", `The ride is ${ride.state} (${ride.order_status}), not searching`, { retryAfter: 1 });

export class SandboxSteps {
	constructor(private readonly deps: SandboxStepsDeps) {}

	/** The manual ride as the fleet needs it; mirrored first when its `orders.created` has not arrived yet. */
	async ride(orderId: string): Promise<SandboxRide> {
		const { repo, mirror } = this.deps;
		let ride = await repo.mirror.ride(orderId);
		if (!ride) {
			await mirror.reconcile(orderId);
			ride = await repo.mirror.ride(orderId);
		}
		if (!ride) throw new ApiError("ORDER_NOT_FOUND", "Dispatch does not know this ride");
		if (ride.sandbox !== "manual" || ride.mode !== "test") throw notManual(orderId);
		return {
			orderId: ride.order_id,
			serviceType: ride.service_type,
			mode: ride.mode,
			phase: ride.state,
			orderStatus: ride.order_status,
			driverId: ride.driver_id,
			origin: ride.origin_lat !== null && ride.origin_lng !== null ? { lat: ride.origin_lat, lng: ride.origin_lng } : null,
			pickup: pickupOf(ride),
			drop: dropOf(ride),
		};
	}

	/** Offers the searching manual ride to `driverId` (a simulated test driver, available): matching's claim and offer. */
	async offer(orderId: string, driverId: string): Promise<{ orderId: string; driverId: string; expiresAt: string }> {
		const { repo, settings: s } = this.deps;
		const result = await repo.tx(async (t) => {
			const ride = await repo.mirror.lockRide(orderId, t);
			if (!ride) throw new ApiError("ORDER_NOT_FOUND", "Dispatch does not know this ride");
			if (ride.sandbox !== "manual" || ride.mode !== "test") throw notManual(orderId);
			if (ride.state !== "searching") throw notSearching(ride);
			if ((await repo.matching.offersOfRide(orderId)).some((o) => o.state === "pending"))
				throw new ApiError("CONFLICT", "The ride has an open offer", { retryAfter: 1 });
			const candidate = await repo.drivers.driver(driverId, t);
			if (!candidate?.simulated) throw new ApiError("DRIVER_NOT_FOUND", "Only a simulated driver takes a manual sandbox ride");
			// As matching: a driver who declined or dropped out of this ride is never offered it again.
			if (ride.excluded_driver_ids.includes(driverId)) throw new ApiError("DRIVER_NOT_AVAILABLE", "The driver gave this ride up before");
			const claimed = await repo.drivers.claimDriver(driverId, orderId, ride.service_type, ride.mode, t);
			if (!claimed || claimed.lat === null || claimed.lng === null) throw new ApiError("DRIVER_NOT_AVAILABLE", "The driver is not available");
			const pickup = pickupOf(ride);
			const distanceM = Math.round(haversineMeters({ lat: claimed.lat, lng: claimed.lng }, pickup));
			const eta = etaSeconds(distanceM, s.speedsKmh[ride.service_type], s.roadFactor);
			const expiresAt = await repo.matching.insertOffer(
				{ id: `ofr_${randomBytes(12).toString("hex")}`, orderId, driverId, distanceM, eta, timeoutMs: s.offerTimeoutMs },
				t,
			);
			return { driver: claimed, expiresAt: new Date(expiresAt).toISOString(), pickup, drop: dropOf(ride), distanceM, eta };
		});
		this.deps.index.publish([result.driver]);
		this.deps.metrics.offerMade(result.driver.service_type);
		const { pickup, drop, distanceM, eta, expiresAt } = result;
		this.deps.announceOffer({ orderId, driverId, simulated: true, expiresAt, pickup, drop, distanceM, eta });
		return { orderId, driverId, expiresAt };
	}

	/** Ends the searching manual ride as the dispatch timeout does: `ending`, then `no_driver_found` through orders. */
	async noDriver(orderId: string): Promise<void> {
		const { repo, settings: s } = this.deps;
		await repo.tx(async (t) => {
			const ride = await repo.mirror.lockRide(orderId, t);
			if (!ride) throw new ApiError("ORDER_NOT_FOUND", "Dispatch does not know this ride");
			if (ride.sandbox !== "manual") throw notManual(orderId);
			if (ride.state !== "searching") throw notSearching(ride);
			await repo.mirror.startTransition(orderId, "ending", s.transitionLeaseMs, t);
		});
		await this.deps.matcher.endRide(orderId);
	}

	/** A `location_updated` of the moving manual ride now, from where its driver reported to be, with the cadence's ETA. */
	async location(orderId: string, location: ReportedLocation): Promise<void> {
		const { repo, settings: s, orders } = this.deps;
		const ride = await repo.mirror.ride(orderId);
		if (!ride) throw new ApiError("ORDER_NOT_FOUND", "Dispatch does not know this ride");
		if (ride.sandbox !== "manual") throw notManual(orderId);
		if (ride.state !== "assigned" || !isMovingStatus(ride.order_status))
			throw new ApiError("CONFLICT", `No location updates while the ride is ${ride.order_status}`, { retryAfter: 1 });
		const heading = Math.round(location.heading ?? 0) % 360;
		const at = { lat: location.lat, lng: location.lng, heading };
		const target = legTarget(ride.order_status, pickupOf(ride), dropOf(ride));
		const eta = target ? etaBetween(at, target, ride.service_type, s.speedsKmh, s.roadFactor) : undefined;
		await orders.recordLocation({ orderId, location: at, eta });
	}
}
