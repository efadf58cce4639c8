import type { Transaction } from "sequelize";
import type { Db } from "../../mixins/db.mixin";
import { DriverTokensRepo } from "./driver-tokens.repo";
import { DriversRepo } from "./drivers.repo";
import { MatchingRepo } from "./matching.repo";
import { RideMirrorRepo } from "./ride-mirror.repo";

/**
 * Dispatch's SQL, one repo file per table group: `drivers` (drivers.repo.ts),
 * `dispatch_rides`, dispatch's mirror of each ride (ride-mirror.repo.ts),
 * matching and `dispatch_offers` (matching.repo.ts), and the driver API's
 * tokens (driver-tokens.repo.ts). Every claim is a conditional update, so
 * any number of dispatch instances can run: the database decides who gets a
 * driver. Functions taking a transaction run inside the caller's.
 *
 * `DispatchRepo` is the service's one handle: the part repos, transactions
 * and the database's clock, all on the DB mixin's `Db`.
 */
export class DispatchRepo {
	readonly drivers: DriversRepo;
	readonly mirror: RideMirrorRepo;
	readonly matching: MatchingRepo;
	readonly tokens: DriverTokensRepo;

	constructor(private readonly db: Db) {
		this.drivers = new DriversRepo(db);
		this.mirror = new RideMirrorRepo(db);
		this.matching = new MatchingRepo(db);
		this.tokens = new DriverTokensRepo(db);
	}

	tx<T>(fn: (t: Transaction) => Promise<T>): Promise<T> {
		return this.db.tx(fn);
	}

	now(): Promise<Date> {
		return this.db.now();
	}
}
