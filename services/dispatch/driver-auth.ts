import { randomBytes } from "node:crypto";
import type { Context } from "moleculer";
import { LRUCache } from "lru-cache";
import type { OfferCreatedEvent, DriverJob, DriverView } from "../../contracts/dispatch";
import { DISPATCH_EVENTS } from "../../contracts/dispatch";
import * as driverApi from "../../contracts/driver";
import { ApiError, orderNotFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { hashApiKey } from "../../lib/secrets";
import { toDriverView } from "./dispatch-views";
import { DriverTokensRepo } from "./driver-tokens.repo";
import type { DispatchThis } from "./dispatch.types";

/**
 * The driver API's side of dispatch: per-driver tokens (created by an
 * operator, stored as SHA-256 hashes, revocable) and the driver-facing
 * actions (`access: "driver"`) the gateway's `/driver/*` routes call.
 *
 * - The driver is `ctx.meta.driverId`, set by the gateway from the token;
 *   the params (contracts/driver.ts) are strict and carry no driver id, so a
 *   driver acts only as itself.
 * - Every action delegates to the same methods the internal driver actions
 *   use (driver-moves.ts), which the simulated fleet calls: one code path.
 * - Isolation: an order this driver was never offered answers 404
 *   ORDER_NOT_FOUND, like an unknown one; its own past offers keep their
 *   honest 409s (expired, taken back, already moved).
 * - Tokens resolved are cached per instance for DRIVER_TOKEN_CACHE_MS; a
 *   revocation broadcasts `dispatch.driverTokensChanged` and every instance
 *   drops its cache (the TTL bounds a lost event).
 * - `/driver/offers` long-polls: it reads the driver's job, then waits for
 *   `dispatch.offerCreated` naming the driver (broadcast by whichever instance
 *   matched) or DRIVER_OFFERS_POLL_MS, whichever comes first, and reads again.
 */

export const DRIVER_TOKEN_CACHE_MS = 5_000;
export const DRIVER_OFFERS_POLL_MS = 500;

export function newDriverToken(): string {
	return `${driverApi.DRIVER_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
}

/** The newest fix of a batch: the latest `at` when every fix has a parseable one, else the last in the batch. */
export function newestLocation(locations: driverApi.DriverAppLocation[]): driverApi.DriverAppLocation {
	const stamped = locations.map((l) => (l.at === undefined ? Number.NaN : Date.parse(l.at)));
	if (stamped.some((t) => Number.isNaN(t))) return locations[locations.length - 1];
	let best = 0;
	for (let i = 1; i < locations.length; i++) if (stamped[i] >= stamped[best]) best = i;
	return locations[best];
}

interface DriverApiState {
	repo: DriverTokensRepo;
	cache: LRUCache<string, { driverId: string | null }>;
	generation: number;
	waiters: Map<string, Set<() => void>>;
}

const states = new WeakMap<object, DriverApiState>();

function stateOf(svc: DispatchThis): DriverApiState {
	let s = states.get(svc);
	if (!s) {
		s = { repo: new DriverTokensRepo(svc.sequelize), cache: new LRUCache({ max: 10_000, ttl: DRIVER_TOKEN_CACHE_MS }), generation: 0, waiters: new Map() };
		states.set(svc, s);
	}
	return s;
}

function driverIdOf(ctx: Context): string {
	const id = (ctx.meta as { driverId?: unknown }).driverId;
	// The access middleware already refused a call without it.
	if (typeof id !== "string" || id.length === 0) throw new ApiError(401, "UNAUTHORIZED", "Missing or invalid driver token");
	return id;
}

/** The driver (from meta) may act on `orderId`: it holds it, or was offered it once; anything else reads as unknown. */
async function ownOrder(svc: DispatchThis, driverId: string, orderId: string): Promise<void> {
	const driver = await svc.loadDriver(driverId);
	if (driver.order_id === orderId) return;
	if (await stateOf(svc).repo.wasOffered(driverId, orderId)) return;
	throw orderNotFound();
}

/** The internal methods read `ctx.params.driverId`: give them the driver from meta, never from the body. */
function asDriver<P extends object>(ctx: Context<P>, driverId: string): Context<P & { driverId: string }> {
	const c = ctx as unknown as Context<P & { driverId: string }>;
	c.params = { ...ctx.params, driverId };
	return c;
}

function wake(svc: DispatchThis, driverId: string): void {
	const set = stateOf(svc).waiters.get(driverId);
	if (set) for (const fn of [...set]) fn();
}

/** Resolves on an offer event for the driver or after `ms`. */
function waitForOffer(svc: DispatchThis, driverId: string, ms: number): Promise<void> {
	const waiters = stateOf(svc).waiters;
	return new Promise((resolve) => {
		const set = waiters.get(driverId) ?? new Set<() => void>();
		waiters.set(driverId, set);
		const done = () => {
			clearTimeout(timer);
			set.delete(done);
			if (set.size === 0) waiters.delete(driverId);
			resolve();
		};
		const timer = setTimeout(done, ms);
		set.add(done);
	});
}

const DRIVER = { access: "driver", visibility: "published" } as const;
const INTERNAL = { access: "internal", visibility: "public" } as const;

/** The driver API's actions, mixed into dispatch's `actions`. */
export const driverApiActions = {
	// ---- driver-facing (the gateway's /driver/* routes) ----

	/** POST /driver/online */
	driverGoOnline: {
		...DRIVER,
		params: driverApi.driverOnlineParams,
		handler(this: DispatchThis, ctx: Context<driverApi.DriverOnlineParams>): Promise<DriverView> {
			const { lat, lng, heading } = ctx.params.location;
			return this.goOnline(driverIdOf(ctx), { lat, lng, heading });
		},
	},
	/** POST /driver/offline */
	driverGoOffline: {
		...DRIVER,
		params: driverApi.driverOfflineParams,
		handler(this: DispatchThis, ctx: Context): Promise<DriverView> {
			return this.goOffline(driverIdOf(ctx));
		},
	},
	/** POST /driver/location: a batch, the newest fix wins. */
	driverReportLocations: {
		...DRIVER,
		params: driverApi.driverLocationsParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.DriverLocationsParams>): Promise<DriverView> {
			const { lat, lng, heading } = newestLocation(ctx.params.locations);
			return toDriverView(await this.setDriverLocation(driverIdOf(ctx), { lat, lng, heading }));
		},
	},
	/** GET or POST /driver/offers: the current offer or ride at once, else waits up to `waitSeconds` for an offer. */
	driverOffers: {
		...DRIVER,
		params: driverApi.driverOffersParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.DriverOffersParams>): Promise<DriverJob> {
			const driverId = driverIdOf(ctx);
			const deadline = Date.now() + 1000 * (ctx.params.waitSeconds ?? driverApi.DRIVER_OFFERS_DEFAULT_WAIT_S);
			for (;;) {
				const job = await this.driverJob(driverId);
				const left = deadline - Date.now();
				if (job.offer || job.ride || left <= 0 || this.stopping) return job;
				await waitForOffer(this, driverId, Math.min(left, DRIVER_OFFERS_POLL_MS));
			}
		},
	},
	/** POST /driver/accept */
	driverAccept: {
		...DRIVER,
		params: driverApi.driverOrderParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.DriverOrderParams>): Promise<DriverJob> {
			const driverId = driverIdOf(ctx);
			await ownOrder(this, driverId, ctx.params.orderId);
			return this.acceptOffer(asDriver(ctx, driverId));
		},
	},
	/** POST /driver/decline */
	driverDecline: {
		...DRIVER,
		params: driverApi.driverOrderParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.DriverOrderParams>): Promise<DriverView> {
			const driverId = driverIdOf(ctx);
			await ownOrder(this, driverId, ctx.params.orderId);
			return this.declineOffer(driverId, ctx.params.orderId);
		},
	},
	/** POST /driver/arrived */
	driverArrived: {
		...DRIVER,
		params: driverApi.driverOrderParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.DriverOrderParams>): Promise<DriverJob> {
			const driverId = driverIdOf(ctx);
			await ownOrder(this, driverId, ctx.params.orderId);
			return this.moveRide(asDriver(ctx, driverId), "accepted", "arrived");
		},
	},
	/** POST /driver/start: with the rider's OTP (422 INVALID_OTP, 409 OTP_LOCKED after too many tries). */
	driverStart: {
		...DRIVER,
		params: driverApi.driverStartParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.DriverStartParams>): Promise<DriverJob> {
			const driverId = driverIdOf(ctx);
			await ownOrder(this, driverId, ctx.params.orderId);
			return this.moveRide(asDriver(ctx, driverId), "arrived", "started", ctx.params.otp);
		},
	},
	/** POST /driver/drop */
	driverDrop: {
		...DRIVER,
		params: driverApi.driverOrderParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.DriverOrderParams>): Promise<DriverJob> {
			const driverId = driverIdOf(ctx);
			await ownOrder(this, driverId, ctx.params.orderId);
			return this.moveRide(asDriver(ctx, driverId), "started", "dropped");
		},
	},
	/** POST /driver/cancel: the driver drops out before the ride started; the ride goes back to searching. */
	driverCancel: {
		...DRIVER,
		params: driverApi.driverCancelParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.DriverCancelParams>): Promise<DriverView> {
			const driverId = driverIdOf(ctx);
			await ownOrder(this, driverId, ctx.params.orderId);
			return this.dropOut(asDriver(ctx, driverId));
		},
	},

	// ---- tokens (operators, the gateway) ----

	/**
	 * Registers the driver (idempotent by phone) and issues a token, shown once.
	 * REPL: `call dispatch.createDriverToken --name "Ravi K" --phone +919800000001 --vehicleNumber KA01AB1234 --serviceType cab`
	 */
	createDriverToken: {
		...INTERNAL,
		params: driverApi.createDriverTokenParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.CreateDriverTokenParams>): Promise<driverApi.DriverTokenCreated> {
			const driver = await this.registerDriver({ ...ctx.params, mode: ctx.params.mode ?? "live", simulated: false });
			if (driver.simulated) throw new ApiError(409, "CONFLICT", "That phone belongs to a simulated driver");
			const token = newDriverToken();
			const tokenId = `dtk_${newId("key").slice(4)}`;
			await stateOf(this).repo.insert(tokenId, driver.driverId, hashApiKey(token));
			return { driverId: driver.driverId, token, tokenId };
		},
	},
	/** Revokes every token of a driver, on every instance at once. REPL: `call dispatch.revokeDriverTokens --driverId drv_…` */
	revokeDriverTokens: {
		...INTERNAL,
		params: driverApi.revokeDriverTokensParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.RevokeDriverTokensParams>): Promise<{ driverId: string; revoked: number }> {
			const revoked = await stateOf(this).repo.revokeAll(ctx.params.driverId);
			await this.broker.broadcast(driverApi.DRIVER_TOKEN_EVENTS.changed, { driverId: ctx.params.driverId } satisfies driverApi.DriverTokensChangedEvent);
			return { driverId: ctx.params.driverId, revoked };
		},
	},
	/** Asks this instance to broadcast `dispatch.driverTokensChanged` (the CLI, after revoking in its own process). */
	announceDriverTokens: {
		...INTERNAL,
		params: driverApi.revokeDriverTokensParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.RevokeDriverTokensParams>): Promise<{ ok: true }> {
			await this.broker.broadcast(driverApi.DRIVER_TOKEN_EVENTS.changed, { driverId: ctx.params.driverId });
			return { ok: true };
		},
	},
	/** Tokens, newest first (never the token itself). REPL: `call dispatch.listDriverTokens` */
	listDriverTokens: {
		...INTERNAL,
		async handler(this: DispatchThis): Promise<driverApi.DriverTokenView[]> {
			return (await stateOf(this).repo.list()).map((r) => ({
				tokenId: r.id,
				driverId: r.driver_id,
				driverName: r.driver_name,
				createdAt: new Date(r.created_at).toISOString(),
				revokedAt: r.revoked_at ? new Date(r.revoked_at).toISOString() : null,
			}));
		},
	},
	/** The gateway: a driver token → `{ driverId }`, or null (unknown or revoked). */
	authenticateDriver: {
		...INTERNAL,
		params: driverApi.authenticateDriverParams,
		async handler(this: DispatchThis, ctx: Context<driverApi.AuthenticateDriverParams>): Promise<driverApi.AuthenticatedDriver | null> {
			const s = stateOf(this);
			const hash = hashApiKey(ctx.params.token);
			const cached = s.cache.get(hash);
			if (cached) return cached.driverId ? { driverId: cached.driverId } : null;
			const generation = s.generation;
			const driverId = (await s.repo.driverOf(hash)) ?? null;
			// A revocation seen meanwhile wins over what this lookup read.
			if (generation === s.generation) s.cache.set(hash, { driverId });
			return driverId ? { driverId } : null;
		},
	},
};

/** The driver API's event handlers, mixed into dispatch's `events`. */
export const driverApiEvents = {
	[driverApi.DRIVER_TOKEN_EVENTS.changed]: {
		handler(this: DispatchThis) {
			const s = stateOf(this);
			s.generation++;
			s.cache.clear();
		},
	},
	/** Wakes this instance's long-polls waiting for that driver (another instance may have made the offer). */
	[`${DISPATCH_EVENTS.offerCreated}`]: {
		handler(this: DispatchThis, ctx: Context<OfferCreatedEvent>) {
			if (!ctx.params.simulated) wake(this, ctx.params.driverId);
		},
	},
};
