import type { DriverPosition, DriverView, SimSearching } from "../../contracts/dispatch";
import type { DriverArrivedParams, DriverCancelParams, DriverOrderParams, DriverStartParams } from "../../contracts/driver";
import type { OrderIdParams, RiderOtpResult } from "../../contracts/orders";
import type { SandboxLocationParams, SandboxOfferParams, SandboxRide, SandboxStep } from "../../contracts/sandbox";
import { ApiError } from "../../lib/errors";
import { positionOnLeg } from "./simulation";

/**
 * The simulated fleet's part of a sandbox advance: one step of a manual
 * ride, taken the way the automatic sandbox takes it, only now and once.
 * The fleet acts as the driver through the driver actions (accept, report
 * positions, arrive, start with the rider's OTP, drop, drop out); dispatch
 * offers the ride and ends it (`dispatch.sandboxOffer`, `sandboxNoDriver`)
 * and turns a reported position into the `location_updated` its cadence
 * would send (`dispatch.sandboxLocation`). Orders decides which steps to
 * take (services/orders/sandbox-advance.ts); nothing here touches a table.
 */

export interface SandboxDriverDeps {
	/** A dispatch or orders action as the fleet (`dispatch.sandboxRide`, …). */
	call<T>(action: string, params: object): Promise<T>;
	/** A driver action as the driver (`driverAccept`, …), as the gateway's /driver route calls it. */
	asDriver<T>(driverId: string, action: string, params: object): Promise<T>;
	/** POST /driver/location with one fix. */
	reportAt(driverId: string, location: DriverPosition): Promise<DriverView>;
	/** A simulated driver of the ride's type placed near its pickup (spawned or moved), or null when none is free. */
	placeNear(ride: SimSearching): Promise<{ driver: DriverView } | null>;
}

/**
 * The placed driver may not be offered the ride (matching gave it another
 * ride in between, or it dropped out of this one before): place one again,
 * at most this often.
 */
const OFFER_TRIES = 5;

const DROP_OUT_REASON = "sandbox: driver_drop_out";

export class SandboxDriver {
	constructor(private readonly deps: SandboxDriverDeps) {}

	async take(orderId: string, step: SandboxStep): Promise<void> {
		const ride = await this.deps.call<SandboxRide>("dispatch.sandboxRide", { orderId });
		switch (step) {
			case "accept":
				return this.accept(ride);
			case "arrive":
				return this.arrive(ride);
			case "start":
				return this.start(ride);
			case "drop":
				return this.drop(ride);
			case "dropOut":
				return this.dropOut(ride);
			case "noDriver":
				await this.deps.call("dispatch.sandboxNoDriver", { orderId });
				return;
		}
	}

	/** A driver near the pickup is offered the ride (as matching would) and accepts it. */
	private async accept(ride: SandboxRide): Promise<void> {
		const { orderId, serviceType, pickup } = ride;
		for (let attempt = 1; ; attempt++) {
			const placed = await this.deps.placeNear({ orderId, serviceType, pickup, sandbox: "manual", hasCandidate: false });
			if (!placed) throw new ApiError("SANDBOX_UNAVAILABLE", "No simulated driver is free for this ride right now");
			const driverId = placed.driver.driverId;
			try {
				await this.deps.call("dispatch.sandboxOffer", { orderId, driverId } satisfies SandboxOfferParams);
			} catch (err) {
				// Busy meanwhile, or excluded from this ride: place another.
				if ((err as { type?: string }).type === "DRIVER_NOT_AVAILABLE" && attempt < OFFER_TRIES) continue;
				throw err;
			}
			await this.deps.asDriver(driverId, "driverAccept", { orderId } satisfies DriverOrderParams);
			return;
		}
	}

	/** Halfway to the pickup (a `location_updated`), then at the pickup: arrived. */
	private async arrive(ride: SandboxRide): Promise<void> {
		const driverId = this.driverOf(ride);
		const origin = ride.origin ?? ride.pickup;
		await this.moveTo(ride, driverId, positionOnLeg(origin, ride.pickup, 0.5));
		const { lat, lng, heading } = positionOnLeg(origin, ride.pickup, 1);
		await this.deps.asDriver(driverId, "driverArrived", { orderId: ride.orderId, location: { lat, lng, heading } } satisfies DriverArrivedParams);
	}

	/** The rider tells a real driver the OTP; the fleet asks orders in the rider's place. */
	private async start(ride: SandboxRide): Promise<void> {
		const driverId = this.driverOf(ride);
		const { otp } = await this.deps.call<RiderOtpResult>("orders.riderOtp", { orderId: ride.orderId } satisfies OrderIdParams);
		await this.deps.asDriver(driverId, "driverStart", { orderId: ride.orderId, otp } satisfies DriverStartParams);
	}

	/** Halfway to the drop (a `location_updated`), then at the drop: dropped. */
	private async drop(ride: SandboxRide): Promise<void> {
		const driverId = this.driverOf(ride);
		await this.moveTo(ride, driverId, positionOnLeg(ride.pickup, ride.drop, 0.5));
		await this.deps.reportAt(driverId, positionOnLeg(ride.pickup, ride.drop, 1));
		await this.deps.asDriver(driverId, "driverDrop", { orderId: ride.orderId } satisfies DriverOrderParams);
	}

	/** The driver gives the ride up where it is: the ride searches again (no webhook). */
	private async dropOut(ride: SandboxRide): Promise<void> {
		const driverId = this.driverOf(ride);
		await this.deps.asDriver(driverId, "driverCancel", { orderId: ride.orderId, reason: DROP_OUT_REASON } satisfies DriverCancelParams);
	}

	/** The driver reports a position on its leg, and dispatch sends it as the ride's `location_updated`. */
	private async moveTo(ride: SandboxRide, driverId: string, at: DriverPosition): Promise<void> {
		await this.deps.reportAt(driverId, at);
		await this.deps.call("dispatch.sandboxLocation", { orderId: ride.orderId, location: at } satisfies SandboxLocationParams);
	}

	private driverOf(ride: SandboxRide): string {
		if (ride.phase !== "assigned" || !ride.driverId)
			throw new ApiError("CONFLICT", `The ride has no driver (it is ${ride.orderStatus})`, { retryAfter: 1 });
		return ride.driverId;
	}
}
