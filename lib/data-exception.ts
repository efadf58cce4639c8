/**
 * PostgreSQL data exceptions (SQLSTATE class 22: 22P05 untranslatable
 * character, 22021 character_not_in_repertoire, 22P02 invalid text
 * representation, 22003 numeric value out of range, 22007/22008 datetime…):
 * a value the database refused as data, i.e. bad input that got past
 * validation. Recognised whatever layer carries the code (pg's error, or
 * Sequelize's `parent`/`original`). Pure.
 */
const DATA_EXCEPTION = /^22[0-9A-Z]{3}$/;

/** What partners read instead of the database's own message (which may quote SQL or values). */
export const UNSTORABLE_VALUE_MESSAGE = "A value in the request cannot be stored (invalid characters, or a number or date out of range)";

function codeOf(value: unknown): unknown {
	return typeof value === "object" && value !== null ? (value as { code?: unknown }).code : undefined;
}

/** The SQLSTATE when `err` is a PostgreSQL data exception, else undefined. */
export function dataExceptionState(err: unknown): string | undefined {
	if (typeof err !== "object" || err === null) return undefined;
	const e = err as { parent?: unknown; original?: unknown };
	for (const c of [codeOf(err), codeOf(e.parent), codeOf(e.original)]) {
		if (typeof c === "string" && DATA_EXCEPTION.test(c)) return c;
	}
	return undefined;
}
