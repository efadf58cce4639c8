import { QueryTypes, type Sequelize } from "sequelize";

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
	constructor(private readonly sequelize: Sequelize) {}

	/**
	 * The secret stored under `name`, storing `candidate` first when there is
	 * none yet. Every instance on one database ends up with the same secret.
	 */
	async ensureSecret(name: string, candidate: string): Promise<string> {
		await this.sequelize.query(INSERT_SECRET_SQL, { bind: [name, candidate] });
		const rows = await this.sequelize.query<{ secret: string }>(SELECT_SECRET_SQL, { bind: [name], type: QueryTypes.SELECT });
		if (!rows[0]) throw new Error(`pricing_secrets has no secret named "${name}"`);
		return rows[0].secret;
	}
}
