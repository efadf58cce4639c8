import type { OfferCreatedEvent } from "../../../contracts/dispatch";
import { haversineMeters } from "../../../lib/geo";
import { ApiError } from "../../../lib/errors";
import type { DispatchSettings } from "../../../services/dispatch/dispatch.settings";
import { Matcher } from "../../../services/dispatch/matching";
import type { RideRow } from "../../../services/dispatch/ride-mirror.repo";
import {
	BLR,
	TX,
	asDispatchRepo,
	away,
	dispatchSettings,
	driverRow,
	dueRide,
	fakeLog,
	fakeMetrics,
	fakeOrders,
	fakeRepo,
	internalOrder,
	rideRow,
	settle,
} from "../../helpers/dispatch-fakes";

function setup(overrides: Partial<DispatchSettings> = {}) {
	const settings = dispatchSettings(overrides);
	const repo = fakeRepo();
	const index = {
		candidates: jest.fn(async (): Promise<Array<{ driverId: string }>> => []),
		forget: jest.fn(),
		publish: jest.fn(),
		hasCandidate: jest.fn((_ride: RideRow) => false),
	};
	const mirror = { applyOrder: jest.fn(async () => undefined), afterRefusal: jest.fn(async () => undefined) };
	const orders = fakeOrders();
	const metrics = fakeMetrics();
	const announceOffer = jest.fn<void, [OfferCreatedEvent]>();
	const stopping = jest.fn(() => false);
	const log = fakeLog();
	const matcher = new Matcher({ settings, repo: asDispatchRepo(repo), index, mirror, orders, metrics, announceOffer, stopping, log });
	return { settings, repo, index, mirror, orders, metrics, announceOffer, stopping, log, matcher };
}

/** One ride due a look, with a driver in reach (not backed off). */
function oneDue(repo: ReturnType<typeof setup>["repo"], orderId = "ord_1") {
	repo.matching.dueSearches.mockResolvedValueOnce([{ order_id: orderId, backed_off: false }]);
}

describe("Matcher", () => {
	describe("matching a due ride", () => {
		it("claims the nearest candidate, records the offer, publishes the driver, counts and announces the offer", async () => {
			const { matcher, repo, index, metrics, announceOffer, settings } = setup();
			const at = away(BLR, 600);
			const claimed = driverRow({ id: "drv_1", status: "offered", order_id: "ord_1", ...at });
			const expiresAt = new Date("2026-01-01T10:00:15.000Z");
			oneDue(repo);
			repo.matching.lockDueSearch.mockResolvedValue(dueRide({ excluded_driver_ids: ["drv_gone"] }));
			index.candidates.mockResolvedValueOnce([{ driverId: "drv_1" }]);
			repo.drivers.claimDriver.mockResolvedValueOnce(claimed);
			repo.matching.insertOffer.mockResolvedValueOnce(expiresAt);

			await matcher.tick();

			expect(index.candidates).toHaveBeenCalledWith({ lat: BLR.lat, lng: BLR.lng }, "cab", "test", new Set(["drv_gone"]), TX);
			expect(repo.drivers.claimDriver).toHaveBeenCalledWith("drv_1", "ord_1", "cab", "test", TX);
			const offer = repo.matching.insertOffer.mock.calls[0][0];
			expect(offer).toMatchObject({
				orderId: "ord_1",
				driverId: "drv_1",
				distanceM: Math.round(haversineMeters(at, BLR)),
				timeoutMs: settings.offerTimeoutMs,
			});
			expect(offer.id).toMatch(/^ofr_[0-9a-f]{24}$/);
			expect(offer.eta).toBeGreaterThan(0);
			// The ride is looked at again when the offer runs out.
			expect(repo.matching.matchAgainAt).toHaveBeenCalledWith("ord_1", expiresAt, TX);
			expect(index.publish).toHaveBeenCalledWith([claimed]);
			expect(metrics.offerMade).toHaveBeenCalledWith("cab");
			expect(announceOffer).toHaveBeenCalledWith(
				expect.objectContaining({
					orderId: "ord_1",
					driverId: "drv_1",
					simulated: false,
					expiresAt: expiresAt.toISOString(),
					pickup: BLR,
					distanceM: 600,
					eta: expect.any(Number),
				}),
			);
		});

		it("a candidate that cannot be claimed is forgotten by the index and the next one is tried", async () => {
			const { matcher, repo, index, announceOffer } = setup();
			oneDue(repo);
			repo.matching.lockDueSearch.mockResolvedValue(dueRide());
			index.candidates.mockResolvedValueOnce([{ driverId: "drv_taken" }, { driverId: "drv_2" }]);
			repo.drivers.claimDriver.mockResolvedValueOnce(undefined).mockResolvedValueOnce(driverRow({ id: "drv_2", status: "offered", order_id: "ord_1" }));
			await matcher.tick();
			expect(index.forget).toHaveBeenCalledWith("test", "cab", "drv_taken");
			expect(announceOffer).toHaveBeenCalledWith(expect.objectContaining({ driverId: "drv_2" }));
		});

		it("a ride whose candidates cannot be claimed is backed off, the index forgets them, and no offer is made", async () => {
			const { matcher, repo, index, metrics, announceOffer, settings } = setup();
			oneDue(repo);
			repo.matching.lockDueSearch.mockResolvedValue(dueRide());
			index.candidates.mockResolvedValueOnce([{ driverId: "drv_1" }]).mockResolvedValueOnce([]);
			repo.drivers.claimDriver.mockResolvedValue(undefined);
			await matcher.tick();
			expect(index.forget).toHaveBeenCalledWith("test", "cab", "drv_1");
			// The second round asks without the driver already tried.
			expect(index.candidates).toHaveBeenCalledTimes(2);
			expect(index.candidates.mock.calls[1]).toContainEqual(new Set(["drv_1"]));
			expect(repo.matching.matchAgainBackoff).toHaveBeenCalledWith("ord_1", settings.retryMatchMs, settings.retryMaxMs, settings.dispatchTimeoutMs, TX);
			expect(repo.matching.insertOffer).not.toHaveBeenCalled();
			expect(index.publish).not.toHaveBeenCalled();
			expect(metrics.offerMade).not.toHaveBeenCalled();
			expect(announceOffer).not.toHaveBeenCalled();
		});

		it("a ride with an offer still pending is looked at again when that offer runs out", async () => {
			const { matcher, repo, index } = setup();
			const pendingExpiry = new Date("2026-01-01T10:00:09.000Z");
			oneDue(repo);
			repo.matching.lockDueSearch.mockResolvedValue(dueRide({ pending_expiry: pendingExpiry }));
			await matcher.tick();
			expect(repo.matching.matchAgainAt).toHaveBeenCalledWith("ord_1", pendingExpiry, TX);
			expect(index.candidates).not.toHaveBeenCalled();
		});

		it("rides backed off by the due statement, or locked by another instance, are not matched here", async () => {
			const { matcher, repo, index } = setup();
			repo.matching.dueSearches.mockResolvedValueOnce([
				{ order_id: "ord_lonely", backed_off: true },
				{ order_id: "ord_locked", backed_off: false },
			]);
			await matcher.tick();
			expect(repo.matching.lockDueSearch).toHaveBeenCalledTimes(1);
			expect(repo.matching.lockDueSearch).toHaveBeenCalledWith("ord_locked", expect.any(Number), TX);
			expect(index.candidates).not.toHaveBeenCalled();
		});

		it("a ride that fails to match is logged and its order's truth taken, and the next ride is still matched", async () => {
			const { matcher, repo, mirror, log } = setup();
			const err = new Error("could not serialize access");
			repo.matching.dueSearches.mockResolvedValueOnce([
				{ order_id: "ord_bad", backed_off: false },
				{ order_id: "ord_good", backed_off: false },
			]);
			repo.matching.lockDueSearch.mockRejectedValueOnce(err);
			await matcher.tick();
			expect(log.trouble).toHaveBeenCalledWith(expect.stringContaining("Matching ord_bad"));
			expect(mirror.afterRefusal).toHaveBeenCalledWith("ord_bad", err);
			expect(repo.matching.lockDueSearch).toHaveBeenCalledWith("ord_good", expect.any(Number), TX);
		});
	});

	describe("ending a ride nobody took", () => {
		it("a timed-out ride is marked ending, moved to no_driver_found through orders, counted and applied", async () => {
			const { matcher, repo, orders, mirror, metrics, index, settings } = setup();
			const ended = internalOrder({ status: "no_driver_found", version: 2 });
			oneDue(repo);
			repo.matching.lockDueSearch.mockResolvedValue(dueRide({ timed_out: true }));
			orders.transition.mockResolvedValue(ended);
			await matcher.tick();
			expect(repo.mirror.startTransition).toHaveBeenCalledWith("ord_1", "ending", settings.transitionLeaseMs, TX);
			expect(index.candidates).not.toHaveBeenCalled();
			expect(orders.transition).toHaveBeenCalledWith(expect.objectContaining({ orderId: "ord_1", from: "searching", to: "no_driver_found" }));
			expect(metrics.noDriverFound).toHaveBeenCalledWith("cab");
			expect(mirror.applyOrder).toHaveBeenCalledWith(ended, { abandonInFlight: true });
		});

		it("the no_driver_found sandbox scenario ends the ride at once", async () => {
			const { matcher, repo, orders } = setup();
			oneDue(repo);
			repo.matching.lockDueSearch.mockResolvedValue(dueRide({ sandbox: "no_driver_found" }));
			orders.transition.mockResolvedValue(internalOrder({ status: "no_driver_found" }));
			await matcher.tick();
			expect(orders.transition).toHaveBeenCalledWith(expect.objectContaining({ to: "no_driver_found" }));
		});

		it("orders refusing for good (somebody moved first) means taking the order's truth", async () => {
			const { matcher, repo, orders, mirror, metrics } = setup();
			const refusal = new ApiError("INVALID_TRANSITION", "already accepted");
			oneDue(repo);
			repo.matching.lockDueSearch.mockResolvedValue(dueRide({ timed_out: true }));
			orders.transition.mockRejectedValue(refusal);
			await matcher.tick();
			expect(mirror.afterRefusal).toHaveBeenCalledWith("ord_1", refusal);
			expect(metrics.noDriverFound).not.toHaveBeenCalled();
		});

		it("orders not answering is only logged: the lease runs out and the sweep settles it", async () => {
			const { matcher, repo, orders, mirror, log } = setup();
			oneDue(repo);
			repo.matching.lockDueSearch.mockResolvedValue(dueRide({ timed_out: true }));
			orders.transition.mockRejectedValue(new Error("Request timed out"));
			await matcher.tick();
			expect(mirror.afterRefusal).not.toHaveBeenCalled();
			expect(mirror.applyOrder).not.toHaveBeenCalled();
			expect(log.trouble).toHaveBeenCalledWith(expect.stringContaining("no_driver_found for ord_1 not recorded yet"));
		});
	});

	describe("endOffer", () => {
		it("returns false and changes nothing when the driver has no open offer of the ride", async () => {
			const { matcher, repo, index, metrics } = setup();
			const kick = jest.spyOn(matcher, "kick");
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.endOffer.mockResolvedValue(false);
			await expect(matcher.endOffer("drv_1", "ord_1", "declined")).resolves.toBe(false);
			expect(repo.drivers.freeDrivers).not.toHaveBeenCalled();
			expect(repo.matching.excludeAndRematch).not.toHaveBeenCalled();
			expect(index.publish).not.toHaveBeenCalled();
			expect(metrics.offerEnded).not.toHaveBeenCalled();
			expect(kick).not.toHaveBeenCalled();
		});

		it("ends the offer: frees the offered driver, excludes it from the ride, counts, publishes and kicks matching", async () => {
			const { matcher, repo, index, metrics } = setup();
			const kick = jest.spyOn(matcher, "kick");
			const freed = driverRow({ id: "drv_1", rev: 5 });
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.endOffer.mockResolvedValue(true);
			repo.drivers.freeDrivers.mockResolvedValue([freed]);
			await expect(matcher.endOffer("drv_1", "ord_1", "declined")).resolves.toBe(true);
			expect(repo.matching.endOffer).toHaveBeenCalledWith("ord_1", "drv_1", "declined", TX);
			expect(repo.drivers.freeDrivers).toHaveBeenCalledWith("ord_1", TX, { offeredDriverId: "drv_1" });
			expect(repo.matching.excludeAndRematch).toHaveBeenCalledWith("ord_1", "drv_1", TX);
			expect(metrics.offerEnded).toHaveBeenCalledWith("declined", "cab");
			expect(index.publish).toHaveBeenCalledWith([freed]);
			expect(kick).toHaveBeenCalledTimes(1);
			// The kick runs a matching pass on the next turn.
			await settle();
			expect(repo.matching.dueSearches).toHaveBeenCalledTimes(1);
		});

		it("the tick expires unanswered offers the same way", async () => {
			const { matcher, repo, metrics } = setup();
			repo.matching.expiredOffers.mockResolvedValue([{ order_id: "ord_1", driver_id: "drv_1" }]);
			repo.mirror.lockRide.mockResolvedValue(rideRow());
			repo.matching.endOffer.mockResolvedValue(true);
			await matcher.tick();
			expect(repo.matching.endOffer).toHaveBeenCalledWith("ord_1", "drv_1", "expired", TX);
			expect(metrics.offerEnded).toHaveBeenCalledWith("expired", "cab");
		});
	});

	describe("location events", () => {
		const moving = (over: Partial<RideRow & { d_lat: number | null; d_lng: number | null; d_heading: number | null }>) => {
			const { lease_active: _unused, ...ride } = rideRow({ state: "assigned", driver_id: "drv_1", order_status: "accepted" });
			const at = away(BLR, 1000, 180);
			return { ...ride, d_lat: at.lat, d_lng: at.lng, d_heading: 370.4, ...over };
		};

		it("sends the driver's latest position and ETA for each moving ride, not for one waiting at the pickup", async () => {
			const { matcher, repo, orders } = setup();
			repo.matching.claimDueLocations.mockResolvedValue([
				moving({ order_id: "ord_moving" }),
				moving({ order_id: "ord_waiting", order_status: "arrived" }),
				moving({ order_id: "ord_no_fix", d_lat: null, d_lng: null }),
			]);
			await matcher.tick();
			expect(orders.recordLocation).toHaveBeenCalledTimes(1);
			const sent = orders.recordLocation.mock.calls[0][0];
			expect(sent).toMatchObject({ orderId: "ord_moving", location: { heading: 10 } });
			expect(sent.eta).toBeGreaterThan(0);
		});

		it("a definitive refusal takes the order's truth; any other failure is only logged", async () => {
			const { matcher, repo, orders, mirror, log } = setup();
			const refusal = new ApiError("RIDE_NOT_ACTIVE", "ride ended");
			repo.matching.claimDueLocations.mockResolvedValue([moving({ order_id: "ord_ended" }), moving({ order_id: "ord_slow" })]);
			orders.recordLocation.mockImplementation(async ({ orderId }) => {
				throw orderId === "ord_ended" ? refusal : new Error("timeout");
			});
			await matcher.tick();
			expect(mirror.afterRefusal).toHaveBeenCalledWith("ord_ended", refusal);
			expect(mirror.afterRefusal).toHaveBeenCalledTimes(1);
			expect(log.trouble).toHaveBeenCalledWith(expect.stringContaining("ord_slow"));
		});
	});

	describe("the tick", () => {
		it("a failing step is logged and the next steps still run", async () => {
			const { matcher, repo, log } = setup();
			repo.matching.expiredOffers.mockRejectedValue(new Error("deadlock detected"));
			await matcher.tick();
			expect(log.trouble).toHaveBeenCalledWith(expect.stringMatching(/expireOffers.*deadlock detected/));
			expect(repo.matching.dueSearches).toHaveBeenCalled();
			expect(repo.matching.claimDueLocations).toHaveBeenCalled();
		});

		it("does no work once the service is stopping", async () => {
			const { matcher, repo, stopping } = setup();
			stopping.mockReturnValue(true);
			await matcher.tick();
			matcher.kick();
			await settle();
			expect(repo.matching.expiredOffers).not.toHaveBeenCalled();
			expect(repo.matching.dueSearches).not.toHaveBeenCalled();
			expect(repo.matching.claimDueLocations).not.toHaveBeenCalled();
		});

		it("a full page with rides backed off asks for another matching pass at once", async () => {
			const { matcher, repo } = setup();
			const kick = jest.spyOn(matcher, "kick");
			repo.matching.dueSearches.mockResolvedValueOnce(Array.from({ length: 100 }, (_, i) => ({ order_id: `ord_${i}`, backed_off: true })));
			await matcher.tick();
			expect(kick).toHaveBeenCalledTimes(1);
		});
	});

	describe("reads", () => {
		it("rideView: 404 ORDER_NOT_FOUND for a ride dispatch does not know", async () => {
			const { matcher } = setup();
			await expect(matcher.rideView("ord_x")).rejects.toMatchObject({ code: 404, type: "ORDER_NOT_FOUND" });
		});

		it("rideView: the ride's phase with its offers", async () => {
			const { matcher, repo } = setup();
			const at = new Date("2026-01-01T10:00:00.000Z");
			repo.mirror.ride.mockResolvedValue(rideRow({ state: "assigned", driver_id: "drv_1", order_status: "accepted" }));
			repo.matching.offersOfRide.mockResolvedValue([
				{ id: "ofr_1", driver_id: "drv_1", state: "accepted", distance_m: 600, eta: 90, created_at: at, expires_at: at, responded_at: at },
			]);
			const view = await matcher.rideView("ord_1");
			expect(view).toMatchObject({
				orderId: "ord_1",
				phase: "assigned",
				driverId: "drv_1",
				offers: [{ offerId: "ofr_1", state: "accepted", respondedAt: at.toISOString() }],
			});
		});

		it("simulatedWork: offers, rides with something to do, and searching rides with whether a driver is in reach", async () => {
			const { matcher, repo, index } = setup();
			const { lease_active: _a, ...lonely } = rideRow({ order_id: "ord_lonely" });
			const { lease_active: _b, ...onTrip } = rideRow({ order_id: "ord_trip", state: "assigned", order_status: "started", driver_id: "drv_1" });
			const { lease_active: _c, ...dropped } = rideRow({ order_id: "ord_done", state: "assigned", order_status: "dropped", driver_id: "drv_2" });
			repo.matching.simulatedRides.mockResolvedValue([onTrip, dropped]);
			repo.matching.unofferedSearches.mockResolvedValue([lonely]);
			index.hasCandidate.mockReturnValue(true);
			const work = await matcher.simulatedWork();
			expect(work.serverTime).toBe("2026-01-01T10:00:00.000Z");
			expect(work.rides.map((r) => r.orderId)).toEqual(["ord_trip"]);
			expect(work.searching).toEqual([{ orderId: "ord_lonely", serviceType: "cab", pickup: BLR, sandbox: null, hasCandidate: true }]);
		});
	});
});
