import type { Point } from "../../contracts/common";
import type { DriverChangedEvent, DriverPosition, DriverView, RideView, SimOffer, SimRide } from "../../contracts/dispatch";
import type { DriverRow, IndexRow } from "./drivers.repo";
import type { OfferRow } from "./matching.repo";
import type { RideRow } from "./ride-mirror.repo";

/**
 * Dispatch's rows as its actions and events answer them. Pure: rows in,
 * contract shapes out.
 */

const iso = (d: Date): string => new Date(d).toISOString();

export function locationOf(row: DriverRow): DriverPosition | null {
	if (row.lat === null || row.lng === null) return null;
	return { lat: row.lat, lng: row.lng, heading: Math.round(row.heading ?? 0) % 360 };
}

export function toDriverView(row: DriverRow): DriverView {
	return {
		driverId: row.id,
		name: row.name,
		phone: row.phone,
		vehicleNumber: row.vehicle_number,
		serviceType: row.service_type,
		status: row.status,
		orderId: row.order_id,
		location: locationOf(row),
		locationAt: row.location_at ? iso(row.location_at) : null,
		simulated: row.simulated,
		mode: row.mode,
		wrongOtpCount: row.wrong_otp_count,
	};
}

/** What every instance's index needs of a driver (`dispatch.driverChanged`). */
export function toDriverChange(row: IndexRow): DriverChangedEvent {
	return {
		id: row.id,
		serviceType: row.service_type,
		status: row.status,
		lat: row.lat,
		lng: row.lng,
		rev: Number(row.rev),
		mode: row.mode,
		orderId: row.order_id,
		offlineReason: row.offline_reason,
	};
}

export const pickupOf = (r: RideRow): Point => ({ lat: r.pickup_lat, lng: r.pickup_lng });
export const dropOf = (r: RideRow): Point => ({ lat: r.drop_lat, lng: r.drop_lng });

/** The ride as a driver's job shows it. */
export function rideJob(r: RideRow, status: string = r.order_status) {
	return { orderId: r.order_id, status, pickup: pickupOf(r), drop: dropOf(r) };
}

/** The order snapshot is older than what dispatch already applied (events and sweeps race). */
export function isStale(order: { version: number; updatedAt: string }, ride: RideRow): boolean {
	if (order.version < ride.order_version) return true;
	if (order.version > ride.order_version || !ride.order_updated_at) return false;
	return Date.parse(order.updatedAt) < new Date(ride.order_updated_at).getTime();
}

export function toRideView(ride: RideRow, offers: OfferRow[]): RideView {
	return {
		orderId: ride.order_id,
		serviceType: ride.service_type,
		mode: ride.mode,
		phase: ride.state,
		orderStatus: ride.order_status,
		driverId: ride.driver_id,
		sandbox: ride.sandbox,
		dropOuts: ride.drop_outs,
		excludedDriverIds: ride.excluded_driver_ids,
		searchStartedAt: iso(ride.search_started_at),
		offers: offers.map((o) => ({
			offerId: o.id,
			driverId: o.driver_id,
			state: o.state,
			distanceM: o.distance_m,
			eta: o.eta,
			createdAt: iso(o.created_at),
			expiresAt: iso(o.expires_at),
			respondedAt: o.responded_at ? iso(o.responded_at) : null,
		})),
	};
}

export function toSimOffer(o: { driver_id: string; order_id: string; created_at: Date; expires_at: Date; sandbox: SimOffer["sandbox"] }): SimOffer {
	return { driverId: o.driver_id, orderId: o.order_id, offeredAt: iso(o.created_at), expiresAt: iso(o.expires_at), sandbox: o.sandbox };
}

/** A simulated driver's ride, or null when its status gives the driver nothing to do. */
export function toSimRide(r: RideRow): SimRide | null {
	if (r.order_status !== "accepted" && r.order_status !== "arrived" && r.order_status !== "started") return null;
	return {
		driverId: r.driver_id as string,
		orderId: r.order_id,
		serviceType: r.service_type,
		status: r.order_status,
		phaseSince: iso(r.phase_since),
		origin: r.origin_lat !== null && r.origin_lng !== null ? { lat: r.origin_lat, lng: r.origin_lng } : null,
		pickup: pickupOf(r),
		drop: dropOf(r),
		sandbox: r.sandbox,
		dropOuts: r.drop_outs,
	};
}
