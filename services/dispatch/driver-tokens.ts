import { randomBytes } from "node:crypto";
import { LRUCache } from "lru-cache";
import * as driverApi from "../../contracts/driver";
import type { DriverView } from "../../contracts/dispatch";
import { ApiError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { hashApiKey } from "../../lib/secrets";
import type { DriverTokensRepo } from "./driver-tokens.repo";
import type { AuditHook } from "../../lib/audit";

/**
 * Driver API tokens: created by an operator, stored as SHA-256 hashes,
 * revocable. A token resolved is cached per instance for `cacheMs`; a
 * revocation is announced (`dispatch.driverTokensChanged`) and every
 * instance drops its cache (the TTL bounds a lost event).
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
	/** Tells every instance (this one included) to drop its cache. */
	announceChanged: (event: driverApi.DriverTokensChangedEvent) => Promise<void>;
	/** The driver of revoked tokens goes offline at once (driver moves). */
	takeOffline: (driverId: string) => Promise<unknown>;
	cacheMs: number;
	/** Tokens kept at most (one per driver online is the working set). */
	cacheMax: number;
}

export class DriverTokens {
	private readonly cache: LRUCache<string, { driverId: string | null }>;
	/** Bumped by every revocation: a lookup that began before one does not fill the cache. */
	private generation = 0;

	constructor(private readonly deps: DriverTokensDeps) {
		// A token in use stays cached (each use restarts its time): re-reading every token each
		// cacheMs would cost the database drivers ÷ cacheMs lookups a second, for nothing. A
		// revocation clears every instance at once; one missed while disconnected is covered by
		// clearing on every (re)connection, as Moleculer's own caches do; cacheMs bounds the rest.
		this.cache = new LRUCache({ max: deps.cacheMax, ttl: deps.cacheMs, updateAgeOnGet: true });
	}

	/**
	 * Registers the driver (idempotent by phone) and issues a token, shown
	 * once. `audit` records the token (by id) in the audit trail, in the
	 * token's transaction.
	 */
	async create(p: driverApi.CreateDriverTokenParams, audit?: (driverId: string) => AuditHook<string>): Promise<driverApi.DriverTokenCreated> {
		const driver = await this.deps.register({ ...p, mode: p.mode ?? "live", simulated: false });
		if (driver.simulated) throw new ApiError("CONFLICT", "That phone belongs to a simulated driver");
		const token = newDriverToken();
		const tokenId = `dtk_${newId("key").slice(4)}`;
		await this.deps.repo.insert(tokenId, driver.driverId, hashApiKey(token), audit?.(driver.driverId));
		return { driverId: driver.driverId, token, tokenId };
	}

	/** Revokes every token of a driver, on every instance at once, and takes the driver offline. */
	async revokeAll(driverId: string, audit?: AuditHook<number>): Promise<{ driverId: string; revoked: number }> {
		const revoked = await this.deps.repo.revokeAll(driverId, audit);
		await this.announceRevoked(driverId);
		return { driverId, revoked };
	}

	/** Tokens of the driver were revoked (here, or by `npm run driver` in its own process): every instance forgets them, the driver goes offline. */
	async announceRevoked(driverId: string): Promise<void> {
		await this.deps.announceChanged({ driverId });
		await this.deps.takeOffline(driverId);
	}

	/** Tokens, newest first (never the token itself). */
	async list(): Promise<driverApi.DriverTokenView[]> {
		return (await this.deps.repo.list()).map((r) => ({
			tokenId: r.id,
			driverId: r.driver_id,
			driverName: r.driver_name,
			createdAt: new Date(r.created_at).toISOString(),
			revokedAt: r.revoked_at ? new Date(r.revoked_at).toISOString() : null,
		}));
	}

	/** A token's SHA-256 (`hashApiKey`, what the gateway sends) → its driver, or null (unknown or revoked). */
	async authenticate(hash: string): Promise<driverApi.AuthenticatedDriver | null> {
		const cached = this.cache.get(hash);
		if (cached) return cached.driverId ? { driverId: cached.driverId } : null;
		const generation = this.generation;
		const driverId = (await this.deps.repo.driverOf(hash)) ?? null;
		// A revocation seen meanwhile wins over what this lookup read.
		if (generation === this.generation) this.cache.set(hash, { driverId });
		return driverId ? { driverId } : null;
	}

	/** Some driver's tokens changed (here or on another instance): forget what was resolved. */
	changed(): void {
		this.generation++;
		this.cache.clear();
	}
}
