import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { ApiError } from "../../lib/errors";
import { getRiderParams, upsertRiderParams, type GetRiderParams, type Rider, type UpsertRiderParams } from "../../contracts/riders";
import { migrations } from "./migrations";
import { normaliseEmail } from "./rider";
import { RidersRepo } from "./riders.repo";

/**
 * Riders: the partner's end users, identified by (partner, phone). Only
 * orders calls it (while creating an order), so both actions are internal.
 * It has no settings of its own.
 */

interface RidersLocal {
	repo: RidersRepo;
}

type RidersThis = Service & DbThis & RidersLocal;

const RidersService: ServiceSchema<ServiceSettingSchema, Record<string, never>, DbThis & RidersLocal> = {
	name: "riders",
	mixins: [DbMixin({ service: "riders", migrations })],

	actions: {
		/** Creates the rider or updates their name (and email, when given). */
		upsert: {
			access: "internal",
			params: upsertRiderParams,
			handler(this: RidersThis, ctx: Context<UpsertRiderParams>): Promise<Rider> {
				const { partnerId, name, phone } = ctx.params;
				return this.repo.upsert(partnerId, phone, name, normaliseEmail(ctx.params.email));
			},
		},

		/** A rider by id (scoped to a partner when `partnerId` is given). */
		get: {
			access: "internal",
			params: getRiderParams,
			async handler(this: RidersThis, ctx: Context<GetRiderParams>): Promise<Rider> {
				const rider = await this.repo.find(ctx.params.riderId, ctx.params.partnerId);
				if (!rider) throw new ApiError(404, "NOT_FOUND", "Rider not found");
				return rider;
			},
		},
	},

	created(this: RidersThis) {
		// The DB mixin's created() ran first: the pool is there.
		this.repo = new RidersRepo(this.sequelize);
	},
};

export default RidersService;
