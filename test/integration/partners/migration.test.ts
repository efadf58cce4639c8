import { Sequelize } from "sequelize";
import { createTestDatabase } from "../../helpers/db";
import { runMigrations } from "../../../mixins/db.mixin";
import { migrations } from "../../../services/partners/migrations";

/** partners/002 on a database that already has partners: keys and secrets carried over (a disabled partner's key revoked), and back down. */
it("migration 002 carries existing partners, keys and secrets over, and down restores them", async () => {
	const db = await createTestDatabase("migcheck");
	const seq = new Sequelize(db.url, { logging: false });
	try {
		await runMigrations(seq, { service: "partners", migrations: [migrations[0]] }, db.url);
		await seq.query("INSERT INTO partners (id, name, api_key_hash, webhook_secret) VALUES ('ptn_a','A','h1','whsec_a'), ('ptn_b','B','h2','whsec_b')");
		await seq.query("UPDATE partners SET disabled_at = now() WHERE id = 'ptn_b'");
		await runMigrations(seq, { service: "partners", migrations }, db.url);
		const [keys] = await seq.query("SELECT partner_id, key_hash, label, revoked_at IS NOT NULL AS revoked FROM api_keys ORDER BY partner_id");
		const [secrets] = await seq.query("SELECT partner_id, secret, valid_until FROM webhook_secrets ORDER BY partner_id");
		expect(keys).toEqual([
			{ partner_id: "ptn_a", key_hash: "h1", label: "initial", revoked: false },
			{ partner_id: "ptn_b", key_hash: "h2", label: "initial", revoked: true },
		]);
		expect(secrets).toEqual([
			{ partner_id: "ptn_a", secret: "whsec_a", valid_until: null },
			{ partner_id: "ptn_b", secret: "whsec_b", valid_until: null },
		]);
		await migrations[1].down!(seq.getQueryInterface(), seq);
		const [back] = await seq.query("SELECT id, api_key_hash, webhook_secret FROM partners ORDER BY id");
		expect(back).toEqual([
			{ id: "ptn_a", api_key_hash: "h1", webhook_secret: "whsec_a" },
			{ id: "ptn_b", api_key_hash: "h2", webhook_secret: "whsec_b" },
		]);
	} finally {
		await seq.close();
		await db.drop();
	}
});
