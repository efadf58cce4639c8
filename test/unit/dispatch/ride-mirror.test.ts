import type { OrderCreatedEvent } from "../../../contracts/orders";
import type { DispatchSettings } from "../../../services/dispatch/dispatch.settings";
import { RideMirror } from "../../../services/dispatch/ride-mirror";
import { ApiError } from "../../../lib/errors";
import {
	BLR,
	TX,
	asDispatchRepo,
	away,
	dispatchSettings,
	driverRow,
	fakeLog,
	fakeOrders,
	fakeRepo,
	internalOrder,
	orderDriver,
	rideRow,
} from "../../helpers/dispatch-fakes";

function setup(overrides: Partial<DispatchSettings> = {}) {
	const settings = dispatchSettings(overrides);
	const repo = fakeRepo();
	const orders = fakeOrders();
	const index = { publish: jest.fn(), setDemand: jest.fn() };
	const onWork = jest.fn();
	const log = fakeLog();
	const mirror = new RideMirror({ settings, repo: asDispatchRepo(repo), orders, index, onWork, log });
	return { settings, repo, orders, index, onWork, log, mirror };
}

const seenOf = (o: { orderId: string; version: number; updatedAt: string }) => [o.orderId, o.version, o.updatedAt];

describe("RideMirror", () => {
	describe("applyOrder on an order dispatch has no row for", () => {
		it("a searching order: inserts the mirror row, counts it as demand and signals matching work", async () => {
			const { mirror, repo, index, onWork } = setup();
			const order = internalOrder({ version: 0 });
			repo.mirror.lockRide.mockResolvedValueOnce(undefined).mockResolvedValueOnce(rideRow({ order_version: 0, order_updated_at: null }));
			await mirror.applyOrder(order);
			expect(repo.mirror.insertRide).toHaveBeenCalledWith(
				{ orderId: "ord_1", partnerId: "prt_1", mode: "test", serviceType: "cab", pickup: order.pickup, drop: order.drop, sandbox: null },
				TX,
			);
			expect(repo.mirror.insertRide.mock.calls[0][0]).not.toHaveProperty("closedAs");
			expect(index.setDemand).toHaveBeenCalledWith(order, true);
			expect(onWork).toHaveBeenCalledTimes(1);
			// The fresh row agrees with the order: only the snapshot is recorded.
			expect(repo.mirror.sawOrder).toHaveBeenCalledWith(seenOf(order), TX);
			expect(repo.mirror.closeRide).not.toHaveBeenCalled();
		});

		it("a terminal order: writes a tombstone (closedAs) and frees any driver holding it, no demand, no work", async () => {
			const { mirror, repo, index, onWork } = setup();
			const order = internalOrder({ status: "customer_cancelled", version: 3 });
			const freed = driverRow({ id: "drv_9", rev: 4 });
			repo.mirror.lockRide.mockResolvedValueOnce(undefined);
			repo.drivers.freeDrivers.mockResolvedValueOnce([freed]);
			await mirror.applyOrder(order);
			expect(repo.mirror.insertRide).toHaveBeenCalledWith(
				expect.objectContaining({ orderId: "ord_1", closedAs: "customer_cancelled", seen: { version: 3, updatedAt: order.updatedAt } }),
				TX,
			);
			expect(repo.drivers.freeDrivers).toHaveBeenCalledWith("ord_1", TX);
			expect(index.publish).toHaveBeenCalledWith([freed]);
			expect(index.setDemand).toHaveBeenCalledWith(order, false);
			expect(onWork).not.toHaveBeenCalled();
		});

		it("a sandbox directive applies to a test ride in simulated mode only", async () => {
			const simulated = setup({ fleetMode: "simulated" });
			const metadata = { sandbox: "no_driver_found" };
			simulated.repo.mirror.lockRide.mockResolvedValueOnce(undefined).mockResolvedValueOnce(rideRow());
			await simulated.mirror.applyOrder(internalOrder({ metadata }));
			expect(simulated.repo.mirror.insertRide.mock.calls[0][0].sandbox).toBe("no_driver_found");

			const live = setup({ fleetMode: "live" });
			live.repo.mirror.lockRide.mockResolvedValueOnce(undefined).mockResolvedValueOnce(rideRow());
			await live.mirror.applyOrder(internalOrder({ metadata }));
			expect(live.repo.mirror.insertRide.mock.calls[0][0].sandbox).toBeNull();
		});
	});

	describe("applyOrder on a known ride", () => {
		it("a stale snapshot (older version) changes nothing", async () => {
			const { mirror, repo, index, onWork } = setup();
			repo.mirror.lockRide.mockResolvedValue(rideRow({ state: "assigned", order_status: "accepted", driver_id: "drv_1", order_version: 5 }));
			await mirror.applyOrder(internalOrder({ status: "customer_cancelled", version: 4 }));
			for (const write of [repo.mirror.sawOrder, repo.mirror.closeRide, repo.matching.settleOffers, repo.drivers.freeDrivers, repo.mirror.assignRide])
				expect(write).not.toHaveBeenCalled();
			expect(index.setDemand).not.toHaveBeenCalled();
			expect(index.publish).toHaveBeenCalledWith([]);
			expect(onWork).not.toHaveBeenCalled();
		});

		it("a snapshot of the same version but older updatedAt is stale too", async () => {
			const { mirror, repo } = setup();
			repo.mirror.lockRide.mockResolvedValue(rideRow({ order_version: 2, order_updated_at: new Date("2026-01-01T10:05:00.000Z") }));
			await mirror.applyOrder(internalOrder({ status: "customer_cancelled", version: 2, updatedAt: "2026-01-01T10:04:59.000Z" }));
			expect(repo.mirror.closeRide).not.toHaveBeenCalled();
		});

		it("a cancelled order closes the ride, settles its offers, frees and publishes its drivers, and ends its demand", async () => {
			const { mirror, repo, index, onWork } = setup();
			const order = internalOrder({ status: "customer_cancelled", version: 2 });
			const freed = driverRow({ id: "drv_1", rev: 9 });
			repo.mirror.lockRide.mockResolvedValue(rideRow({ state: "assigned", order_status: "accepted", driver_id: "drv_1", order_version: 1 }));
			repo.drivers.freeDrivers.mockResolvedValue([freed]);
			await mirror.applyOrder(order);
			expect(repo.mirror.closeRide).toHaveBeenCalledWith("ord_1", TX, order);
			expect(repo.matching.settleOffers).toHaveBeenCalledWith("ord_1", TX);
			expect(repo.drivers.freeDrivers).toHaveBeenCalledWith("ord_1", TX);
			expect(index.publish).toHaveBeenCalledWith([freed]);
			expect(index.setDemand).toHaveBeenCalledWith(order, false);
			expect(onWork).not.toHaveBeenCalled();
		});

		it("a closed ride stays closed: only drivers still holding it are freed", async () => {
			const { mirror, repo, index } = setup();
			const freed = driverRow({ id: "drv_late" });
			repo.mirror.lockRide.mockResolvedValue(rideRow({ state: "closed", order_status: "dropped" }));
			repo.drivers.freeDrivers.mockResolvedValue([freed]);
			await mirror.applyOrder(internalOrder({ status: "accepted", version: 9 }));
			expect(repo.mirror.assignRide).not.toHaveBeenCalled();
			expect(index.publish).toHaveBeenCalledWith([freed]);
		});

		it("an assigned ride whose order is searching again (the driver dropped out) searches again without that driver", async () => {
			const { mirror, repo, index, onWork } = setup();
			const order = internalOrder({ status: "searching", version: 4 });
			repo.mirror.lockRide.mockResolvedValue(rideRow({ state: "assigned", order_status: "arrived", driver_id: "drv_1", order_version: 3 }));
			await mirror.applyOrder(order);
			expect(repo.matching.settleOffers).toHaveBeenCalledWith("ord_1", TX);
			expect(repo.drivers.freeDrivers).toHaveBeenCalledWith("ord_1", TX);
			expect(repo.mirror.searchAgain).toHaveBeenCalledWith(seenOf(order), "drv_1", true, TX);
			expect(index.setDemand).toHaveBeenCalledWith(order, true);
			expect(onWork).toHaveBeenCalledTimes(1);
		});

		it("an accepted order holds its driver, frees the others and assigns the ride with the driver's position as origin", async () => {
			const { mirror, repo, index, settings } = setup();
			const driver = driverRow({ id: "drv_2", status: "on_trip", order_id: "ord_1", ...away(BLR, 800) });
			const other = driverRow({ id: "drv_3" });
			const order = internalOrder({ status: "accepted", version: 2, driver: orderDriver(driver) });
			repo.mirror.lockRide.mockResolvedValue(rideRow({ state: "accepting", driver_id: "drv_2", order_version: 1, lease_active: true }));
			repo.drivers.freeDrivers.mockResolvedValue([other]);
			repo.drivers.holdForRide.mockResolvedValue([driver]);
			await mirror.applyOrder(order);
			expect(repo.matching.settleOffers).toHaveBeenCalledWith("ord_1", TX, "drv_2");
			expect(repo.drivers.freeDrivers).toHaveBeenCalledWith("ord_1", TX, { exceptDriverId: "drv_2" });
			expect(repo.drivers.holdForRide).toHaveBeenCalledWith("drv_2", "ord_1", TX);
			expect(repo.mirror.assignRide).toHaveBeenCalledWith(
				seenOf(order),
				{
					driverId: "drv_2",
					status: "accepted",
					statusChanged: true,
					moving: true,
					locationIntervalMs: settings.locationIntervalMs,
					origin: { lat: driver.lat, lng: driver.lng },
				},
				TX,
			);
			expect(index.publish).toHaveBeenCalledWith([other, driver]);
			expect(index.setDemand).toHaveBeenCalledWith(order, false);
		});

		it("a live ride's location cadence is the live one", async () => {
			const { mirror, repo, settings } = setup({ locationIntervalMs: 250, liveLocationIntervalMs: 5000 });
			const driver = driverRow({ id: "drv_2", status: "on_trip", order_id: "ord_1", mode: "live" });
			repo.mirror.lockRide.mockResolvedValue(rideRow({ mode: "live", order_version: 1 }));
			repo.drivers.holdForRide.mockResolvedValue([driver]);
			await mirror.applyOrder(internalOrder({ mode: "live", status: "accepted", version: 2, driver: orderDriver(driver) }));
			expect(repo.mirror.assignRide.mock.calls[0][1].locationIntervalMs).toBe(settings.liveLocationIntervalMs);
		});

		it("logs trouble when the order names a driver who holds another ride", async () => {
			const { mirror, repo, log } = setup();
			const busy = driverRow({ id: "drv_2", status: "on_trip", order_id: "ord_other" });
			repo.mirror.lockRide.mockResolvedValue(rideRow({ order_version: 1 }));
			repo.drivers.holdForRide.mockResolvedValue([]);
			repo.drivers.driver.mockResolvedValue(busy);
			await mirror.applyOrder(internalOrder({ status: "accepted", version: 2, driver: orderDriver(busy) }));
			expect(log.trouble).toHaveBeenCalledWith(expect.stringContaining("holds ord_other"));
		});

		it("an accept in flight is given up only when the caller says its call is over (abandonInFlight)", async () => {
			const { mirror, repo } = setup();
			const accepting = rideRow({ state: "accepting", driver_id: "drv_1", order_version: 1, lease_active: true });
			repo.mirror.lockRide.mockResolvedValue(accepting);
			await mirror.applyOrder(internalOrder({ version: 1 }));
			expect(repo.mirror.searchAgain).not.toHaveBeenCalled();
			await mirror.applyOrder(internalOrder({ version: 1 }), { abandonInFlight: true });
			expect(repo.mirror.searchAgain).toHaveBeenCalledWith(expect.anything(), "drv_1", false, TX);
		});
	});

	describe("mirrorNewRide", () => {
		const event: OrderCreatedEvent = {
			orderId: "ord_new",
			partnerId: "prt_1",
			mode: "test",
			serviceType: "cab",
			pickup: BLR,
			drop: away(BLR, 3000),
			status: "searching",
			version: 0,
			updatedAt: "2026-01-01T10:00:00.000Z",
		};

		it("submits the row with its snapshot and first look, counts it as demand and signals work", async () => {
			const { mirror, repo, index, onWork, settings } = setup();
			await mirror.mirrorNewRide(event);
			expect(repo.mirror.insertNewRides).toHaveBeenCalledWith(
				[
					{
						orderId: "ord_new",
						partnerId: "prt_1",
						mode: "test",
						serviceType: "cab",
						pickup: BLR,
						drop: event.drop,
						sandbox: null,
						seen: { version: 0, updatedAt: event.updatedAt },
					},
				],
				{ retryMatchMs: settings.retryMatchMs, dispatchTimeoutMs: settings.dispatchTimeoutMs, radiusM: settings.searchRadiusM },
			);
			expect(index.setDemand).toHaveBeenCalledWith(event, true);
			expect(onWork).toHaveBeenCalledTimes(1);
		});

		it("a row already there (a tombstone, the sweep's) is left alone and not counted again, but work is still signalled", async () => {
			const { mirror, repo, index, onWork } = setup();
			repo.mirror.insertNewRides.mockResolvedValue([false]);
			await mirror.mirrorNewRide(event);
			expect(index.setDemand).not.toHaveBeenCalled();
			expect(onWork).toHaveBeenCalledTimes(1);
		});
	});

	describe("orderMoved and reconcile", () => {
		it("an event naming the status dispatch already has is ignored", async () => {
			const { mirror, repo, orders } = setup();
			repo.mirror.ride.mockResolvedValue(rideRow({ order_status: "arrived" }));
			await mirror.orderMoved("ord_1", "arrived");
			expect(orders.get).not.toHaveBeenCalled();
		});

		it("a new status is reconciled from orders' truth", async () => {
			const { mirror, repo, orders } = setup();
			repo.mirror.ride.mockResolvedValue(rideRow({ order_status: "searching" }));
			orders.get.mockResolvedValue(internalOrder({ status: "customer_cancelled", version: 2 }));
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			await mirror.orderMoved("ord_1", "customer_cancelled");
			expect(orders.get).toHaveBeenCalledWith("ord_1");
			expect(repo.mirror.closeRide).toHaveBeenCalledWith("ord_1", TX, expect.objectContaining({ status: "customer_cancelled" }));
		});

		it("reconcile of an order orders no longer knows closes the ride, settles offers and frees its drivers", async () => {
			const { mirror, repo, orders, index } = setup();
			const freed = driverRow();
			orders.get.mockResolvedValue(null);
			repo.drivers.freeDrivers.mockResolvedValue([freed]);
			await mirror.reconcile("ord_gone");
			expect(repo.mirror.closeRide).toHaveBeenCalledWith("ord_gone", TX);
			expect(repo.matching.settleOffers).toHaveBeenCalledWith("ord_gone", TX);
			expect(repo.drivers.freeDrivers).toHaveBeenCalledWith("ord_gone", TX);
			expect(index.publish).toHaveBeenCalledWith([freed]);
		});

		it("a vanished order that was searching stops counting as demand here at once", async () => {
			const { mirror, repo, orders, index } = setup();
			orders.get.mockResolvedValue(null);
			repo.mirror.lockRide.mockResolvedValue(rideRow({ order_id: "ord_gone" }));
			await mirror.reconcile("ord_gone");
			expect(index.setDemand).toHaveBeenCalledWith(expect.objectContaining({ orderId: "ord_gone" }), false);
		});
	});

	describe("afterRefusal", () => {
		it("reconciles, giving up the call in flight", async () => {
			const { mirror, repo, orders } = setup();
			orders.get.mockResolvedValue(internalOrder({ version: 1 }));
			repo.mirror.lockRide.mockResolvedValue(rideRow({ state: "accepting", driver_id: "drv_1", order_version: 1, lease_active: true }));
			await mirror.afterRefusal("ord_1", new ApiError("CONFLICT", "cancelled meanwhile"));
			expect(repo.mirror.searchAgain).toHaveBeenCalledWith(expect.anything(), "drv_1", false, TX);
		});

		it("swallows a failing reconcile and logs trouble (the sweep retries)", async () => {
			const { mirror, orders, log } = setup();
			orders.get.mockRejectedValue(new Error("orders timed out"));
			await expect(mirror.afterRefusal("ord_1", new ApiError("CONFLICT", "no"))).resolves.toBeUndefined();
			expect(log.trouble).toHaveBeenCalledWith(expect.stringMatching(/Reconciling ord_1 failed.*orders timed out/));
		});
	});
});
