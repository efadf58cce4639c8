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
	created_at: Date;
	revoked_at: Date | null;
}

export class DriverTokensRepo {
	constructor(private readonly db: Db) {}

	/** A new token and its audit entry, in one transaction. */
	async insert(id: string, driverId: string, tokenHash: string, audit: AuditHook<string> = noAudit): Promise<void> {
		await this.db.tx(async (t) => {
			await this.db.rows("INSERT INTO driver_tokens (id, driver_id, token_hash) VALUES ($1, $2, $3) RETURNING id", [id, driverId, tokenHash], t);
			await audit(t, id);
		});
	}

	/** The driver of a live (unrevoked) token. */
	async driverOf(tokenHash: string): Promise<string | undefined> {
		return (await this.db.rows<{ driver_id: string }>("SELECT driver_id FROM driver_tokens WHERE token_hash = $1 AND revoked_at IS NULL", [tokenHash]))[0]
			?.driver_id;
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

	async list(): Promise<DriverTokenRow[]> {
		return this.db.rows<DriverTokenRow>(
			`SELECT t.id, t.driver_id, d.name AS driver_name, t.created_at, t.revoked_at
			 FROM driver_tokens t JOIN drivers d ON d.id = t.driver_id ORDER BY t.created_at DESC LIMIT 1000`,
		);
	}

	/** Whether the ride was ever offered to this driver (any offer state). */
	async wasOffered(driverId: string, orderId: string): Promise<boolean> {
		return (await this.db.rows("SELECT 1 AS one FROM dispatch_offers WHERE driver_id = $1 AND order_id = $2 LIMIT 1", [driverId, orderId])).length > 0;
	}
}
