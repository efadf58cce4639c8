import type { Db } from "../../mixins/db.mixin";

/**
 * Every statement of pricing. Pricing owns one table, `pricing_secrets`:
 * server-generated secrets (the quote signing key when QUOTE_SIGNING_SECRET
 * is unset), written once per name and read at start, never per request.
 */

/** Several instances may start together: the first insert wins ... */
const INSERT_SECRET_SQL = "INSERT INTO pricing_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
/** ... and everyone reads the winner. */
const SELECT_SECRET_SQL = "SELECT secret FROM pricing_secrets WHERE name = $1";

export class PricingRepo {
	constructor(private readonly db: Db) {}

	/**
	 * The secret stored under `name`, storing `candidate` first when there is
	 * none yet. Every instance on one database ends up with the same secret.
	 */
	async ensureSecret(name: string, candidate: string): Promise<string> {
		await this.db.run(INSERT_SECRET_SQL, [name, candidate]);
		const row = await this.db.row<{ secret: string }>(SELECT_SECRET_SQL, [name]);
		if (!row) throw new Error(`pricing_secrets has no secret named "${name}"`);
		return row.secret;
	}
}
