import type { Db } from "../../mixins/db.mixin";
import { noAudit, type AuditHook } from "../../lib/audit";

/**
 * The driver API's SQL: `driver_tokens` (only SHA-256 hashes of tokens) and
 * the one read the driver API needs to tell "not your ride" from "too late":
 * whether the driver was ever offered a ride.
 */

export interface DriverTokenRow {
	id: string;
	driver_id: string;
	driver_name: string;
	token_prefix: string | null;
	created_at: Date;
	expires_at: Date | null;
	revoked_at: Date | null;
	status: "active" | "expired" | "revoked";
}

/** A working token's driver, and how long it has left by the database's clock (null: until revoked). */
export interface LiveToken {
	driver_id: string;
	ms_left: number | null;
}

/** One token revoked: its id, its driver, and whether this call revoked it (false: it already was). */
export interface RevokedOne {
	id: string;
	driver_id: string;
	revoked: boolean;
}

/** One token named by id or by prefix, as found before revoking it. */
export type TokenLookup = { id: string } | { prefix: string };

/** Which tokens still work: not revoked and not past their expiry (the database's clock). */
const WORKS = "revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())";

export class DriverTokensRepo {
	constructor(private readonly db: Db) {}

	/**
	 * A new token and its audit entry, in one transaction; `lifetimeS` null for
	 * one that lasts until revoked. Its expiry by the database's clock.
	 */
	async insert(
		id: string,
		driverId: string,
		tokenHash: string,
		tokenPrefix: string,
		lifetimeS: number | null,
		audit: AuditHook<string> = noAudit,
	): Promise<Date | null> {
		return this.db.tx(async (t) => {
			const rows = await this.db.rows<{ expires_at: Date | null }>(
				`INSERT INTO driver_tokens (id, driver_id, token_hash, token_prefix, expires_at)
				 VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::int))
				 RETURNING expires_at`,
				[id, driverId, tokenHash, tokenPrefix, lifetimeS],
				t,
			);
			await audit(t, id);
			return rows[0].expires_at;
		});
	}

	/** The driver of a working token (unrevoked, unexpired), with the time it has left: a cache must not keep it past that. */
	async liveToken(tokenHash: string): Promise<LiveToken | undefined> {
		return (
			await this.db.rows<LiveToken>(
				`SELECT driver_id, (extract(epoch FROM expires_at - now()) * 1000)::float8 AS ms_left
				 FROM driver_tokens WHERE token_hash = $1 AND ${WORKS}`,
				[tokenHash],
			)
		)[0];
	}

	/**
	 * Revokes one token. "missing" when none has that id or prefix,
	 * "ambiguous" when two share the prefix (48 random bits: not expected,
	 * but then the operator names it by id); `revoked` false when it already was.
	 */
	async revokeOne(by: TokenLookup, audit: AuditHook<RevokedOne> = noAudit): Promise<"missing" | "ambiguous" | RevokedOne> {
		return this.db.tx(async (t) => {
			const found = await this.db.rows<{ id: string; driver_id: string }>(
				`SELECT id, driver_id FROM driver_tokens WHERE ${"id" in by ? "id" : "token_prefix"} = $1 LIMIT 2`,
				["id" in by ? by.id : by.prefix],
				t,
			);
			if (found.length === 0) return "missing";
			if (found.length > 1) return "ambiguous";
			const revoked = await this.db.rows(
				"UPDATE driver_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id",
				[found[0].id],
				t,
			);
			// Recorded in the revocation's transaction, a repeat (already revoked) too, as revokeAll records 0.
			const result = { ...found[0], revoked: revoked.length > 0 };
			await audit(t, result);
			return result;
		});
	}

	/** Live tokens after `afterId` in id order, as digest prefixes: the known-tokens set's full read (lib/known-credentials.ts). */
	livePrefixes(afterId: string | null, limit: number): Promise<Array<{ id: string; prefix: string }>> {
		return this.db.rows<{ id: string; prefix: string }>(
			"SELECT id, substr(token_hash, 1, 16) AS prefix FROM driver_tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AND ($1::text IS NULL OR id > $1) ORDER BY id LIMIT $2",
			[afterId, limit],
		);
	}

	/**
	 * Live tokens created at or after `since`: the known-tokens set's re-read
	 * (every KNOWN_CREDENTIALS_REFRESH_MS and on each creation; no index on
	 * created_at, so a scan of the table: tokens are few and rarely made).
	 */
	async prefixesSince(since: Date): Promise<string[]> {
		return (
			await this.db.rows<{ prefix: string }>(
				"SELECT substr(token_hash, 1, 16) AS prefix FROM driver_tokens WHERE created_at >= $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())",
				[since],
			)
		).map((r) => r.prefix);
	}

	now(): Promise<Date> {
		return this.db.now();
	}

	/** Revokes every live token of the driver; the number revoked. */
	async revokeAll(driverId: string, audit: AuditHook<number> = noAudit): Promise<number> {
		return this.db.tx(async (t) => {
			const revoked = (
				await this.db.rows<{ id: string }>(
					"UPDATE driver_tokens SET revoked_at = now() WHERE driver_id = $1 AND revoked_at IS NULL RETURNING id",
					[driverId],
					t,
				)
			).length;
			await audit(t, revoked);
			return revoked;
		});
	}

	/** How many of the driver's tokens still work: at 0 it has no access left. */
	async workingCount(driverId: string): Promise<number> {
		return (await this.db.rows<{ n: number }>(`SELECT count(*)::int AS n FROM driver_tokens WHERE driver_id = $1 AND ${WORKS}`, [driverId]))[0].n;
	}

	async list(): Promise<DriverTokenRow[]> {
		return this.db.rows<DriverTokenRow>(
			`SELECT t.id, t.driver_id, d.name AS driver_name, t.token_prefix, t.created_at, t.expires_at, t.revoked_at,
			        CASE WHEN t.revoked_at IS NOT NULL THEN 'revoked' WHEN t.expires_at <= now() THEN 'expired' ELSE 'active' END AS status
			 FROM driver_tokens t JOIN drivers d ON d.id = t.driver_id ORDER BY t.created_at DESC LIMIT 1000`,
		);
	}

	/** Whether the ride was ever offered to this driver (any offer state). */
	async wasOffered(driverId: string, orderId: string): Promise<boolean> {
		return (await this.db.rows("SELECT 1 AS one FROM dispatch_offers WHERE driver_id = $1 AND order_id = $2 LIMIT 1", [driverId, orderId])).length > 0;
	}
}
