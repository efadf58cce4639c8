import type { Transaction } from "sequelize";
import type { Db } from "../mixins/db.mixin";
import { OPERATOR_META, OPERATOR_PATTERN, UNATTRIBUTED_OPERATOR, type AuditEntryView, type AuditPage } from "../contracts/audit";
import { validationError } from "./errors";

/**
 * The operator audit trail (contracts/audit.ts): each service that owns keys,
 * secrets, drivers or tokens records every operator change in its own table,
 * in the same transaction as the change, so a change is never without its
 * entry nor the reverse. What is shared lives here: who asks (from the
 * call's meta) and the two statements, over a table name fixed in code.
 */

/** Records a change in the audit trail, inside the change's transaction: repos call it after the change, before commit. */
export type AuditHook<R> = (t: Transaction, result: R) => Promise<void>;
export const noAudit = async (): Promise<void> => undefined;

export type AuditTable = "partners_audit" | "dispatch_audit";

/** Who asks and from where: `ctx.meta.operator` (validated) and the calling node. */
export interface Actor {
	operator: string;
	via: string | null;
}

/** The actor of a call; a malformed `meta.operator` is a 400, before anything changes. */
export function actorOf(ctx: { meta?: unknown; nodeID?: string | null }): Actor {
	const raw = (ctx.meta as Record<string, unknown> | undefined)?.[OPERATOR_META];
	const via = typeof ctx.nodeID === "string" ? ctx.nodeID.slice(0, 200) : null;
	if (raw === undefined || raw === null) return { operator: UNATTRIBUTED_OPERATOR, via };
	if (typeof raw !== "string" || !OPERATOR_PATTERN.test(raw.trim())) {
		throw validationError("meta.operator", "operator must be 1..100 printable characters");
	}
	return { operator: raw.trim(), via };
}

/** One change to record. `detail` must never hold a secret value (ids, modes, labels, counts only). */
export interface AuditRecord {
	actor: Actor;
	action: string;
	subject: string | null;
	target?: string | null;
	detail?: Record<string, unknown>;
}

interface AuditRow {
	id: string;
	at: Date;
	operator: string;
	via: string | null;
	action: string;
	subject: string | null;
	target: string | null;
	detail: Record<string, unknown>;
}

export class AuditLog {
	private readonly insertSql: string;
	private readonly pageSql: string;

	constructor(
		private readonly db: Db,
		table: AuditTable,
	) {
		this.insertSql = `INSERT INTO ${table} (operator, via, action, subject, target, detail) VALUES ($1, $2, $3, $4, $5, $6::jsonb)`;
		// Newest first, by id (the primary key): a page reads `limit` rows; $1 subject or null, $2 before or null, $3 limit.
		this.pageSql = `
SELECT id, at, operator, via, action, subject, target, detail FROM ${table}
WHERE ($1::text IS NULL OR subject = $1) AND ($2::bigint IS NULL OR id < $2)
ORDER BY id DESC LIMIT $3`;
	}

	/** Records a change, inside the change's transaction `t`. */
	async record(r: AuditRecord, t: Transaction): Promise<void> {
		await this.db.run(this.insertSql, [r.actor.operator, r.actor.via, r.action, r.subject, r.target ?? null, JSON.stringify(r.detail ?? {})], t);
	}

	async page(subject: string | undefined, limit = 100, before?: number): Promise<AuditPage> {
		const rows = await this.db.rows<AuditRow>(this.pageSql, [subject ?? null, before ?? null, limit]);
		const entries: AuditEntryView[] = rows.map((r) => ({
			id: Number(r.id),
			at: new Date(r.at).toISOString(),
			operator: r.operator,
			via: r.via,
			action: r.action,
			subject: r.subject,
			target: r.target,
			detail: r.detail,
		}));
		const last = entries[entries.length - 1];
		return { entries, nextBefore: entries.length === limit && last ? last.id : null };
	}
}
