import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { QueryTypes } from "sequelize";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { ApiError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { migrations } from "./migrations";
import { E164_PATTERN, normaliseEmail } from "./rider";

/** Riders: the partner's end users, identified by (partner, phone). */

export interface UpsertRiderParams {
	partnerId: string;
	name: string;
	phone: string;
	email?: string;
}

export interface GetRiderParams {
	riderId: string;
	/** When given, a rider of another partner is "not found". */
	partnerId?: string;
}

export interface Rider {
	riderId: string;
	partnerId: string;
	name: string;
	phone: string;
	email: string | null;
	createdAt: string;
	updatedAt: string;
}

interface RiderRow {
	id: string;
	partner_id: string;
	name: string;
	phone: string;
	email: string | null;
	created_at: Date;
	updated_at: Date;
}

const toRider = (r: RiderRow): Rider => ({
	riderId: r.id,
	partnerId: r.partner_id,
	name: r.name,
	phone: r.phone,
	email: r.email,
	createdAt: new Date(r.created_at).toISOString(),
	updatedAt: new Date(r.updated_at).toISOString(),
});

type RidersThis = Service & DbThis;

const RidersService: ServiceSchema<ServiceSettingSchema, Record<string, never>, DbThis> = {
	name: "riders",
	mixins: [DbMixin({ service: "riders", migrations })],

	actions: {
		/**
		 * Creates the rider or updates their name (and email, when given) in one
		 * statement. The (partner_id, phone) unique key makes concurrent calls
		 * for one phone converge on one row, with no read-then-write race.
		 */
		upsert: {
			access: "internal",
			params: {
				partnerId: { type: "string", min: 1, max: 100 },
				name: { type: "string", trim: true, min: 1, max: 200 },
				phone: { type: "string", trim: true, pattern: E164_PATTERN, messages: { stringPattern: "The '{field}' field must be an E.164 phone number like +919812345678." } },
				email: { type: "email", mode: "precise", max: 254, optional: true },
			},
			async handler(this: RidersThis, ctx: Context<UpsertRiderParams>): Promise<Rider> {
				const { partnerId, name, phone } = ctx.params;
				const email = normaliseEmail(ctx.params.email);
				// An omitted email keeps the stored one: leaving a field out is not a request to erase it.
				const rows = await this.sequelize.query<RiderRow>(
					`INSERT INTO riders (id, partner_id, phone, name, email) VALUES ($1, $2, $3, $4, $5)
					 ON CONFLICT (partner_id, phone) DO UPDATE
					   SET name = EXCLUDED.name,
					       email = COALESCE(EXCLUDED.email, riders.email),
					       updated_at = now()
					 RETURNING id, partner_id, name, phone, email, created_at, updated_at`,
					{ bind: [newId("rdr"), partnerId, phone, name, email], type: QueryTypes.SELECT },
				);
				return toRider(rows[0]);
			},
		},

		/** A rider by id (scoped to a partner when `partnerId` is given). */
		get: {
			access: "internal",
			params: {
				riderId: { type: "string", min: 1, max: 100 },
				partnerId: { type: "string", min: 1, max: 100, optional: true },
			},
			async handler(this: RidersThis, ctx: Context<GetRiderParams>): Promise<Rider> {
				const { riderId, partnerId } = ctx.params;
				const rows = await this.sequelize.query<RiderRow>(
					`SELECT id, partner_id, name, phone, email, created_at, updated_at FROM riders
					 WHERE id = $1 AND ($2::text IS NULL OR partner_id = $2)`,
					{ bind: [riderId, partnerId ?? null], type: QueryTypes.SELECT },
				);
				if (!rows[0]) throw new ApiError(404, "NOT_FOUND", "Rider not found");
				return toRider(rows[0]);
			},
		},
	},
};

export default RidersService;
