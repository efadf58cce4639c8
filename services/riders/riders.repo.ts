import { QueryTypes, type Sequelize } from "sequelize";
import type { Rider } from "../../contracts/riders";
import { newId } from "../../lib/ids";

/** All of the riders service's SQL: the `riders` table, keyed by (partner_id, phone). */

interface RiderRow {
	id: string;
	partner_id: string;
	name: string;
	phone: string;
	email: string | null;
	created_at: Date;
	updated_at: Date;
}

const RIDER_COLUMNS = "id, partner_id, name, phone, email, created_at, updated_at";

function toRider(r: RiderRow): Rider {
	return {
		riderId: r.id,
		partnerId: r.partner_id,
		name: r.name,
		phone: r.phone,
		email: r.email,
		createdAt: new Date(r.created_at).toISOString(),
		updatedAt: new Date(r.updated_at).toISOString(),
	};
}

export class RidersRepo {
	constructor(private readonly sequelize: Sequelize) {}

	/**
	 * Inserts the rider or updates their name, and their email unless `email`
	 * is null (an omitted email keeps the stored one), in one statement: the
	 * (partner_id, phone) unique key makes concurrent calls for one phone
	 * converge on one row, with no read-then-write race.
	 */
	async upsert(partnerId: string, phone: string, name: string, email: string | null): Promise<Rider> {
		const rows = await this.sequelize.query<RiderRow>(
			`INSERT INTO riders (id, partner_id, phone, name, email) VALUES ($1, $2, $3, $4, $5)
			 ON CONFLICT (partner_id, phone) DO UPDATE
			   SET name = EXCLUDED.name,
			       email = COALESCE(EXCLUDED.email, riders.email),
			       updated_at = now()
			 RETURNING ${RIDER_COLUMNS}`,
			{ bind: [newId("rdr"), partnerId, phone, name, email], type: QueryTypes.SELECT },
		);
		return toRider(rows[0]);
	}

	/** The rider, or null if unknown (or, when `partnerId` is given, another partner's). */
	async find(riderId: string, partnerId?: string): Promise<Rider | null> {
		const rows = await this.sequelize.query<RiderRow>(
			`SELECT ${RIDER_COLUMNS} FROM riders WHERE id = $1 AND ($2::text IS NULL OR partner_id = $2)`,
			{ bind: [riderId, partnerId ?? null], type: QueryTypes.SELECT },
		);
		return rows[0] ? toRider(rows[0]) : null;
	}
}
