import { randomBytes } from "node:crypto";
import * as driverApi from "../../contracts/driver";
import type { DriverView } from "../../contracts/dispatch";
import { AuthCache } from "../../lib/auth-cache";
import { ApiError, validationError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { hashApiKey } from "../../lib/secrets";
import type { DriverTokensRepo, RevokedOne } from "./driver-tokens.repo";
import type { KnownCredentials } from "../../lib/known-credentials";
import type { AuditHook } from "../../lib/audit";

/**
 * Driver API tokens: created by an operator, stored as SHA-256 hashes,
 * optionally with a lifetime, revocable all at once or one by one. A token
 * resolved is cached per instance for `cacheMs` with its expiry, which every
 * use checks (an expired token is refused from the cache too); a revocation
 * is announced (`dispatch.driverTokensChanged`) and every instance drops its
 * cache (the TTL bounds a lost event).
 */

export function newDriverToken(): string {
	return `${driverApi.DRIVER_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
}

export interface DriverTokensDeps {
	repo: DriverTokensRepo;
	/** Registers the driver, idempotent by phone (driver moves). */
	register: (
		p: driverApi.CreateDriverTokenParams & { mode: NonNullable<driverApi.CreateDriverTokenParams["mode"]>; simulated: false },
	) => Promise<DriverView>;
	/** Digest prefixes of the live tokens (the gateway's throttled addresses ask with `onlyKnown`). */
	known: Pick<KnownCredentials, "add" | "mayBeLive">;
	/** Tells every other instance a token was created (they read the new ones into their known set). */
	announceCreated: (event: driverApi.DriverTokensChangedEvent) => Promise<void>;
	/** Tells every instance (this one included) to drop its cache. */
	announceChanged: (event: driverApi.DriverTokensChangedEvent) => Promise<void>;
	/** The driver of revoked tokens goes offline at once (driver moves). */
	takeOffline: (driverId: string) => Promise<unknown>;
	cacheMs: number;
	/** Tokens kept at most (one per driver online is the working set); unknown tokens have a bound of their own, as large. */
	cacheMax: number;
	/** Milliseconds, for tests (a fake clock); Date.now by default. */
	now?: () => number;
}

/** A token as cached: its driver, and when it stops working by this instance's clock (null: until revoked). */
interface Resolved {
	driverId: string;
	expiresAt: number | null;
}

export class DriverTokens {
	/** Known tokens and unknown ones apart: a flood of unknown tokens evicts only other unknown ones. */
	private readonly cache: AuthCache<Resolved>;
	private readonly now: () => number;

	constructor(private readonly deps: DriverTokensDeps) {
		this.now = deps.now ?? Date.now;
		// A token in use stays cached (each use restarts its time): re-reading every token each
		// cacheMs would cost the database drivers ÷ cacheMs lookups a second, for nothing. A
		// revocation clears every instance at once; one missed while disconnected is covered by
		// clearing on every (re)connection, as Moleculer's own caches do; cacheMs bounds the rest.
		this.cache = new AuthCache(deps.cacheMs, deps.cacheMax, deps.cacheMax, deps.now, { hitsStayWhileUsed: true });
	}

	/**
	 * Registers the driver (idempotent by phone) and issues a token, shown
	 * once; `expiresIn` (`30d`) gives it a lifetime. `audit` records the token
	 * (by id) in the audit trail, in the token's transaction.
	 */
	async create(p: driverApi.CreateDriverTokenParams, audit?: (driverId: string) => AuditHook<string>): Promise<driverApi.DriverTokenCreated> {
		const lifetimeS = p.expiresIn === undefined ? null : driverApi.lifetimeSeconds(p.expiresIn);
		if (lifetimeS === undefined) {
			throw validationError("expiresIn", `expiresIn must be <n><s|m|h|d>, at most ${driverApi.DRIVER_TOKEN_LIFETIME_MAX_S / 86_400}d (e.g. 30d)`);
		}
		const { expiresIn: _lifetime, ...driverParams } = p;
		const driver = await this.deps.register({ ...driverParams, mode: p.mode ?? "live", simulated: false });
		if (driver.simulated) throw new ApiError("CONFLICT", "That phone belongs to a simulated driver");
		const token = newDriverToken();
		const tokenId = `dtk_${newId("key").slice(4)}`;
		const hash = hashApiKey(token);
		const tokenPrefix = token.slice(0, driverApi.DRIVER_TOKEN_SHOWN_CHARS);
		const expiresAt = await this.deps.repo.insert(tokenId, driver.driverId, hash, tokenPrefix, lifetimeS, audit?.(driver.driverId));
		this.deps.known.add(hash);
		await this.deps.announceCreated({ driverId: driver.driverId });
		return { driverId: driver.driverId, token, tokenId, tokenPrefix, expiresAt: expiresAt ? new Date(expiresAt).toISOString() : null };
	}

	/** Revokes every token of a driver, on every instance at once, and takes the driver offline. */
	async revokeAll(driverId: string, audit?: AuditHook<number>): Promise<{ driverId: string; revoked: number }> {
		const revoked = await this.deps.repo.revokeAll(driverId, audit);
		await this.announceRevoked(driverId);
		return { driverId, revoked };
	}

	/**
	 * Revokes one token (by id or prefix), on every instance at once. The
	 * driver keeps its other tokens; with none left working it goes offline,
	 * as after revokeAll. Announced even when it already was revoked: a
	 * repeat is how an operator makes sure after a lost announcement. `audit`
	 * records it in the revocation's transaction (not when nothing matched).
	 */
	async revokeOne(p: driverApi.RevokeDriverTokenParams, audit?: AuditHook<RevokedOne>): Promise<driverApi.RevokedDriverToken> {
		if ((p.tokenId === undefined) === (p.prefix === undefined)) throw validationError("tokenId", "Name the token by exactly one of tokenId or prefix");
		const outcome = await this.deps.repo.revokeOne(p.tokenId !== undefined ? { id: p.tokenId } : { prefix: p.prefix! }, audit);
		if (outcome === "missing") throw new ApiError("NOT_FOUND", "Unknown driver token");
		if (outcome === "ambiguous") throw validationError("prefix", "Several tokens have that prefix: name the token by tokenId");
		const remainingTokens = await this.announceRevoked(outcome.driver_id);
		return { tokenId: outcome.id, driverId: outcome.driver_id, revoked: outcome.revoked, remainingTokens };
	}

	/**
	 * Tokens of the driver were revoked (here, or by `npm run driver` in its
	 * own process): every instance forgets them, and the driver goes offline
	 * unless a token of it still works. The driver's working tokens left.
	 */
	async announceRevoked(driverId: string): Promise<number> {
		await this.deps.announceChanged({ driverId });
		const remaining = await this.deps.repo.workingCount(driverId);
		if (remaining === 0) await this.deps.takeOffline(driverId);
		return remaining;
	}

	/** Tokens, newest first (never the token itself). */
	async list(): Promise<driverApi.DriverTokenView[]> {
		const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
		return (await this.deps.repo.list()).map((r) => ({
			tokenId: r.id,
			driverId: r.driver_id,
			driverName: r.driver_name,
			tokenPrefix: r.token_prefix,
			createdAt: new Date(r.created_at).toISOString(),
			expiresAt: iso(r.expires_at),
			revokedAt: iso(r.revoked_at),
			status: r.status,
		}));
	}

	/**
	 * A token's SHA-256 (`hashApiKey`, what the gateway sends) → its driver,
	 * or null (unknown, revoked or expired). `onlyKnown` (the caller's address
	 * is throttled): null without a database lookup when no live token has
	 * the digest's prefix.
	 */
	async authenticate(hash: string, onlyKnown = false): Promise<driverApi.AuthenticatedDriver | null> {
		const now = this.now();
		const cached = this.cache.get(hash);
		if (cached) return this.answer(hash, cached.value, now);
		if (onlyKnown && !this.deps.known.mayBeLive(hash)) return null;
		const generation = this.cache.generation;
		const row = await this.deps.repo.liveToken(hash);
		// The expiry by this instance's clock, from the time left by the database's (clocks may differ).
		const resolved = row ? { driverId: row.driver_id, expiresAt: row.ms_left === null ? null : now + row.ms_left } : null;
		// A revocation seen meanwhile wins over what this lookup read (set() skips it).
		this.cache.set(hash, resolved, generation);
		return this.answer(hash, resolved, now);
	}

	/** A cached token past its expiry is refused, and remembered as unknown from then on. */
	private answer(hash: string, resolved: Resolved | null, now: number): driverApi.AuthenticatedDriver | null {
		if (!resolved) return null;
		if (resolved.expiresAt !== null && resolved.expiresAt <= now) {
			this.cache.set(hash, null);
			return null;
		}
		return { driverId: resolved.driverId };
	}

	/** Some driver's tokens changed (here or on another instance): forget what was resolved. */
	changed(): void {
		this.cache.clear();
	}
}
