import type { Migration } from "../../../mixins/db.mixin";
import { AUDIT_TABLE_COLUMNS } from "../../../contracts/audit";

/**
 * The operator audit trail (lib/audit.ts): drivers registered by an
 * operator, driver tokens created and revoked, each written in the change's
 * transaction. Listed newest first, overall or per driver.
 */
export const auditMigration: Migration = {
	name: "007-audit",
	async up(_qi, sequelize) {
		await sequelize.query(`CREATE TABLE IF NOT EXISTS dispatch_audit (${AUDIT_TABLE_COLUMNS})`);
		await sequelize.query("CREATE INDEX IF NOT EXISTS dispatch_audit_subject ON dispatch_audit (subject, id)");
	},
	async down(_qi, sequelize) {
		await sequelize.query("DROP TABLE IF EXISTS dispatch_audit");
	},
};
