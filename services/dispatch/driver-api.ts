import type { Context } from "moleculer";
import { randomUUID } from "node:crypto";
import type { DriverJob, DriverView, DriverWaitStartedEvent, OfferCreatedEvent } from "../../contracts/dispatch";
import * as driverApi from "../../contracts/driver";
import { orderNotFound } from "../../lib/errors";
import { toDriverView } from "./dispatch-views";
import type { DriverMoves } from "./driver-moves";
import type { RideSteps } from "./ride-steps";
import type { DriverTokensRepo } from "./driver-tokens.repo";
import type { OfferWaits } from "./offer-waits";

/**
 * The driver API's use cases (`/driver/*` on the gateway): the driver is the
 * one its token names (the gateway puts it in `ctx.meta.driverId`), never
 * one from the body. Every move is the same DriverMoves or RideSteps call the
 * internal actions and the simulated fleet make: one code path.
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
	moves: Pick<DriverMoves, "loadDriver" | "goOnline" | "goOffline" | "setLocation" | "decline" | "driverJob">;
	steps: Pick<RideSteps, "accept" | "moveRide" | "dropOut">;
	tokens: Pick<DriverTokensRepo, "wasOffered">;
	waits: Pick<OfferWaits, "open" | "close" | "takeUnclaimed">;
	/** Tells every instance a wait opened (`dispatch.driverWaitStarted`): the driver's other waits end. */
	announceWait: (event: DriverWaitStartedEvent) => void;
	stopping: () => boolean;
}

/** The job a driver's wait answers when an offer ended it: from the offer event alone, no database read. */
function jobFromOffer(job: DriverJob, offer: OfferCreatedEvent): DriverJob {
	const { orderId, expiresAt, pickup, drop, distanceM, eta } = offer;
	return { driver: { ...job.driver, status: "offered", orderId }, offer: { orderId, expiresAt, pickup, drop, distanceM, eta }, ride: null };
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

	/**
	 * The current offer or ride at once, else waits up to `waitSeconds` for an
	 * offer. The wait opens before the job is read, so an offer made meanwhile
	 * still ends it; a driver's newer wait (on any instance) ends this one,
	 * which then answers the job as it is. Waiting reads nothing: the job of an
	 * idle driver comes from this instance's memory, an offer from its event.
	 */
	async offers(driverId: string, waitSeconds = driverApi.DRIVER_OFFERS_DEFAULT_WAIT_S): Promise<DriverJob> {
		if (waitSeconds <= 0 || this.deps.stopping()) return this.deps.moves.driverJob(driverId);
		const waitId = randomUUID();
		const ended = this.deps.waits.open(driverId, waitId, 1000 * waitSeconds);
		this.deps.announceWait({ driverId, waitId });
		const job = await this.deps.moves.driverJob(driverId);
		if (job.offer || job.ride) {
			this.deps.waits.close(driverId, waitId);
			await ended;
			return job;
		}
		const unclaimed = this.deps.waits.takeUnclaimed(driverId);
		const how = unclaimed ? ({ kind: "offer", offer: unclaimed } as const) : await ended;
		if (how.kind === "offer") return jobFromOffer(job, how.offer);
		// The job as it is now (from memory: the driver may have gone offline or been revoked meanwhile).
		return this.deps.moves.driverJob(driverId);
	}

	async accept(driverId: string, { orderId }: driverApi.DriverOrderParams, ctx?: Context): Promise<DriverJob> {
		await this.ownOrder(driverId, orderId);
		return this.deps.steps.accept(driverId, orderId, ctx);
	}

	async decline(driverId: string, { orderId }: driverApi.DriverOrderParams): Promise<DriverView> {
		await this.ownOrder(driverId, orderId);
		return this.deps.moves.decline(driverId, orderId);
	}

	/** Only near the pickup; `location`, when sent, is recorded first (as `/driver/location` would). */
	async arrived(driverId: string, { orderId, location }: driverApi.DriverArrivedParams, ctx?: Context): Promise<DriverJob> {
		await this.ownOrder(driverId, orderId);
		const at = location ? { lat: location.lat, lng: location.lng, heading: location.heading } : undefined;
		return this.deps.steps.moveRide({ driverId, orderId, location: at }, "accepted", "arrived", undefined, ctx);
	}

	/** With the rider's OTP (422 INVALID_OTP, 409 OTP_LOCKED after too many tries). */
	async start(driverId: string, { orderId, otp }: driverApi.DriverStartParams, ctx?: Context): Promise<DriverJob> {
		await this.ownOrder(driverId, orderId);
		return this.deps.steps.moveRide({ driverId, orderId }, "arrived", "started", otp, ctx);
	}

	async drop(driverId: string, { orderId }: driverApi.DriverOrderParams, ctx?: Context): Promise<DriverJob> {
		await this.ownOrder(driverId, orderId);
		return this.deps.steps.moveRide({ driverId, orderId }, "started", "dropped", undefined, ctx);
	}

	/** The driver drops out before the ride started; the ride goes back to searching. */
	async cancel(driverId: string, { orderId, reason }: driverApi.DriverCancelParams, ctx?: Context): Promise<DriverView> {
		await this.ownOrder(driverId, orderId);
		return this.deps.steps.dropOut({ driverId, orderId }, reason, ctx);
	}

	/** The driver may act on `orderId`: it holds it, or was offered it once; anything else reads as unknown. */
	private async ownOrder(driverId: string, orderId: string): Promise<void> {
		const driver = await this.deps.moves.loadDriver(driverId);
		if (driver.order_id === orderId) return;
		if (await this.deps.tokens.wasOffered(driverId, orderId)) return;
		throw orderNotFound();
	}
}
