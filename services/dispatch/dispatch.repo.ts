import { QueryTypes, type Sequelize, type Transaction } from "sequelize";
import { DriversRepo } from "./drivers.repo";
import { MatchingRepo } from "./matching.repo";
import { RideMirrorRepo } from "./ride-mirror.repo";

/**
 * Dispatch's SQL, one repo file per part: `drivers` (drivers.repo.ts),
 * `dispatch_rides`, dispatch's mirror of each ride (ride-mirror.repo.ts),
 * matching and `dispatch_offers` (matching.repo.ts), and the driver API's
 * tokens (driver-tokens.repo.ts). Every claim is a conditional update, so
 * any number of dispatch instances can run: the database decides who gets a
 * driver. Functions taking a transaction run inside the caller's.
 *
 * `DispatchRepo` is the service's one handle: transactions, the database's
 * clock, and the part repos, which all run on its connection.
 */

/** How the part repos run a statement (inside the caller's transaction when given one). */
export type Query = <T extends object>(sql: string, bind?: unknown[], t?: Transaction) => Promise<T[]>;

export class DispatchRepo {
	readonly drivers: DriversRepo;
	readonly mirror: RideMirrorRepo;
	readonly matching: MatchingRepo;

	constructor(private readonly sequelize: Sequelize) {
		const q: Query = (sql, bind, t) => this.q(sql, bind, t);
		this.drivers = new DriversRepo(q);
		this.mirror = new RideMirrorRepo(q);
		this.matching = new MatchingRepo(q);
	}

	async q<T extends object>(sql: string, bind: unknown[] = [], t?: Transaction): Promise<T[]> {
		return this.sequelize.query<T>(sql, { bind, type: QueryTypes.SELECT, transaction: t });
	}

	async tx<T>(fn: (t: Transaction) => Promise<T>): Promise<T> {
		return this.sequelize.transaction((t) => fn(t));
	}

	async dbNow(): Promise<Date> {
		return (await this.q<{ now: Date }>("SELECT now() AS now"))[0].now;
	}
}
