import type { OfferCreatedEvent } from "../../contracts/dispatch";
import { ApiError } from "../../lib/errors";

/**
 * Drivers' apps waiting for an offer on this instance (`/driver/offers`
 * long-polls). A wait costs a timer and a map entry: no database, no
 * polling. It ends on `dispatch.offerCreated` naming the driver (whichever
 * instance made the offer), when the same driver opens another wait (here
 * or, through `dispatch.driverWaitStarted`, on another instance), at its
 * deadline, or when the service stops. One wait per driver; `max` per
 * instance.
 *
 * An offer that arrives while the driver has no wait open here is kept until
 * it expires, so a wait opened a moment later still finds it.
 */

export type WaitEnd = { kind: "offer"; offer: OfferCreatedEvent } | { kind: "superseded" } | { kind: "timeout" } | { kind: "stopping" };

interface OpenWait {
	id: string;
	end: (how: WaitEnd) => void;
}

/** Offers kept for drivers with no wait open, at most (the oldest go first). */
const MAX_UNCLAIMED = 100_000;
/** Seconds a full instance asks the driver's app to wait before it tries again. */
const FULL_RETRY_AFTER_S = 5;

export class OfferWaits {
	private readonly waits = new Map<string, OpenWait>();
	private readonly unclaimed = new Map<string, OfferCreatedEvent>();

	constructor(private readonly max: number) {}

	/**
	 * Opens the driver's wait, ending the one it had open here (that one
	 * answers at once). The promise resolves however the wait ends.
	 */
	open(driverId: string, waitId: string, ms: number): Promise<WaitEnd> {
		this.supersede(driverId);
		if (this.waits.size >= this.max) {
			throw new ApiError("DRIVER_WAITS_FULL", "Too many drivers are waiting on this instance; retry shortly", { retryAfter: FULL_RETRY_AFTER_S });
		}
		return new Promise<WaitEnd>((resolve) => {
			const timer = setTimeout(() => end({ kind: "timeout" }), ms);
			const end = (how: WaitEnd) => {
				clearTimeout(timer);
				if (this.waits.get(driverId)?.id === waitId) this.waits.delete(driverId);
				resolve(how);
			};
			this.waits.set(driverId, { id: waitId, end });
		});
	}

	/** Ends the driver's wait here unless it is `keepWaitId` (a wait opened on another instance, or here). */
	supersede(driverId: string, keepWaitId?: string): void {
		const wait = this.waits.get(driverId);
		if (wait && wait.id !== keepWaitId) wait.end({ kind: "superseded" });
	}

	/** Ends this wait now if it is still open (its caller has its answer already). */
	close(driverId: string, waitId: string): void {
		const wait = this.waits.get(driverId);
		if (wait?.id === waitId) wait.end({ kind: "superseded" });
	}

	/** An offer for a driver: its wait here answers with it, or it is kept for the driver's next wait. */
	offer(event: OfferCreatedEvent): void {
		const wait = this.waits.get(event.driverId);
		if (wait) {
			wait.end({ kind: "offer", offer: event });
			return;
		}
		this.unclaimed.delete(event.driverId);
		this.unclaimed.set(event.driverId, event);
		if (this.unclaimed.size > MAX_UNCLAIMED) this.unclaimed.delete(this.unclaimed.keys().next().value as string);
	}

	/** The offer kept for the driver, if it has not expired (taken: it is answered once). */
	takeUnclaimed(driverId: string, now = Date.now()): OfferCreatedEvent | undefined {
		const offer = this.unclaimed.get(driverId);
		if (!offer) return undefined;
		this.unclaimed.delete(driverId);
		return Date.parse(offer.expiresAt) > now ? offer : undefined;
	}

	/** Ends every wait (the service stops). */
	endAll(): void {
		for (const wait of [...this.waits.values()]) wait.end({ kind: "stopping" });
	}

	/** Drivers with a wait open here. */
	get size(): number {
		return this.waits.size;
	}
}
