/**
 * Drivers' apps waiting for an offer on this instance (`/driver/offers`
 * long-polls), woken by `dispatch.offerCreated` naming the driver, whichever
 * instance made the offer. No broker, no database: a wait costs a timer.
 */
export class OfferWaits {
	private readonly waiters = new Map<string, Set<() => void>>();

	/** Resolves on a wake for the driver or after `ms`. */
	wait(driverId: string, ms: number): Promise<void> {
		return new Promise((resolve) => {
			const set = this.waiters.get(driverId) ?? new Set<() => void>();
			this.waiters.set(driverId, set);
			const done = () => {
				clearTimeout(timer);
				set.delete(done);
				if (set.size === 0) this.waiters.delete(driverId);
				resolve();
			};
			const timer = setTimeout(done, ms);
			set.add(done);
		});
	}

	/** Ends every wait of the driver now. */
	wake(driverId: string): void {
		const set = this.waiters.get(driverId);
		if (set) for (const done of [...set]) done();
	}

	/** Drivers with a wait open here. */
	get size(): number {
		return this.waiters.size;
	}
}
