import type { Db } from "../../mixins/db.mixin";
import type { Rider, RiderMode } from "../../contracts/riders";
import { newId } from "../../lib/ids";

/** All of the riders service's SQL: the `riders` table, keyed by (partner_id, mode, phone) (migration 002). */

interface RiderRow {
	id: string;
	partner_id: string;
	mode: RiderMode;
	name: string;
	phone: string;
	email: string | null;
	created_at: Date;
	updated_at: Date;
}

const RIDER_COLUMNS = "id, partner_id, mode, name, phone, email, created_at, updated_at";

/**
 * One rider row: partner, mode and phone (a phone never means the same rider
 * for two partners, nor a test rider for a live one).
 */
export const riderKey = (partnerId: string, mode: RiderMode, phone: string): string => `${partnerId}\u0000${mode}\u0000${phone}`;

export interface RiderUpsert {
	partnerId: string;
	mode: RiderMode;
	phone: string;
	name: string;
	email: string | null;
}

function toRider(r: RiderRow): Rider {
	return {
		riderId: r.id,
		partnerId: r.partner_id,
		mode: r.mode,
		name: r.name,
		phone: r.phone,
		email: r.email,
		createdAt: new Date(r.created_at).toISOString(),
		updatedAt: new Date(r.updated_at).toISOString(),
	};
}

export class RidersRepo {
	constructor(private readonly db: Db) {}

	/**
	 * Inserts the rider or updates their name, and their email unless `email`
	 * is null (an omitted email keeps the stored one), in one statement: the
	 * (partner_id, mode, phone) unique key makes concurrent calls for one phone
	 * converge on one row, with no read-then-write race, and keeps a test
	 * booking off the live rider of the same phone.
	 */
	async upsert(i: RiderUpsert): Promise<Rider> {
		const rows = await this.db.rows<RiderRow>(
			`INSERT INTO riders (id, partner_id, mode, phone, name, email) VALUES ($1, $2, $3, $4, $5, $6)
			 ON CONFLICT (partner_id, mode, phone) DO UPDATE
			   SET name = EXCLUDED.name,
			       email = COALESCE(EXCLUDED.email, riders.email),
			       updated_at = now()
			 RETURNING ${RIDER_COLUMNS}`,
			[newId("rdr"), i.partnerId, i.mode, i.phone, i.name, i.email],
		);
		return toRider(rows[0]);
	}

	/**
	 * `upsert` for several riders in one statement (the riders service groups
	 * concurrent calls, see lib/statement-batcher.ts): one result per input, in
	 * order. The caller never passes one (partner, mode, phone) twice: a
	 * multi-row upsert may not touch a row twice.
	 */
	async upsertMany(items: RiderUpsert[]): Promise<Rider[]> {
		if (items.length === 1) return [await this.upsert(items[0])];
		const rows = await this.db.rows<RiderRow>(
			`INSERT INTO riders (id, partner_id, mode, phone, name, email)
			 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
			 ON CONFLICT (partner_id, mode, phone) DO UPDATE
			   SET name = EXCLUDED.name,
			       email = COALESCE(EXCLUDED.email, riders.email),
			       updated_at = now()
			 RETURNING ${RIDER_COLUMNS}`,
			[
				items.map(() => newId("rdr")),
				items.map((i) => i.partnerId),
				items.map((i) => i.mode),
				items.map((i) => i.phone),
				items.map((i) => i.name),
				items.map((i) => i.email),
			],
		);
		const byKey = new Map(rows.map((r) => [riderKey(r.partner_id, r.mode, r.phone), r]));
		return items.map((i) => {
			const row = byKey.get(riderKey(i.partnerId, i.mode, i.phone));
			if (!row) throw new Error("rider upsert returned no row");
			return toRider(row);
		});
	}

	/** The rider, or null if unknown (or, when `partnerId` is given, another partner's). */
	async find(riderId: string, partnerId?: string): Promise<Rider | null> {
		const row = await this.db.row<RiderRow>(`SELECT ${RIDER_COLUMNS} FROM riders WHERE id = $1 AND ($2::text IS NULL OR partner_id = $2)`, [
			riderId,
			partnerId ?? null,
		]);
		return row ? toRider(row) : null;
	}
}
