import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { ApiError } from "../../lib/errors";
import { DEFAULT_RIDER_MODE, getRiderParams, upsertRiderParams, type GetRiderParams, type Rider, type UpsertRiderParams } from "../../contracts/riders";
import { migrations } from "./migrations";
import { normaliseEmail } from "./rider";
import { RidersRepo, riderKey, type RiderUpsert } from "./riders.repo";
import { StatementBatcher } from "../../lib/statement-batcher";

/**
 * Riders: the partner's end users, identified by (partner, mode, phone): a
 * test booking never overwrites the live rider of the same phone. Only
 * orders calls it (while creating an order), so both actions are internal.
 * It has no settings of its own.
 */

interface RidersLocal {
	repo: RidersRepo;
	/** Concurrent upserts (one per create-order) go to PostgreSQL together: one statement for many riders under load. */
	upserts: StatementBatcher<RiderUpsert, Rider>;
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
				const mode = ctx.params.mode ?? DEFAULT_RIDER_MODE;
				return this.upserts.submit({ partnerId, mode, phone, name, email: normaliseEmail(ctx.params.email) });
			},
		},

		/** A rider by id (scoped to a partner when `partnerId` is given). */
		get: {
			access: "internal",
			params: getRiderParams,
			async handler(this: RidersThis, ctx: Context<GetRiderParams>): Promise<Rider> {
				const rider = await this.repo.find(ctx.params.riderId, ctx.params.partnerId);
				if (!rider) throw new ApiError("NOT_FOUND", "Rider not found");
				return rider;
			},
		},
	},

	created(this: RidersThis) {
		// The DB mixin's created() ran first: the pool is there.
		this.repo = new RidersRepo(this.db);
		// Up to 4 statements out at once (the pool is shared with the other services of the process).
		this.upserts = new StatementBatcher(
			(items) => this.repo.upsertMany(items),
			(i) => riderKey(i.partnerId, i.mode, i.phone),
			{ maxBatch: 100, maxInFlight: 4 },
		);
	},
};

export default RidersService;
