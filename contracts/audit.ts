/**
 * The operator audit trail's contract, shared by the services that keep one
 * (partners: `partners_audit`, dispatch: `dispatch_audit`): who did what,
 * when, to what. Never a secret value (no API key, token or signing secret;
 * their ids only). Type-only plus plain data.
 */

/**
 * `ctx.meta.operator`: who asks for an audited change. `npm run partner` /
 * `npm run driver` set it from `--operator`, `OPERATOR` or `USER`; in the
 * REPL pass `--#operator alice`. A call without it is recorded as
 * `unattributed` (with the calling node).
 */
export const OPERATOR_META = "operator";
export const UNATTRIBUTED_OPERATOR = "unattributed";
/** What an operator name may be: 1..100 printable characters, no control characters. */
export const OPERATOR_PATTERN = /^[^\p{Cc}\p{Cs}]{1,100}$/u;

/** `<service>.audit`: the newest entries first, a page at a time (`before` = the last page's `nextBefore`). */
export const auditPageParams = {
	limit: { type: "number", integer: true, min: 1, max: 1000, optional: true, convert: true },
	before: { type: "number", integer: true, min: 1, optional: true, convert: true },
} as const;
export interface AuditPageParams {
	limit?: number;
	before?: number;
}

/** One audited change. */
export interface AuditEntryView {
	id: number;
	at: string;
	/** Who: `ctx.meta.operator`, or `unattributed`. */
	operator: string;
	/** The node the call came from (a CLI's private broker, a REPL, a service). */
	via: string | null;
	/** The action: `partners.createKey`, `dispatch.revokeDriverTokens`, … */
	action: string;
	/** The partner or driver it is about. */
	subject: string | null;
	/** The key, token or secret it is about, by id; null when it is the subject itself. */
	target: string | null;
	/** What else matters (mode, label, grace, how many revoked): never a secret value. */
	detail: Record<string, unknown>;
}

export interface AuditPage {
	entries: AuditEntryView[];
	/** Pass as `before` for the next (older) page; null on the last page. */
	nextBefore: number | null;
}

/** The columns of an audit table (partners 005, dispatch 007 create them alike). */
export const AUDIT_TABLE_COLUMNS = `
	id bigserial PRIMARY KEY,
	at timestamptz NOT NULL DEFAULT now(),
	operator text NOT NULL,
	via text,
	action text NOT NULL,
	subject text,
	target text,
	detail jsonb NOT NULL DEFAULT '{}'`;
