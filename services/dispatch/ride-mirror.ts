import type { InternalOrder, OrderCreatedEvent } from "../../contracts/orders";
import type { Point } from "../../contracts/common";
import { StatementBatcher } from "../../lib/statement-batcher";
import { followOrder, isMovingStatus, isTerminalStatus, sandboxScenario, shortError } from "./dispatch-rules";
import { isStale, pickupOf } from "./dispatch-views";
import type { DispatchRepo } from "./dispatch.repo";
import type { DispatchSettings } from "./dispatch.settings";
import type { DispatchLog, WorkSignal } from "./dispatch.types";
import type { DriverIndex } from "./driver-index";
import type { DriverRow } from "./drivers.repo";
import type { OrdersClient } from "./orders-client";
import type { NewRide, SeenOrder } from "./ride-mirror.repo";

/**
 * The ride mirror: dispatch's own view of each ride (`dispatch_rides`) and
 * how it follows the order's truth. Every status change goes through
 * `orders.transition` (orders owns the state machine); dispatch applies the
 * order it gets back and learns from events; the sweep (ride-sweep.ts)
 * reconciles it with `orders.listActiveStates`, so it survives lost events
 * and restarts.
 */

export interface RideMirrorDeps {
	settings: Pick<
		DispatchSettings,
		"fleetMode" | "locationIntervalMs" | "liveLocationIntervalMs" | "retryMatchMs" | "dispatchTimeoutMs" | "searchRadiusM" | "scheduleSearchMarginMs"
	>;
	repo: Pick<DispatchRepo, "drivers" | "mirror" | "matching" | "tx">;
	orders: Pick<OrdersClient, "get" | "listActiveStates">;
	index: Pick<DriverIndex, "publish" | "setDemand">;
	/** A ride is searching again: there is matching work. */
	onWork: WorkSignal;
	log: DispatchLog;
}

export class RideMirror {
	/** Mirror rows of new rides: concurrent `orders.created` events share one INSERT. */
	private readonly newRides: StatementBatcher<NewRide, boolean>;

	constructor(private readonly deps: RideMirrorDeps) {
		const { retryMatchMs, dispatchTimeoutMs, searchRadiusM } = deps.settings;
		const firstLook = { retryMatchMs, dispatchTimeoutMs, radiusM: searchRadiusM };
		// Up to 4 statements out at once: the pool is shared with the process's other services.
		this.newRides = new StatementBatcher(
			(rides) => deps.repo.mirror.insertNewRides(rides, firstLook),
			(r) => r.orderId,
			{ maxBatch: 200, maxInFlight: 4 },
		);
	}

	/**
	 * Makes dispatch's view of a ride (and the drivers holding it) agree with
	 * the order, under the ride's row lock. Idempotent; an order snapshot
	 * older than the one already applied is ignored, so events, sweeps and
	 * driver actions may all call it in any order.
	 */
	async applyOrder(order: InternalOrder, opts: { abandonInFlight?: boolean } = {}): Promise<void> {
		const { repo, settings } = this.deps;
		const changedDrivers: DriverRow[] = [];
		let searchAgain = false;
		// Whether the ride counts as demand afterwards (null: unchanged).
		let demand: boolean | null = null;
		await repo.tx(async (t) => {
			let ride = await repo.mirror.lockRide(order.orderId, t);
			if (!ride) {
				const sandbox = sandboxScenario(order.metadata, settings.fleetMode, order.mode);
				const row = {
					orderId: order.orderId,
					partnerId: order.partnerId,
					mode: order.mode,
					serviceType: order.serviceType,
					pickup: order.pickup,
					drop: order.drop,
					sandbox,
					...this.searchUntil(order.pickupAt),
				};
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
					let origin: Point | null = null;
					if (driverId) {
						const held = await repo.drivers.holdForRide(driverId, order.orderId, t);
						changedDrivers.push(...held);
						const d = held[0] ?? (await repo.drivers.driver(driverId, t));
						if (d && d.lat !== null && d.lng !== null) origin = { lat: d.lat, lng: d.lng };
						if (d && d.order_id !== order.orderId)
							this.deps.log.trouble(`Order ${order.orderId} names driver ${driverId}, who holds ${d.order_id ?? "nothing"}`);
					}
					const moving = isMovingStatus(order.status);
					const locationIntervalMs = ride.mode === "live" ? settings.liveLocationIntervalMs : settings.locationIntervalMs;
					await repo.mirror.assignRide(
						seen,
						{ driverId, status: order.status, statusChanged: action.statusChanged, moving, locationIntervalMs, origin },
						t,
					);
					return;
				}
			}
		});
		if (demand !== null) this.deps.index.setDemand(order, demand);
		this.deps.index.publish(changedDrivers);
		if (searchAgain) this.deps.onWork();
	}

	/**
	 * A new ride from its `orders.created` snapshot: the mirror row in one
	 * autocommit statement (no `orders.get`, no transaction). A row already
	 * there (from the sweep, another instance, or the tombstone of an order
	 * that ended first) is at least as new, so it is left alone. Matching work
	 * then offers the ride if a driver is near; otherwise it starts backed off.
	 */
	async mirrorNewRide(event: OrderCreatedEvent): Promise<void> {
		const inserted = await this.newRides.submit({
			orderId: event.orderId,
			partnerId: event.partnerId,
			mode: event.mode,
			serviceType: event.serviceType,
			pickup: event.pickup,
			drop: event.drop,
			sandbox: sandboxScenario(event.sandbox === undefined ? null : { sandbox: event.sandbox }, this.deps.settings.fleetMode, event.mode),
			seen: { version: event.version, updatedAt: event.updatedAt },
			...this.searchUntil(event.pickupAt),
		});
		if (inserted) this.deps.index.setDemand(event, true);
		this.deps.onWork();
	}

	/** A scheduled ride's last moment of search: its pickup time less the margin, so `no_driver_found` reaches the partner before it. */
	private searchUntil(pickupAt: string | undefined): { searchUntil?: string } {
		const at = pickupAt === undefined ? NaN : Date.parse(pickupAt);
		return Number.isFinite(at) ? { searchUntil: new Date(at - this.deps.settings.scheduleSearchMarginMs).toISOString() } : {};
	}

	/** `orders.statusChanged`: reconcile unless dispatch already knows that status. */
	async orderMoved(orderId: string, to: string): Promise<void> {
		const ride = await this.deps.repo.mirror.ride(orderId);
		if (ride && (ride.order_status === to || ride.state === "closed")) return;
		await this.reconcile(orderId);
	}

	/** Asks orders for the truth about one ride and applies it (a vanished order closes dispatch's view). */
	async reconcile(orderId: string, opts: { abandonInFlight?: boolean } = {}): Promise<void> {
		const { repo, orders, index } = this.deps;
		const order = await orders.get(orderId);
		if (order) {
			await this.applyOrder(order, opts);
			return;
		}
		const { ride, released } = await repo.tx(async (t) => {
			const ride = await repo.mirror.lockRide(orderId, t);
			await repo.mirror.closeRide(orderId, t);
			await repo.matching.settleOffers(orderId, t);
			return { ride, released: await repo.drivers.freeDrivers(orderId, t) };
		});
		// No longer demand here either (other instances drop it at their next demand refresh).
		if (ride)
			index.setDemand({ orderId, partnerId: ride.partner_id ?? "", mode: ride.mode, serviceType: ride.service_type, pickup: pickupOf(ride) }, false);
		index.publish(released);
	}

	/** Orders said no (somebody moved first): take its current truth. */
	async afterRefusal(orderId: string, err: unknown): Promise<void> {
		this.deps.log.debug(`orders refused a move of ${orderId}: ${shortError(err)}`);
		try {
			await this.reconcile(orderId, { abandonInFlight: true });
		} catch (e) {
			this.deps.log.trouble(`Reconciling ${orderId} failed: ${shortError(e)} (the sweep will retry)`);
		}
	}
}
