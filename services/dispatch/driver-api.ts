import type { Context } from "moleculer";
import type { DriverJob, DriverView } from "../../contracts/dispatch";
import * as driverApi from "../../contracts/driver";
import { orderNotFound } from "../../lib/errors";
import { toDriverView } from "./dispatch-views";
import type { DriverMoves } from "./driver-moves";
import type { DriverTokensRepo } from "./driver-tokens.repo";
import type { OfferWaits } from "./offer-waits";

/**
 * The driver API's use cases (`/driver/*` on the gateway): the driver is the
 * one its token names (the gateway puts it in `ctx.meta.driverId`), never
 * one from the body. Every move is the same DriverMoves call the internal
 * actions and the simulated fleet make: one code path.
 *
 * - Isolation: an order this driver was never offered answers 404
 *   ORDER_NOT_FOUND, like an unknown one; its own past offers keep their
 *   honest 409s (expired, taken back, already moved).
 * - `/driver/offers` long-polls: it reads the driver's job, then waits for
 *   `dispatch.offerCreated` naming the driver (broadcast by whichever
 *   instance matched) or `pollMs`, whichever comes first, and reads again.
 */

/** The newest fix of a batch: the latest `at` when every fix has a parseable one, else the last in the batch. */
export function newestLocation(locations: driverApi.DriverAppLocation[]): driverApi.DriverAppLocation {
	const stamped = locations.map((l) => (l.at === undefined ? Number.NaN : Date.parse(l.at)));
	if (stamped.some((t) => Number.isNaN(t))) return locations[locations.length - 1];
	let best = 0;
	for (let i = 1; i < locations.length; i++) if (stamped[i] >= stamped[best]) best = i;
	return locations[best];
}

export interface DriverApiDeps {
	moves: Pick<DriverMoves, "loadDriver" | "goOnline" | "goOffline" | "setLocation" | "accept" | "decline" | "moveRide" | "dropOut" | "driverJob">;
	tokens: Pick<DriverTokensRepo, "wasOffered">;
	waits: Pick<OfferWaits, "wait">;
	/** The longest a long-poll sleeps before it reads the driver's job again. */
	pollMs: number;
	stopping: () => boolean;
}

export class DriverApi {
	constructor(private readonly deps: DriverApiDeps) {}

	online(driverId: string, { lat, lng, heading }: driverApi.DriverAppLocation): Promise<DriverView> {
		return this.deps.moves.goOnline(driverId, { lat, lng, heading });
	}

	offline(driverId: string): Promise<DriverView> {
		return this.deps.moves.goOffline(driverId);
	}

	/** A batch of fixes: the newest wins. */
	async locations(driverId: string, locations: driverApi.DriverAppLocation[]): Promise<DriverView> {
		const { lat, lng, heading } = newestLocation(locations);
		return toDriverView(await this.deps.moves.setLocation(driverId, { lat, lng, heading }));
	}

	/** The current offer or ride at once, else waits up to `waitSeconds` for an offer. */
	async offers(driverId: string, waitSeconds = driverApi.DRIVER_OFFERS_DEFAULT_WAIT_S): Promise<DriverJob> {
		const deadline = Date.now() + 1000 * waitSeconds;
		for (;;) {
			const job = await this.deps.moves.driverJob(driverId);
			const left = deadline - Date.now();
			if (job.offer || job.ride || left <= 0 || this.deps.stopping()) return job;
			await this.deps.waits.wait(driverId, Math.min(left, this.deps.pollMs));
		}
	}

	async accept(driverId: string, { orderId }: driverApi.DriverOrderParams, ctx?: Context): Promise<DriverJob> {
		await this.ownOrder(driverId, orderId);
		return this.deps.moves.accept(driverId, orderId, ctx);
	}

	async decline(driverId: string, { orderId }: driverApi.DriverOrderParams): Promise<DriverView> {
		await this.ownOrder(driverId, orderId);
		return this.deps.moves.decline(driverId, orderId);
	}

	async arrived(driverId: string, { orderId }: driverApi.DriverOrderParams, ctx?: Context): Promise<DriverJob> {
		await this.ownOrder(driverId, orderId);
		return this.deps.moves.moveRide({ driverId, orderId }, "accepted", "arrived", undefined, ctx);
	}

	/** With the rider's OTP (422 INVALID_OTP, 409 OTP_LOCKED after too many tries). */
	async start(driverId: string, { orderId, otp }: driverApi.DriverStartParams, ctx?: Context): Promise<DriverJob> {
		await this.ownOrder(driverId, orderId);
		return this.deps.moves.moveRide({ driverId, orderId }, "arrived", "started", otp, ctx);
	}

	async drop(driverId: string, { orderId }: driverApi.DriverOrderParams, ctx?: Context): Promise<DriverJob> {
		await this.ownOrder(driverId, orderId);
		return this.deps.moves.moveRide({ driverId, orderId }, "started", "dropped", undefined, ctx);
	}

	/** The driver drops out before the ride started; the ride goes back to searching. */
	async cancel(driverId: string, { orderId, reason }: driverApi.DriverCancelParams, ctx?: Context): Promise<DriverView> {
		await this.ownOrder(driverId, orderId);
		return this.deps.moves.dropOut({ driverId, orderId }, reason, ctx);
	}

	/** The driver may act on `orderId`: it holds it, or was offered it once; anything else reads as unknown. */
	private async ownOrder(driverId: string, orderId: string): Promise<void> {
		const driver = await this.deps.moves.loadDriver(driverId);
		if (driver.order_id === orderId) return;
		if (await this.deps.tokens.wasOffered(driverId, orderId)) return;
		throw orderNotFound();
	}
}
