import type { Context } from "moleculer";
import type { DriverJob, DriverView, OfferCreatedEvent } from "../../../contracts/dispatch";
import { DRIVER_TOKEN_LIFETIME_MAX_S, DRIVER_TOKEN_PREFIX, lifetimeSeconds } from "../../../contracts/driver";
import { hashApiKey } from "../../../lib/secrets";
import { toDriverView } from "../../../services/dispatch/dispatch-views";
import { DriverApi } from "../../../services/dispatch/driver-api";
import type { DriverMoves } from "../../../services/dispatch/driver-moves";
import type { RideSteps } from "../../../services/dispatch/ride-steps";
import { DriverTokens } from "../../../services/dispatch/driver-tokens";
import type { LiveToken } from "../../../services/dispatch/driver-tokens.repo";
import { OfferWaits } from "../../../services/dispatch/offer-waits";
import { BLR, asTokensRepo, deferred, driverRow, fakeTokensRepo } from "../../helpers/dispatch-fakes";

const ctx = { id: "ctx_1" } as unknown as Context;

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
		accept: jest.fn(async (..._a: Parameters<RideSteps["accept"]>) => job()),
		decline: jest.fn(async (..._a: Parameters<DriverMoves["decline"]>) => view),
		moveRide: jest.fn(async (..._a: Parameters<RideSteps["moveRide"]>) => job()),
		dropOut: jest.fn(async (..._a: Parameters<RideSteps["dropOut"]>) => view),
		driverJob: jest.fn(async (..._a: Parameters<DriverMoves["driverJob"]>) => job()),
	};
	const tokens = { wasOffered: jest.fn(async (_driverId: string, _orderId: string) => false) };
	const waits = new OfferWaits(100);
	const open = jest.spyOn(waits, "open");
	const announceWait = jest.fn();
	const stopping = jest.fn(() => false);
	// One fake for both: what the driver does to itself (moves) and to its ride (steps).
	const api = new DriverApi({ moves, steps: moves, tokens, waits, announceWait, stopping });
	return { moves, tokens, waits, open, announceWait, stopping, api };
}

describe("DriverApi", () => {
	describe("offers (long-poll)", () => {
		beforeEach(() => jest.useFakeTimers());
		afterEach(() => jest.useRealTimers());

		const EVENT: OfferCreatedEvent = { driverId: "drv_1", simulated: false, ...OFFER };

		it("returns at once when the driver has an offer (or a ride), its wait closed", async () => {
			const { api, moves, waits } = setupApi();
			moves.driverJob.mockResolvedValueOnce(job({ offer: OFFER }));
			await expect(api.offers("drv_1", 20)).resolves.toMatchObject({ offer: OFFER });
			moves.driverJob.mockResolvedValueOnce(job({ ride: { orderId: "ord_1", status: "accepted", pickup: BLR, drop: BLR } }));
			await expect(api.offers("drv_1", 20)).resolves.toMatchObject({ ride: { orderId: "ord_1" } });
			expect(waits.size).toBe(0);
		});

		it("otherwise waits, reading nothing more, and answers the offer from its event alone", async () => {
			const { api, moves, waits, announceWait } = setupApi();
			const answer = api.offers("drv_1", 20);
			await jest.advanceTimersByTimeAsync(0);
			expect(waits.size).toBe(1);
			expect(announceWait).toHaveBeenCalledWith({ driverId: "drv_1", waitId: expect.any(String) });
			await jest.advanceTimersByTimeAsync(10_000);
			waits.offer(EVENT);
			await expect(answer).resolves.toMatchObject({ offer: OFFER, driver: { status: "offered", orderId: "ord_1" } });
			expect(moves.driverJob).toHaveBeenCalledTimes(1);
		});

		it("the wait opens before the job is read: an offer made during the read still ends it", async () => {
			const { api, moves, waits } = setupApi();
			const read = deferred<DriverJob>();
			moves.driverJob.mockReturnValueOnce(read.promise);
			const answer = api.offers("drv_1", 20);
			await jest.advanceTimersByTimeAsync(0);
			waits.offer(EVENT);
			read.resolve(job());
			await expect(answer).resolves.toMatchObject({ offer: OFFER });
		});

		it("an offer that came while the driver had no wait open is answered by its next wait", async () => {
			const { api, waits } = setupApi();
			jest.setSystemTime(new Date("2026-01-01T10:00:00.000Z"));
			waits.offer(EVENT);
			await expect(api.offers("drv_1", 20)).resolves.toMatchObject({ offer: OFFER });
		});

		it("without an offer, answers the job as it is when the wait is over", async () => {
			const { api, moves } = setupApi();
			let done = false;
			const answer = api.offers("drv_1", 1).then((j) => {
				done = true;
				return j;
			});
			await jest.advanceTimersByTimeAsync(999);
			expect(done).toBe(false);
			await jest.advanceTimersByTimeAsync(1);
			await expect(answer).resolves.toEqual(job());
			// Read again at the end (from memory): the driver may have gone offline meanwhile.
			expect(moves.driverJob).toHaveBeenCalledTimes(2);
		});

		it("a second wait of the same driver ends the first, which answers at once", async () => {
			const { api, waits } = setupApi();
			let first: DriverJob | undefined;
			void api.offers("drv_1", 20).then((j) => (first = j));
			await jest.advanceTimersByTimeAsync(0);
			const second = api.offers("drv_1", 20);
			await jest.advanceTimersByTimeAsync(0);
			expect(first).toEqual(job());
			expect(waits.size).toBe(1);
			waits.offer(EVENT);
			await expect(second).resolves.toMatchObject({ offer: OFFER });
		});

		it("waitSeconds 0, or a stopping service, answers the job without waiting", async () => {
			const { api, waits, stopping } = setupApi();
			await expect(api.offers("drv_1", 0)).resolves.toEqual(job());
			stopping.mockReturnValue(true);
			await expect(api.offers("drv_1", 20)).resolves.toEqual(job());
			expect(waits.size).toBe(0);
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

/** A working token of `driverId` as the repo reads it; `msLeft` null: until revoked. */
function live(driverId: string, msLeft: number | null = null): LiveToken {
	return { driver_id: driverId, ms_left: msLeft };
}

describe("DriverTokens", () => {
	function setupTokens(registered: Partial<DriverView> = {}) {
		const repo = fakeTokensRepo();
		const register = jest.fn(async () => ({ ...toDriverView(driverRow()), ...registered }));
		const announceChanged = jest.fn(async () => undefined);
		const takeOffline = jest.fn(async () => undefined);
		const known = { add: jest.fn(), mayBeLive: jest.fn((_hash: string) => true) };
		const clock = { now: 1_000_000 };
		const tokens = new DriverTokens({
			repo: asTokensRepo(repo),
			register,
			announceChanged,
			announceCreated: jest.fn(async () => undefined),
			known,
			takeOffline,
			cacheMs: 5000,
			cacheMax: 1000,
			now: () => clock.now,
		});
		return { repo, register, announceChanged, takeOffline, tokens, known, clock };
	}

	describe("authenticate", () => {
		it("onlyKnown: a token no live token's prefix matches is refused without the database; a known one is looked up", async () => {
			const { tokens, repo, known } = setupTokens();
			repo.liveToken.mockResolvedValue(live("drv_1"));
			known.mayBeLive.mockReturnValue(false);
			await expect(tokens.authenticate(hashApiKey("rdt_random"), true)).resolves.toBeNull();
			expect(repo.liveToken).not.toHaveBeenCalled();
			// Without onlyKnown (the address is not throttled) it is looked up whatever the set says.
			await expect(tokens.authenticate(hashApiKey("rdt_random"))).resolves.toEqual({ driverId: "drv_1" });
			known.mayBeLive.mockReturnValue(true);
			await expect(tokens.authenticate(hashApiKey("rdt_known"), true)).resolves.toEqual({ driverId: "drv_1" });
			expect(repo.liveToken).toHaveBeenCalledTimes(2);
		});

		it("adds a token it creates to the known set and announces it", async () => {
			const { tokens, known } = setupTokens();
			const created = await tokens.create({ name: "Ravi", phone: "+919800000001", vehicleNumber: "KA01", serviceType: "cab" });
			expect(known.add).toHaveBeenCalledWith(hashApiKey(created.token));
		});

		it("resolves a token once and answers later ones from the cache", async () => {
			const { tokens, repo } = setupTokens();
			repo.liveToken.mockResolvedValue(live("drv_1"));
			await expect(tokens.authenticate(hashApiKey("rdt_secret"))).resolves.toEqual({ driverId: "drv_1" });
			await expect(tokens.authenticate(hashApiKey("rdt_secret"))).resolves.toEqual({ driverId: "drv_1" });
			expect(repo.liveToken).toHaveBeenCalledTimes(1);
			// Only the hash reaches the database.
			expect(repo.liveToken).toHaveBeenCalledWith(hashApiKey("rdt_secret"));
		});

		it("a token in use stays cached past cacheMs; one unused for cacheMs is read again", async () => {
			// Real time: the cache keeps its own clock. cacheMs 1 s, used every 200 ms for 1.6 s, then left alone.
			const repo = fakeTokensRepo();
			const tokens = new DriverTokens({
				repo: asTokensRepo(repo),
				register: jest.fn(),
				announceChanged: jest.fn(),
				announceCreated: jest.fn(),
				known: { add: jest.fn(), mayBeLive: () => true },
				takeOffline: jest.fn(),
				cacheMs: 1_000,
				cacheMax: 10,
			});
			repo.liveToken.mockResolvedValue(live("drv_1"));
			for (let i = 0; i < 9; i++) {
				await tokens.authenticate(hashApiKey("rdt_busy"));
				await new Promise((resolve) => setTimeout(resolve, 200));
			}
			expect(repo.liveToken).toHaveBeenCalledTimes(1);
			await new Promise((resolve) => setTimeout(resolve, 1_200));
			await tokens.authenticate(hashApiKey("rdt_busy"));
			expect(repo.liveToken).toHaveBeenCalledTimes(2);
		});

		it("an unknown token is null, and cached as such", async () => {
			const { tokens, repo } = setupTokens();
			await expect(tokens.authenticate(hashApiKey("rdt_unknown"))).resolves.toBeNull();
			await expect(tokens.authenticate(hashApiKey("rdt_unknown"))).resolves.toBeNull();
			expect(repo.liveToken).toHaveBeenCalledTimes(1);
		});

		it("a flood of unknown tokens does not evict a known one: misses have their own bound", async () => {
			const repo = fakeTokensRepo();
			const tokens = new DriverTokens({
				repo: asTokensRepo(repo),
				register: jest.fn(),
				announceChanged: jest.fn(),
				announceCreated: jest.fn(),
				known: { add: jest.fn(), mayBeLive: () => true },
				takeOffline: jest.fn(),
				cacheMs: 60_000,
				cacheMax: 100,
			});
			const known = hashApiKey("rdt_known");
			repo.liveToken.mockImplementation(async (hash: string) => (hash === known ? live("drv_1") : undefined));
			await expect(tokens.authenticate(known)).resolves.toEqual({ driverId: "drv_1" });
			// Ten times the cache's bound of tokens nobody holds, as a scanner would send.
			for (let i = 0; i < 1_000; i++) await expect(tokens.authenticate(hashApiKey(`rdt_unknown_${i}`))).resolves.toBeNull();
			repo.liveToken.mockClear();
			await expect(tokens.authenticate(known)).resolves.toEqual({ driverId: "drv_1" });
			expect(repo.liveToken).not.toHaveBeenCalled();
		});

		it("a token past its expiry is refused from the cache, without a lookup, and stays refused", async () => {
			const { tokens, repo, clock } = setupTokens();
			const hash = hashApiKey("rdt_short");
			repo.liveToken.mockResolvedValue(live("drv_1", 3_000));
			await expect(tokens.authenticate(hash)).resolves.toEqual({ driverId: "drv_1" });
			// Used within the cache's time, each use restarting it: the token stays cached…
			for (let i = 0; i < 2; i++) {
				clock.now += 1_400;
				await expect(tokens.authenticate(hash)).resolves.toEqual({ driverId: "drv_1" });
			}
			expect(repo.liveToken).toHaveBeenCalledTimes(1);
			// …and the cache refuses it once its 3 s are over, though it still holds it.
			clock.now += 200;
			await expect(tokens.authenticate(hash)).resolves.toBeNull();
			await expect(tokens.authenticate(hash)).resolves.toBeNull();
			expect(repo.liveToken).toHaveBeenCalledTimes(1);
		});

		it("changed() clears the cache: the next authenticate reads again", async () => {
			const { tokens, repo } = setupTokens();
			repo.liveToken.mockResolvedValueOnce(live("drv_1")).mockResolvedValueOnce(undefined);
			await tokens.authenticate(hashApiKey("rdt_secret"));
			tokens.changed();
			await expect(tokens.authenticate(hashApiKey("rdt_secret"))).resolves.toBeNull();
			expect(repo.liveToken).toHaveBeenCalledTimes(2);
		});

		it("a revocation during a lookup keeps that lookup's stale answer out of the cache", async () => {
			const { tokens, repo } = setupTokens();
			const lookup = deferred<LiveToken | undefined>();
			repo.liveToken.mockReturnValueOnce(lookup.promise).mockResolvedValueOnce(undefined);
			const first = tokens.authenticate(hashApiKey("rdt_secret"));
			tokens.changed();
			lookup.resolve(live("drv_1"));
			await first;
			await expect(tokens.authenticate(hashApiKey("rdt_secret"))).resolves.toBeNull();
			expect(repo.liveToken).toHaveBeenCalledTimes(2);
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
			expect(created.tokenPrefix).toBe(created.token.slice(0, 12));
			expect(created.expiresAt).toBeNull();
			// No audit hook given here (the action passes one; test/integration/platform/operator-audit.test.ts).
			expect(repo.insert).toHaveBeenCalledWith(created.tokenId, "drv_1", hashApiKey(created.token), created.tokenPrefix, null, undefined);
		});

		it("gives a token the lifetime asked for, and refuses one out of bounds with 400 before registering anybody", async () => {
			const { tokens, repo, register } = setupTokens();
			const params = { name: "Ravi K", phone: "+919800000001", vehicleNumber: "KA01AB1234", serviceType: "cab" as const };
			const at = new Date("2026-02-01T10:00:00.000Z");
			repo.insert.mockResolvedValue(at);
			const created = await tokens.create({ ...params, expiresIn: "30d" });
			expect(repo.insert).toHaveBeenCalledWith(created.tokenId, "drv_1", expect.any(String), created.tokenPrefix, 30 * 86_400, undefined);
			expect(created.expiresAt).toBe(at.toISOString());
			expect(register).toHaveBeenCalledWith({ ...params, mode: "live", simulated: false });
			register.mockClear();
			for (const expiresIn of ["366d", "0d", "30", "1y", "9999999m"]) {
				await expect(tokens.create({ ...params, expiresIn })).rejects.toMatchObject({ code: 400, type: "VALIDATION_ERROR" });
			}
			expect(register).not.toHaveBeenCalled();
		});

		it("refuses a simulated driver's phone with 409, issuing no token", async () => {
			const { tokens, repo } = setupTokens({ simulated: true });
			await expect(tokens.create({ name: "Sim", phone: "+919800000009", vehicleNumber: "SIM1", serviceType: "cab" })).rejects.toMatchObject({
				code: 409,
				type: "CONFLICT",
			});
			expect(repo.insert).not.toHaveBeenCalled();
		});

		it("revokeAll revokes in the database, tells every instance, and takes the driver offline", async () => {
			const { tokens, repo, announceChanged, takeOffline } = setupTokens();
			repo.revokeAll.mockResolvedValue(2);
			await expect(tokens.revokeAll("drv_1")).resolves.toEqual({ driverId: "drv_1", revoked: 2 });
			expect(announceChanged).toHaveBeenCalledWith({ driverId: "drv_1" });
			expect(takeOffline).toHaveBeenCalledWith("drv_1");
		});

		it("revokeOne tells every instance; the driver stays online while another token of it works", async () => {
			const { tokens, repo, announceChanged, takeOffline } = setupTokens();
			repo.revokeOne.mockResolvedValue({ id: "dtk_1", driver_id: "drv_1", revoked: true });
			repo.workingCount.mockResolvedValue(1);
			await expect(tokens.revokeOne({ tokenId: "dtk_1" })).resolves.toEqual({ tokenId: "dtk_1", driverId: "drv_1", revoked: true, remainingTokens: 1 });
			expect(repo.revokeOne).toHaveBeenCalledWith({ id: "dtk_1" }, undefined);
			expect(announceChanged).toHaveBeenCalledWith({ driverId: "drv_1" });
			expect(takeOffline).not.toHaveBeenCalled();

			// Its last token, by prefix: the driver goes offline.
			repo.workingCount.mockResolvedValue(0);
			await expect(tokens.revokeOne({ prefix: "rdt_abcdefgh" })).resolves.toMatchObject({ remainingTokens: 0 });
			expect(repo.revokeOne).toHaveBeenLastCalledWith({ prefix: "rdt_abcdefgh" }, undefined);
			expect(takeOffline).toHaveBeenCalledWith("drv_1");
		});

		it("revokeOne: an unknown token is 404, an ambiguous prefix or not exactly one name 400, nothing announced", async () => {
			const { tokens, repo, announceChanged } = setupTokens();
			await expect(tokens.revokeOne({ tokenId: "dtk_nope" })).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
			repo.revokeOne.mockResolvedValue("ambiguous");
			await expect(tokens.revokeOne({ prefix: "rdt_abcdefgh" })).rejects.toMatchObject({ code: 400, type: "VALIDATION_ERROR" });
			await expect(tokens.revokeOne({})).rejects.toMatchObject({ code: 400 });
			await expect(tokens.revokeOne({ tokenId: "dtk_1", prefix: "rdt_abcdefgh" })).rejects.toMatchObject({ code: 400 });
			expect(announceChanged).not.toHaveBeenCalled();
		});

		it("list shows tokens with their prefix, expiry and state, without the token itself", async () => {
			const { tokens, repo } = setupTokens();
			const at = new Date("2026-01-01T10:00:00.000Z");
			const until = new Date("2026-01-31T10:00:00.000Z");
			repo.list.mockResolvedValue([
				{
					id: "dtk_1",
					driver_id: "drv_1",
					driver_name: "Ravi K",
					token_prefix: "rdt_abcdefgh",
					created_at: at,
					expires_at: until,
					revoked_at: null,
					status: "expired",
				},
			]);
			await expect(tokens.list()).resolves.toEqual([
				{
					tokenId: "dtk_1",
					driverId: "drv_1",
					driverName: "Ravi K",
					tokenPrefix: "rdt_abcdefgh",
					createdAt: at.toISOString(),
					expiresAt: until.toISOString(),
					revokedAt: null,
					status: "expired",
				},
			]);
		});

		it("lifetimes: <n><s|m|h|d>, at least 1 s, at most 365 days", () => {
			expect(lifetimeSeconds("30d")).toBe(30 * 86_400);
			expect(lifetimeSeconds("12h")).toBe(43_200);
			expect(lifetimeSeconds("90m")).toBe(5_400);
			expect(lifetimeSeconds("1s")).toBe(1);
			expect(lifetimeSeconds("365d")).toBe(DRIVER_TOKEN_LIFETIME_MAX_S);
			for (const bad of ["366d", "0s", "-1d", "30", "d", "1.5h", "30 d", "1w", ""]) expect(lifetimeSeconds(bad)).toBeUndefined();
		});
	});
});

describe("OfferWaits", () => {
	beforeEach(() => jest.useFakeTimers());
	afterEach(() => jest.useRealTimers());

	const offer = (driverId: string, expiresAt = "2026-01-01T10:00:15.000Z"): OfferCreatedEvent => ({ driverId, simulated: false, ...OFFER, expiresAt });

	it("an offer ends that driver's wait with the offer, and only that driver's", async () => {
		const waits = new OfferWaits(10);
		const a = waits.open("drv_a", "w1", 10_000);
		const b = waits.open("drv_b", "w2", 10_000);
		waits.offer(offer("drv_a"));
		await expect(a).resolves.toMatchObject({ kind: "offer", offer: { driverId: "drv_a" } });
		expect(waits.size).toBe(1);
		waits.endAll();
		await expect(b).resolves.toEqual({ kind: "stopping" });
	});

	it("one wait per driver: a new one supersedes the old; a wait started elsewhere ends it too", async () => {
		const waits = new OfferWaits(10);
		const first = waits.open("drv_a", "w1", 10_000);
		const second = waits.open("drv_a", "w2", 10_000);
		await expect(first).resolves.toEqual({ kind: "superseded" });
		waits.supersede("drv_a", "w2");
		expect(waits.size).toBe(1);
		waits.supersede("drv_a", "w-elsewhere");
		await expect(second).resolves.toEqual({ kind: "superseded" });
		expect(waits.size).toBe(0);
	});

	it("a wait ends by itself at its time and leaves no timer behind", async () => {
		const waits = new OfferWaits(10);
		const w = waits.open("drv_a", "w1", 500);
		await jest.advanceTimersByTimeAsync(500);
		await expect(w).resolves.toEqual({ kind: "timeout" });
		expect(waits.size).toBe(0);
		expect(jest.getTimerCount()).toBe(0);
	});

	it("refuses a wait past the cap with 503 DRIVER_WAITS_FULL", () => {
		const waits = new OfferWaits(1);
		void waits.open("drv_a", "w1", 1_000);
		expect(() => waits.open("drv_b", "w2", 1_000)).toThrow(expect.objectContaining({ code: 503, type: "DRIVER_WAITS_FULL" }));
		waits.endAll();
	});

	it("an unclaimed offer is kept until it expires, and answered once", () => {
		const waits = new OfferWaits(10);
		waits.offer(offer("drv_a", "2026-01-01T10:00:15.000Z"));
		expect(waits.takeUnclaimed("drv_a", Date.parse("2026-01-01T10:00:16.000Z"))).toBeUndefined();
		waits.offer(offer("drv_a", "2026-01-01T10:00:15.000Z"));
		expect(waits.takeUnclaimed("drv_a", Date.parse("2026-01-01T10:00:10.000Z"))).toMatchObject({ driverId: "drv_a" });
		expect(waits.takeUnclaimed("drv_a", Date.parse("2026-01-01T10:00:10.000Z"))).toBeUndefined();
	});
});
