import type { Context } from "moleculer";
import type { InternalOrder, ListActiveParams, ListActiveStatesResult, OrderIdParams, TransitionParams } from "../../contracts/orders";
import type { LatLng } from "../../lib/geo";
import { errorType, followOrder, isMovingStatus, isTerminalStatus, orderMode, sandboxScenario, shortError } from "./dispatch-rules";
import { isStale } from "./dispatch-views";
import type { DriverRow } from "./drivers.repo";
import type { SeenOrder } from "./ride-mirror.repo";
import type { DispatchPart } from "./dispatch.types";

/**
 * The ride mirror: dispatch's own view of each ride (`dispatch_rides`) and
 * how it follows the order's truth. Every status change goes through
 * `orders.transition` (orders owns the state machine); dispatch applies the
 * order it gets back, learns from events, and reconciles with
 * `orders.listActiveStates` in the sweep, so it survives lost events and restarts.
 */
export const rideMirrorMethods: DispatchPart<"getOrder" | "transition" | "applyOrder" | "mirrorNewRide" | "reconcileOrder" | "afterRefusal" | "sweep" | "warnIfNoFleet"> = {
	async getOrder(orderId: string, ctx?: Context) {
		try {
			return await (ctx ?? this.broker).call<InternalOrder, OrderIdParams>("orders.get", { orderId });
		} catch (err) {
			if (errorType(err) === "ORDER_NOT_FOUND") return null;
			throw err;
		}
	},

	async transition(params: TransitionParams, ctx?: Context) {
		const clean: TransitionParams = { ...params };
		for (const key of Object.keys(clean) as Array<keyof TransitionParams>) if (clean[key] === undefined) delete clean[key];
		return (ctx ?? this.broker).call<InternalOrder, TransitionParams>("orders.transition", clean);
	},

	/**
	 * Makes dispatch's view of a ride (and the drivers holding it) agree with
	 * the order, under the ride's row lock. Idempotent; an order snapshot
	 * older than the one already applied is ignored, so events, sweeps and
	 * driver actions may all call it in any order.
	 */
	async applyOrder(order, opts = {}) {
		const repo = this.repo;
		const changedDrivers: DriverRow[] = [];
		let searchAgain = false;
		// Whether the ride counts as demand afterwards (null: unchanged).
		let demand: boolean | null = null;
		await repo.tx(async (t) => {
			let ride = await repo.mirror.lockRide(order.orderId, t);
			if (!ride) {
				const mode = orderMode(order);
				const sandbox = sandboxScenario(order.metadata, this.cfg.fleetMode, mode);
				const row = { orderId: order.orderId, partnerId: order.partnerId, mode, serviceType: order.serviceType, pickup: order.pickup, drop: order.drop, sandbox };
				if (isTerminalStatus(order.status)) {
					// A tombstone: the order ended before dispatch mirrored it, and a
					// late orders.created (which carries the searching snapshot) must
					// not open it again.
					await repo.mirror.insertRide({ ...row, seen: { version: order.version, updatedAt: order.updatedAt }, closedAs: order.status }, t);
					changedDrivers.push(...(await repo.drivers.freeDrivers(order.orderId, t)));
					demand = false;
					return;
				}
				await repo.mirror.insertRide(row, t);
				demand = true;
				ride = (await repo.mirror.lockRide(order.orderId, t))!;
				searchAgain = true;
			}
			if (ride.state === "closed") {
				// Final. Only make sure nobody still holds the ride.
				changedDrivers.push(...(await repo.drivers.freeDrivers(order.orderId, t)));
				demand = false;
				return;
			}
			if (isStale(order, ride)) return;
			const action = followOrder(
				{ state: ride.state, orderStatus: ride.order_status, driverId: ride.driver_id, leaseActive: ride.lease_active },
				order.status,
				order.driver?.id ?? null,
				opts.abandonInFlight ?? false,
			);
			const seen: SeenOrder = [order.orderId, order.version, order.updatedAt];
			switch (action.kind) {
				case "none":
					await repo.mirror.sawOrder(seen, t);
					return;
				case "close":
					await repo.mirror.closeRide(order.orderId, t, order);
					await repo.matching.settleOffers(order.orderId, t);
					changedDrivers.push(...(await repo.drivers.freeDrivers(order.orderId, t)));
					demand = false;
					return;
				case "research":
					await repo.matching.settleOffers(order.orderId, t);
					changedDrivers.push(...(await repo.drivers.freeDrivers(order.orderId, t)));
					await repo.mirror.searchAgain(seen, action.formerDriverId, action.droppedOut, t);
					searchAgain = true;
					demand = true;
					return;
				case "resume":
					await repo.mirror.resumeSearch(seen, t);
					searchAgain = true;
					demand = true;
					return;
				case "assign": {
					const driverId = action.driverId;
					demand = false;
					await repo.matching.settleOffers(order.orderId, t, driverId);
					changedDrivers.push(...(await repo.drivers.freeDrivers(order.orderId, t, { exceptDriverId: driverId })));
					let origin: LatLng | null = null;
					if (driverId) {
						const held = await repo.drivers.holdForRide(driverId, order.orderId, t);
						changedDrivers.push(...held);
						const d = held[0] ?? (await repo.drivers.driver(driverId, t));
						if (d && d.lat !== null && d.lng !== null) origin = { lat: d.lat, lng: d.lng };
						if (d && d.order_id !== order.orderId) this.trouble(`Order ${order.orderId} names driver ${driverId}, who holds ${d.order_id ?? "nothing"}`);
					}
					const moving = isMovingStatus(order.status);
					await repo.mirror.assignRide(seen, { driverId, status: order.status, statusChanged: action.statusChanged, moving, locationIntervalMs: ride.mode === "live" ? this.cfg.liveLocationIntervalMs : this.cfg.locationIntervalMs, origin }, t);
					return;
				}
			}
		});
		if (demand !== null) this.setDemand(order, demand);
		this.publishDrivers(changedDrivers);
		if (searchAgain) this.kick();
	},

	/**
	 * A new ride from its `orders.created` snapshot: the mirror row in one
	 * autocommit statement (no `orders.get`, no transaction). A row already
	 * there (from the sweep, another instance, or the tombstone of an order
	 * that ended first) is at least as new, so it is left alone. The kick then
	 * matches the ride if a driver is near; otherwise it starts backed off. An
	 * event without the snapshot (an older orders instance) asks orders as
	 * before.
	 */
	async mirrorNewRide(event) {
		if (event.version === undefined || event.updatedAt === undefined || event.drop === undefined || event.status !== "searching") {
			await this.reconcileOrder(event.orderId);
			return;
		}
		const mode = orderMode(event);
		const inserted = await this.newRides.submit({
			orderId: event.orderId,
			partnerId: event.partnerId,
			mode,
			serviceType: event.serviceType,
			pickup: event.pickup,
			drop: event.drop,
			sandbox: sandboxScenario(event.sandbox === undefined ? null : { sandbox: event.sandbox }, this.cfg.fleetMode, mode),
			seen: { version: event.version, updatedAt: event.updatedAt },
		});
		if (inserted) this.setDemand(event, true);
	},

	/** Asks orders for the truth about one ride and applies it (a vanished order closes dispatch's view). */
	async reconcileOrder(orderId, opts = {}) {
		const order = await this.getOrder(orderId);
		if (order) {
			await this.applyOrder(order, opts);
			return;
		}
		const released = await this.repo.tx(async (t) => {
			await this.repo.mirror.closeRide(orderId, t);
			await this.repo.matching.settleOffers(orderId, t);
			return this.repo.drivers.freeDrivers(orderId, t);
		});
		this.publishDrivers(released);
	},

	/** Orders said no (somebody moved first): take its current truth. */
	async afterRefusal(orderId, err) {
		this.logger.debug(`orders refused a move of ${orderId}: ${shortError(err)}`);
		try {
			await this.reconcileOrder(orderId, { abandonInFlight: true });
		} catch (e) {
			this.trouble(`Reconciling ${orderId} failed: ${shortError(e)} (the sweep will retry)`);
		}
	},

	/**
	 * Reconciliation, so dispatch survives lost broker events and restarts:
	 * settles in-flight calls whose lease ran out, learns about active rides
	 * from `orders.listActiveStates` (paged through all of them, `DISPATCH_SWEEP_PAGE`
	 * at a time), closes rides orders no longer has active, and
	 * frees drivers that hold a ride without reason.
	 */
	async sweep() {
		if (this.sweepRunning) return this.sweepRunning;
		this.sweepRunning = (async () => {
			for (const { order_id } of await this.repo.mirror.staleTransitions()) {
				await this.reconcileOrder(order_id, { abandonInFlight: true }).catch((err: unknown) => this.trouble(`Settling ${order_id}: ${shortError(err)}`));
			}

			// A full pass over every active ride, a page at a time (keyset cursor):
			// a ride whose hint was lost is found however many rides are active.
			// The pages carry each ride's state only; the few that disagree are
			// read whole (reconcileOrder), so a pass costs bytes per ride, not orders.
			// Each page is compared with the mirror rows as they are now, not as
			// the pass began: rides created meanwhile were mirrored by their own
			// events, and reading them again would be work for nothing.
			const openAtStart = await this.repo.mirror.openRideIds();
			const activeIds = new Set<string>();
			let after: string | undefined;
			do {
				const page = await this.broker.call<ListActiveStatesResult, ListActiveParams>("orders.listActiveStates", after ? { limit: this.cfg.sweepPage, after } : { limit: this.cfg.sweepPage });
				const mirrorOf = new Map((await this.repo.mirror.mirrorStates(page.rides.map((r) => r.orderId))).map((m) => [m.order_id, m]));
				for (const ride of page.rides) {
					if (this.stopping) return;
					activeIds.add(ride.orderId);
					const m = mirrorOf.get(ride.orderId);
					const agrees = m && m.order_status === ride.status && (ride.status === "searching" || m.driver_id === ride.driverId);
					if (!agrees) {
						// The order as it is now: applyOrder ignores it if dispatch already knows better.
						await this.reconcileOrder(ride.orderId).catch((err: unknown) => this.trouble(`Sweep ${ride.orderId}: ${shortError(err)}`));
					}
				}
				after = page.nextCursor ?? undefined;
			} while (after !== undefined);
			// The pass saw every ride active since it began: open mirrors it did not see ended meanwhile.
			for (const m of openAtStart) {
				if (this.stopping) return;
				if (!activeIds.has(m.order_id)) {
					await this.reconcileOrder(m.order_id).catch((err: unknown) => this.trouble(`Sweep ${m.order_id}: ${shortError(err)}`));
				}
			}

			this.warnIfNoFleet();

			const orphans = await this.repo.drivers.freeOrphanDrivers();
			if (orphans.length > 0) this.trouble(`Freed ${orphans.length} driver(s) holding a ride without reason`);
			this.publishDrivers(orphans);
		})();
		try {
			await this.sweepRunning;
		} catch (err) {
			this.trouble(`Dispatch sweep: ${shortError(err)}`);
		} finally {
			this.sweepRunning = null;
		}
	},

	/** Simulated mode needs the fleet somewhere in the cluster, or rides only ever time out. */
	warnIfNoFleet() {
		if (this.cfg.fleetMode !== "simulated" || Date.now() - this.startedAt <= 30_000 || Date.now() - this.fleetWarnedAt <= 60_000) return;
		const fleetRuns = this.broker.registry.getServiceList({ onlyAvailable: true }).some((svc: { name: string }) => svc.name === "fleet");
		if (!fleetRuns) {
			this.fleetWarnedAt = Date.now();
			this.trouble("FLEET_MODE=simulated but no fleet service runs in this namespace: add `fleet` to SERVICES (e.g. SERVICES=dispatch,fleet), or set FLEET_MODE=live");
		}
	},
};
