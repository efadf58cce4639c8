import type { Context } from "moleculer";
import type { DriverJob, DriverView } from "../../../contracts/dispatch";
import { DRIVER_TOKEN_PREFIX } from "../../../contracts/driver";
import { hashApiKey } from "../../../lib/secrets";
import { toDriverView } from "../../../services/dispatch/dispatch-views";
import { DriverApi } from "../../../services/dispatch/driver-api";
import type { DriverMoves } from "../../../services/dispatch/driver-moves";
import { DriverTokens } from "../../../services/dispatch/driver-tokens";
import { OfferWaits } from "../../../services/dispatch/offer-waits";
import { BLR, asTokensRepo, deferred, driverRow, fakeTokensRepo } from "../../helpers/dispatch-fakes";

const ctx = { id: "ctx_1" } as unknown as Context;
const POLL_MS = 500;

function job(over: Partial<DriverJob> = {}): DriverJob {
	return { driver: toDriverView(driverRow()), offer: null, ride: null, ...over };
}
const OFFER: NonNullable<DriverJob["offer"]> = { orderId: "ord_1", expiresAt: "2026-01-01T10:00:15.000Z", pickup: BLR, drop: BLR, distanceM: 600, eta: 95 };

function setupApi() {
	const view = toDriverView(driverRow());
	const moves = {
		loadDriver: jest.fn(async (driverId: string) => driverRow({ id: driverId })),
		goOnline: jest.fn(async (..._a: Parameters<DriverMoves["goOnline"]>) => view),
		goOffline: jest.fn(async (..._a: Parameters<DriverMoves["goOffline"]>) => view),
		setLocation: jest.fn(async (..._a: Parameters<DriverMoves["setLocation"]>) => driverRow()),
		accept: jest.fn(async (..._a: Parameters<DriverMoves["accept"]>) => job()),
		decline: jest.fn(async (..._a: Parameters<DriverMoves["decline"]>) => view),
		moveRide: jest.fn(async (..._a: Parameters<DriverMoves["moveRide"]>) => job()),
		dropOut: jest.fn(async (..._a: Parameters<DriverMoves["dropOut"]>) => view),
		driverJob: jest.fn(async (..._a: Parameters<DriverMoves["driverJob"]>) => job()),
	};
	const tokens = { wasOffered: jest.fn(async (_driverId: string, _orderId: string) => false) };
	const waits = new OfferWaits();
	const wait = jest.spyOn(waits, "wait");
	const stopping = jest.fn(() => false);
	const api = new DriverApi({ moves, tokens, waits, pollMs: POLL_MS, stopping });
	return { moves, tokens, waits, wait, stopping, api };
}

describe("DriverApi", () => {
	describe("offers (long-poll)", () => {
		beforeEach(() => jest.useFakeTimers());
		afterEach(() => jest.useRealTimers());

		it("returns at once when the driver has an offer (or a ride)", async () => {
			const { api, moves, wait } = setupApi();
			moves.driverJob.mockResolvedValueOnce(job({ offer: OFFER }));
			await expect(api.offers("drv_1", 20)).resolves.toMatchObject({ offer: OFFER });
			moves.driverJob.mockResolvedValueOnce(job({ ride: { orderId: "ord_1", status: "accepted", pickup: BLR, drop: BLR } }));
			await expect(api.offers("drv_1", 20)).resolves.toMatchObject({ ride: { orderId: "ord_1" } });
			expect(wait).not.toHaveBeenCalled();
		});

		it("otherwise waits, and answers the offer as soon as a wake names the driver", async () => {
			const { api, moves, waits, wait } = setupApi();
			moves.driverJob.mockResolvedValueOnce(job()).mockResolvedValueOnce(job({ offer: OFFER }));
			const answer = api.offers("drv_1", 20);
			await jest.advanceTimersByTimeAsync(0);
			expect(wait).toHaveBeenCalledWith("drv_1", POLL_MS);
			expect(waits.size).toBe(1);
			waits.wake("drv_1");
			await expect(answer).resolves.toMatchObject({ offer: OFFER });
			expect(moves.driverJob).toHaveBeenCalledTimes(2);
		});

		it("without a wake, reads the job again every pollMs until the wait is over, then answers the empty job", async () => {
			const { api, moves, wait } = setupApi();
			let done = false;
			const answer = api.offers("drv_1", 1).then((j) => {
				done = true;
				return j;
			});
			await jest.advanceTimersByTimeAsync(POLL_MS);
			expect(moves.driverJob).toHaveBeenCalledTimes(2);
			expect(done).toBe(false);
			await jest.advanceTimersByTimeAsync(POLL_MS);
			await expect(answer).resolves.toEqual(job());
			// At 0, 500 and 1000 ms.
			expect(moves.driverJob).toHaveBeenCalledTimes(3);
			expect(wait).toHaveBeenCalledTimes(2);
		});

		it("waitSeconds 0 answers the empty job without waiting", async () => {
			const { api, wait } = setupApi();
			await expect(api.offers("drv_1", 0)).resolves.toEqual(job());
			expect(wait).not.toHaveBeenCalled();
		});

		it("a stopping service answers at once", async () => {
			const { api, wait, stopping } = setupApi();
			stopping.mockReturnValue(true);
			await expect(api.offers("drv_1", 20)).resolves.toEqual(job());
			expect(wait).not.toHaveBeenCalled();
		});
	});

	describe("orders the driver may act on", () => {
		const moves = [
			{ name: "accept", call: (api: DriverApi) => api.accept("drv_1", { orderId: "ord_x" }, ctx), move: "accept" },
			{ name: "decline", call: (api: DriverApi) => api.decline("drv_1", { orderId: "ord_x" }), move: "decline" },
			{ name: "arrived", call: (api: DriverApi) => api.arrived("drv_1", { orderId: "ord_x" }, ctx), move: "moveRide" },
			{ name: "start", call: (api: DriverApi) => api.start("drv_1", { orderId: "ord_x", otp: "4821" }, ctx), move: "moveRide" },
			{ name: "drop", call: (api: DriverApi) => api.drop("drv_1", { orderId: "ord_x" }, ctx), move: "moveRide" },
			{ name: "cancel", call: (api: DriverApi) => api.cancel("drv_1", { orderId: "ord_x", reason: "flat tyre" }, ctx), move: "dropOut" },
		] as const;

		it.each(moves)("$name: an order the driver neither holds nor was offered is 404 ORDER_NOT_FOUND, and nothing moves", async ({ call, move }) => {
			const s = setupApi();
			s.moves.loadDriver.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_mine" }));
			await expect(call(s.api)).rejects.toMatchObject({ code: 404, type: "ORDER_NOT_FOUND" });
			expect(s.tokens.wasOffered).toHaveBeenCalledWith("drv_1", "ord_x");
			expect(s.moves[move]).not.toHaveBeenCalled();
		});

		it("an order the driver holds goes to the move without asking about offers", async () => {
			const { api, moves, tokens } = setupApi();
			moves.loadDriver.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			await api.drop("drv_1", { orderId: "ord_1" }, ctx);
			expect(tokens.wasOffered).not.toHaveBeenCalled();
			expect(moves.moveRide).toHaveBeenCalledWith({ driverId: "drv_1", orderId: "ord_1" }, "started", "dropped", undefined, ctx);
		});

		it("an order the driver was once offered goes to the move (its honest 409s come from there)", async () => {
			const { api, moves, tokens } = setupApi();
			tokens.wasOffered.mockResolvedValue(true);
			await api.accept("drv_1", { orderId: "ord_1" }, ctx);
			expect(moves.accept).toHaveBeenCalledWith("drv_1", "ord_1", ctx);
		});

		it("start passes the rider's OTP; cancel drops out with the reason", async () => {
			const { api, moves } = setupApi();
			moves.loadDriver.mockResolvedValue(driverRow({ status: "on_trip", order_id: "ord_1" }));
			await api.start("drv_1", { orderId: "ord_1", otp: "4821" }, ctx);
			expect(moves.moveRide).toHaveBeenCalledWith({ driverId: "drv_1", orderId: "ord_1" }, "arrived", "started", "4821", ctx);
			await api.cancel("drv_1", { orderId: "ord_1", reason: "flat tyre" }, ctx);
			expect(moves.dropOut).toHaveBeenCalledWith({ driverId: "drv_1", orderId: "ord_1" }, "flat tyre", ctx);
		});
	});

	describe("online, offline and locations", () => {
		it("a batch of locations moves the driver to the newest fix", async () => {
			const { api, moves } = setupApi();
			await api.locations("drv_1", [
				{ lat: 1, lng: 1, heading: 10, at: "2026-01-01T10:00:05Z" },
				{ lat: 2, lng: 2, heading: 20, at: "2026-01-01T10:00:01Z" },
			]);
			expect(moves.setLocation).toHaveBeenCalledWith("drv_1", { lat: 1, lng: 1, heading: 10 });
		});

		it("online passes only the position (no timestamp) to goOnline; offline goes offline", async () => {
			const { api, moves } = setupApi();
			await api.online("drv_1", { lat: 1, lng: 2, heading: 30, at: "2026-01-01T10:00:05Z" });
			expect(moves.goOnline).toHaveBeenCalledWith("drv_1", { lat: 1, lng: 2, heading: 30 });
			await api.offline("drv_1");
			expect(moves.goOffline).toHaveBeenCalledWith("drv_1");
		});
	});
});

describe("DriverTokens", () => {
	function setupTokens(registered: Partial<DriverView> = {}) {
		const repo = fakeTokensRepo();
		const register = jest.fn(async () => ({ ...toDriverView(driverRow()), ...registered }));
		const announceChanged = jest.fn(async () => undefined);
		const tokens = new DriverTokens({ repo: asTokensRepo(repo), register, announceChanged, cacheMs: 5000 });
		return { repo, register, announceChanged, tokens };
	}

	describe("authenticate", () => {
		it("resolves a token once and answers later ones from the cache", async () => {
			const { tokens, repo } = setupTokens();
			repo.driverOf.mockResolvedValue("drv_1");
			await expect(tokens.authenticate("rdt_secret")).resolves.toEqual({ driverId: "drv_1" });
			await expect(tokens.authenticate("rdt_secret")).resolves.toEqual({ driverId: "drv_1" });
			expect(repo.driverOf).toHaveBeenCalledTimes(1);
			// Only the hash reaches the database.
			expect(repo.driverOf).toHaveBeenCalledWith(hashApiKey("rdt_secret"));
		});

		it("an unknown token is null, and cached as such", async () => {
			const { tokens, repo } = setupTokens();
			await expect(tokens.authenticate("rdt_unknown")).resolves.toBeNull();
			await expect(tokens.authenticate("rdt_unknown")).resolves.toBeNull();
			expect(repo.driverOf).toHaveBeenCalledTimes(1);
		});

		it("changed() clears the cache: the next authenticate reads again", async () => {
			const { tokens, repo } = setupTokens();
			repo.driverOf.mockResolvedValueOnce("drv_1").mockResolvedValueOnce(undefined);
			await tokens.authenticate("rdt_secret");
			tokens.changed();
			await expect(tokens.authenticate("rdt_secret")).resolves.toBeNull();
			expect(repo.driverOf).toHaveBeenCalledTimes(2);
		});

		it("a revocation during a lookup keeps that lookup's stale answer out of the cache", async () => {
			const { tokens, repo } = setupTokens();
			const lookup = deferred<string | undefined>();
			repo.driverOf.mockReturnValueOnce(lookup.promise).mockResolvedValueOnce(undefined);
			const first = tokens.authenticate("rdt_secret");
			tokens.changed();
			lookup.resolve("drv_1");
			await first;
			await expect(tokens.authenticate("rdt_secret")).resolves.toBeNull();
			expect(repo.driverOf).toHaveBeenCalledTimes(2);
		});
	});

	describe("create, revokeAll and list", () => {
		it("registers a live driver by default and stores only the token's hash", async () => {
			const { tokens, repo, register } = setupTokens();
			const params = { name: "Ravi K", phone: "+919800000001", vehicleNumber: "KA01AB1234", serviceType: "cab" as const };
			const created = await tokens.create(params);
			expect(register).toHaveBeenCalledWith({ ...params, mode: "live", simulated: false });
			expect(created.driverId).toBe("drv_1");
			expect(created.token.startsWith(DRIVER_TOKEN_PREFIX)).toBe(true);
			expect(created.tokenId).toMatch(/^dtk_/);
			expect(repo.insert).toHaveBeenCalledWith(created.tokenId, "drv_1", hashApiKey(created.token));
		});

		it("refuses a simulated driver's phone with 409, issuing no token", async () => {
			const { tokens, repo } = setupTokens({ simulated: true });
			await expect(tokens.create({ name: "Sim", phone: "+919800000009", vehicleNumber: "SIM1", serviceType: "cab" })).rejects.toMatchObject({
				code: 409,
				type: "CONFLICT",
			});
			expect(repo.insert).not.toHaveBeenCalled();
		});

		it("revokeAll revokes in the database and tells every instance", async () => {
			const { tokens, repo, announceChanged } = setupTokens();
			repo.revokeAll.mockResolvedValue(2);
			await expect(tokens.revokeAll("drv_1")).resolves.toEqual({ driverId: "drv_1", revoked: 2 });
			expect(announceChanged).toHaveBeenCalledWith({ driverId: "drv_1" });
		});

		it("list shows tokens without the token itself", async () => {
			const { tokens, repo } = setupTokens();
			const at = new Date("2026-01-01T10:00:00.000Z");
			repo.list.mockResolvedValue([{ id: "dtk_1", driver_id: "drv_1", driver_name: "Ravi K", created_at: at, revoked_at: null }]);
			await expect(tokens.list()).resolves.toEqual([
				{ tokenId: "dtk_1", driverId: "drv_1", driverName: "Ravi K", createdAt: at.toISOString(), revokedAt: null },
			]);
		});
	});
});

describe("OfferWaits", () => {
	beforeEach(() => jest.useFakeTimers());
	afterEach(() => jest.useRealTimers());

	/** A wait and whether it has resolved yet. */
	function track(waits: OfferWaits, driverId: string, ms: number) {
		const state = { done: false };
		void waits.wait(driverId, ms).then(() => {
			state.done = true;
		});
		return state;
	}

	it("wake resolves every wait of that driver, and only that driver's", async () => {
		const waits = new OfferWaits();
		const a1 = track(waits, "drv_a", 10_000);
		const a2 = track(waits, "drv_a", 10_000);
		const b = track(waits, "drv_b", 10_000);
		expect(waits.size).toBe(2);
		waits.wake("drv_a");
		await jest.advanceTimersByTimeAsync(0);
		expect([a1.done, a2.done, b.done]).toEqual([true, true, false]);
		expect(waits.size).toBe(1);
	});

	it("a wait resolves by itself after its time, and leaves nothing behind", async () => {
		const waits = new OfferWaits();
		const w = track(waits, "drv_a", 500);
		await jest.advanceTimersByTimeAsync(499);
		expect(w.done).toBe(false);
		await jest.advanceTimersByTimeAsync(1);
		expect(w.done).toBe(true);
		expect(waits.size).toBe(0);
	});

	it("a woken wait's timer is cleared; waking a driver with no wait does nothing", async () => {
		const waits = new OfferWaits();
		track(waits, "drv_a", 500);
		waits.wake("drv_a");
		expect(jest.getTimerCount()).toBe(0);
		expect(() => waits.wake("drv_nobody")).not.toThrow();
		expect(waits.size).toBe(0);
	});
});
