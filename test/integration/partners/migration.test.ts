import { Sequelize } from "sequelize";
import { createTestDatabase } from "../../helpers/db";
import { Db, runMigrations } from "../../../mixins/db.mixin";
import { PartnersRepo } from "../../../services/partners/partners.repo";
import { migrations } from "../../../services/partners/migrations";
import { FIRST_API_VERSION } from "../../../contracts/versions";

/** partners/002 on a database that already has partners: keys and secrets carried over (a disabled partner's key revoked), and back down. */
it("migration 002 carries existing partners, keys and secrets over, and down restores them", async () => {
	const db = await createTestDatabase("migcheck");
	const seq = new Sequelize(db.url, { logging: false });
	try {
		await runMigrations(seq, { service: "partners", migrations: [migrations[0]] }, db.url);
		await seq.query("INSERT INTO partners (id, name, api_key_hash, webhook_secret) VALUES ('ptn_a','A','h1','whsec_a'), ('ptn_b','B','h2','whsec_b')");
		await seq.query("UPDATE partners SET disabled_at = now() WHERE id = 'ptn_b'");
		// Up to 003: 004 gives every partner a test secret of its own (its own test below).
		await runMigrations(seq, { service: "partners", migrations: migrations.slice(0, 3) }, db.url);
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

/**
 * partners/004 on a database with a partner from before modes: its one secret
 * keeps signing its live webhooks (no live partner's verification breaks on
 * upgrade) and, during SHARED_SECRET_TEST_TRANSITION_DAYS, its test webhooks
 * next to the test secret it now has; after the transition (or a test
 * rotation) test webhooks are signed with the test secret only, and a live
 * rotation never touches the test secrets.
 */
it("migration 004 keeps a partner's secret valid for live, and for test during the transition only", async () => {
	const db = await createTestDatabase("migmodes");
	const seq = new Sequelize(db.url, { logging: false });
	const repo = new PartnersRepo(new Db(seq));
	const DAY_MS = 86_400_000;
	try {
		await runMigrations(seq, { service: "partners", migrations: migrations.slice(0, 3) }, db.url);
		await seq.query("INSERT INTO partners (id, name) VALUES ('ptn_old', 'Old')");
		await seq.query("INSERT INTO webhook_secrets (partner_id, secret) VALUES ('ptn_old', 'whsec_b2xkb2xkb2xkb2xkb2xkb2xkb2xkb2xk')");
		await runMigrations(seq, { service: "partners", migrations }, db.url);
		const old = "whsec_b2xkb2xkb2xkb2xkb2xkb2xkb2xkb2xk";

		// Live: the old secret, current, alone.
		expect(await repo.signingSecrets("ptn_old", "live", 30)).toEqual([{ secret: old, validUntil: null }]);
		// Test: its own new secret (current) and the old one until the transition ends, 30 days from the upgrade.
		const test = await repo.signingSecrets("ptn_old", "test", 30);
		expect(test).toHaveLength(2);
		expect(test[0]).toMatchObject({ validUntil: null });
		expect(test[0].secret).toMatch(/^whsec_/);
		expect(test[0].secret).not.toBe(old);
		expect(test[1].secret).toBe(old);
		const ends = Date.parse(test[1].validUntil!);
		expect(ends).toBeGreaterThan(Date.now() + 29 * DAY_MS);
		expect(ends).toBeLessThan(Date.now() + 31 * DAY_MS);
		// After the transition (0 days: already over) test webhooks are signed with the test secret only.
		expect(await repo.signingSecrets("ptn_old", "test", 0)).toEqual([{ secret: test[0].secret, validUntil: null }]);

		// A test rotation with no grace ends the old secret's use for test, not for live.
		const rotated = "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVz";
		await repo.rotateWebhookSecret("ptn_old", "test", rotated, 0, 30);
		expect((await repo.signingSecrets("ptn_old", "test", 30)).map((s) => s.secret)).toEqual([rotated]);
		expect(await repo.signingSecrets("ptn_old", "live", 30)).toEqual([{ secret: old, validUntil: null }]);

		// A live rotation ends the old secret for live (after its grace) and leaves test alone.
		const live = "whsec_bGl2ZWxpdmVsaXZlbGl2ZWxpdmVsaXZlbGl2";
		await repo.rotateWebhookSecret("ptn_old", "live", live, 3_600, 30);
		const liveNow = await repo.signingSecrets("ptn_old", "live", 30);
		expect(liveNow.map((s) => s.secret)).toEqual([live, old]);
		expect(liveNow[1].validUntil).not.toBeNull();
		expect((await repo.signingSecrets("ptn_old", "test", 30)).map((s) => s.secret)).toEqual([rotated]);
	} finally {
		await seq.close();
		await db.drop();
	}
});

/** partners/006 on a database with partners from before versions: each is pinned to the first dated version, the contract it integrated against. */
it("migration 006 pins existing partners to the first API version, and down removes the pin", async () => {
	const db = await createTestDatabase("migversions");
	const seq = new Sequelize(db.url, { logging: false });
	try {
		await runMigrations(seq, { service: "partners", migrations: migrations.slice(0, 5) }, db.url);
		await seq.query("INSERT INTO partners (id, name) VALUES ('ptn_old','Old')");
		await runMigrations(seq, { service: "partners", migrations }, db.url);
		const [rows] = await seq.query("SELECT id, api_version FROM partners");
		expect(rows).toEqual([{ id: "ptn_old", api_version: FIRST_API_VERSION }]);
		await migrations[5].down!(seq.getQueryInterface(), seq);
		const [columns] = await seq.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'partners' AND column_name = 'api_version'");
		expect(columns).toEqual([]);
	} finally {
		await seq.close();
		await db.drop();
	}
});
