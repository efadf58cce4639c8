import { Errors } from "moleculer";
import { codesForStatus, ERRORS, isErrorCode, type ErrorDetail, type ErrorEnvelope, type ErrorSpec } from "../../contracts/errors";
import { RATE_LIMITED_RETRY_AFTER_SECONDS } from "../../contracts/constants";
import { dataExceptionState, UNSTORABLE_VALUE_MESSAGE } from "../../lib/data-exception";
import { isPeerUnavailable } from "../../lib/peer-unavailable";

/**
 * The gateway's one error mapping: whatever was thrown (by a service on
 * another node, by the broker, by the HTTP layer) becomes the contract's
 * envelope `{ code, message, details?, retryable }` with the right status.
 * Pure, so every rule is unit-tested without a server.
 */

export interface ErrorResponse {
	status: number;
	body: ErrorEnvelope;
	headers: Record<string, string>;
	/** How loudly the gateway logs it: client mistakes quietly, our failures loudly. */
	logLevel: "debug" | "warn" | "error";
}

export interface ErrorMappingOptions {
	/** `Retry-After` seconds for 503 answers that do not carry their own. */
	unavailableRetryAfterSeconds: number;
}

export const INTERNAL_ERROR_MESSAGE = "Internal server error";
export const UNAVAILABLE_MESSAGE = "A service needed for this request is unavailable; retry later";

/**
 * Carries a non-Moleculer error through moleculer-web's middleware chain,
 * which would otherwise rebuild it and lose its name (and with it the
 * difference between "database unreachable" and "bug").
 */
export class WrappedError extends Errors.MoleculerError {
	constructor(readonly original: unknown) {
		super("Wrapped error", 500, "WRAPPED");
	}
}

/** A database that cannot be reached (Sequelize's names for it). */
const DATABASE_UNAVAILABLE_NAMES = new Set([
	"SequelizeConnectionError",
	"SequelizeConnectionRefusedError",
	"SequelizeConnectionAcquireTimeoutError",
	"SequelizeConnectionTimedOutError",
	"SequelizeHostNotFoundError",
	"SequelizeHostNotReachableError",
	"SequelizeAccessDeniedError",
]);
/** A service answering that it cannot serve now (also code 503, checked below). */
const UNAVAILABLE_TYPES = new Set(["SERVICE_UNAVAILABLE"]);
/** Node socket errors: a database or peer that cannot be reached. */
const UNAVAILABLE_SYSCODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENOTFOUND", "EAI_AGAIN", "57P01", "57P03"]);

/** Statuses whose contract code does not depend on what the thrower called it (the error table's `forStatus: "only"`). */
const FIXED_CODES = codesForStatus("only");
/** Codes for client errors that arrive without a usable code (`forStatus: "fallback"`). */
const STATUS_CODES = codesForStatus("fallback");
/** Statuses the contract does not use, answered as the nearest one it does. */
const STATUS_ALIASES: Record<number, number> = { 405: 404, 422: 400 };

const CODE_PATTERN = /^[A-Z][A-Z0-9_]{1,63}$/;
const MAX_MESSAGE = 500;
const MAX_DETAILS = 50;

interface ErrorLike {
	name?: unknown;
	message?: unknown;
	code?: unknown;
	type?: unknown;
	data?: unknown;
	original?: unknown;
}

function asErrorLike(err: unknown): ErrorLike {
	return typeof err === "object" && err !== null ? (err as ErrorLike) : {};
}

/**
 * `params.pickup.lat`, `body.pickup.lat`, `pickup["lat"]` → `pickup.lat`:
 * the field as the partner wrote it in the body.
 */
export function normaliseField(field: string): string {
	let f = field.trim();
	f = f.replace(/\["([^"\]]*)"\]/g, ".$1").replace(/\['([^'\]]*)'\]/g, ".$1");
	for (;;) {
		const stripped = f.replace(/^(?:\$\$root$|\$\$root\.|ctx\.params\.|params\.|body\.)/, "");
		if (stripped === f) break;
		f = stripped;
	}
	return f.replace(/^\./, "");
}

function clip(text: string, max = MAX_MESSAGE): string {
	return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * fastest-validator's error list (ValidationError.data) → contract details.
 * The messages already name the field as the partner wrote it: every broker
 * validator uses the contract's VALIDATION_MESSAGES (moleculer.config.ts).
 */
export function validationDetails(data: unknown): ErrorDetail[] {
	if (!Array.isArray(data)) return [];
	return data.slice(0, MAX_DETAILS).map((item: unknown) => {
		const e = asErrorLike(item) as { field?: unknown; message?: unknown };
		return {
			field: normaliseField(typeof e.field === "string" ? e.field : ""),
			message: clip(typeof e.message === "string" ? e.message : "is invalid"),
		};
	});
}

/** `data.details` of an ApiError, sanitised to `{ field, message }` strings. */
function apiDetails(data: unknown): ErrorDetail[] | undefined {
	const details = (asErrorLike(data) as { details?: unknown }).details;
	if (!Array.isArray(details)) return undefined;
	return details.slice(0, MAX_DETAILS).map((d: unknown) => {
		const e = asErrorLike(d) as { field?: unknown; message?: unknown };
		return {
			field: normaliseField(typeof e.field === "string" ? e.field : ""),
			message: clip(typeof e.message === "string" ? e.message : "is invalid"),
		};
	});
}

function retryAfterOf(data: unknown): number | undefined {
	const v = (asErrorLike(data) as { retryAfter?: unknown }).retryAfter;
	return typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.ceil(v) : undefined;
}

/**
 * Answered as 503: a peer that is not there (lib/peer-unavailable, the one
 * predicate for that), a database that cannot be reached, or a service
 * saying it cannot serve now.
 */
export function isUnavailableError(err: unknown): boolean {
	if (isPeerUnavailable(err)) return true;
	const e = asErrorLike(err);
	if (typeof e.name === "string" && DATABASE_UNAVAILABLE_NAMES.has(e.name)) return true;
	if (typeof e.type === "string" && UNAVAILABLE_TYPES.has(e.type)) return true;
	if (typeof e.code === "string" && UNAVAILABLE_SYSCODES.has(e.code)) return true;
	if (e.code === 503) return true;
	// Sequelize wraps the driver's error in `parent`/`original`.
	const parent = (err as { parent?: unknown } | null)?.parent;
	if (parent && parent !== err && typeof parent === "object") {
		const code = (parent as { code?: unknown }).code;
		if (typeof code === "string" && UNAVAILABLE_SYSCODES.has(code)) return true;
	}
	return false;
}

function envelope(code: string, message: string, retryable: boolean, details?: ErrorDetail[]): ErrorEnvelope {
	const body: ErrorEnvelope = { code, message, retryable };
	if (details && details.length > 0) body.details = details;
	return body;
}

export function toErrorResponse(thrown: unknown, opts: ErrorMappingOptions): ErrorResponse {
	let err: unknown = thrown;
	if (err instanceof WrappedError) err = err.original;
	const e = asErrorLike(err);
	const name = typeof e.name === "string" ? e.name : "";
	const status = typeof e.code === "number" && Number.isInteger(e.code) ? e.code : undefined;
	const type = typeof e.type === "string" ? e.type : undefined;
	const message = typeof e.message === "string" && e.message.trim() !== "" ? e.message : undefined;

	// fastest-validator, through the broker's validator (local or recreated from NATS).
	if (name === "ValidationError" && Array.isArray(e.data)) {
		const details = validationDetails(e.data);
		const first = details[0]?.message ?? "The request is invalid";
		const msg = details.length > 1 ? `${first} (and ${details.length - 1} more)` : first;
		return { status: 400, body: envelope("VALIDATION_ERROR", msg, false, details), headers: {}, logLevel: "debug" };
	}

	// Backstop: a value PostgreSQL refused as data (SQLSTATE class 22) reached it, here in this process
	// (service nodes convert theirs: middlewares/data-errors.middleware.ts). The database's message stays out.
	if (dataExceptionState(err) !== undefined) {
		return {
			status: 400,
			body: envelope("VALIDATION_ERROR", UNSTORABLE_VALUE_MESSAGE, false, [{ field: "body", message: UNSTORABLE_VALUE_MESSAGE }]),
			headers: {},
			logLevel: "debug",
		};
	}

	if (isUnavailableError(err)) {
		const retryAfter = retryAfterOf(e.data) ?? opts.unavailableRetryAfterSeconds;
		return {
			status: 503,
			body: envelope("SERVICE_UNAVAILABLE", UNAVAILABLE_MESSAGE, true),
			headers: { "Retry-After": String(retryAfter) },
			logLevel: "warn",
		};
	}

	if (status !== undefined && status >= 400 && status < 500) {
		let code: string =
			FIXED_CODES[status] ?? (type && CODE_PATTERN.test(type) ? type : undefined) ?? STATUS_CODES[STATUS_ALIASES[status] ?? status] ?? "BAD_REQUEST";
		let httpStatus = status;
		// The contract answers every validation failure with 400, whoever raised it.
		if (code === "VALIDATION_ERROR") httpStatus = 400;
		if (code === "NOT_FOUND" && status === 405) httpStatus = 404;
		const headers: Record<string, string> = {};
		const retryAfter = retryAfterOf(e.data);
		if (status === 429) headers["Retry-After"] = String(retryAfter ?? RATE_LIMITED_RETRY_AFTER_SECONDS);
		else if (retryAfter !== undefined) headers["Retry-After"] = String(retryAfter);
		if (status === 401) headers["WWW-Authenticate"] = 'Bearer realm="ride-api"';
		// Retrying helps when the limit refills, the first call finishes, or the service said when to come back.
		const spec: ErrorSpec | undefined = isErrorCode(code) ? ERRORS[code] : undefined;
		const retryable = status === 429 || spec?.retryable === true || retryAfter !== undefined;
		if (!CODE_PATTERN.test(code)) code = "BAD_REQUEST";
		return {
			status: httpStatus,
			body: envelope(code, clip(message ?? "The request was refused"), retryable, apiDetails(e.data)),
			headers,
			logLevel: "debug",
		};
	}

	// Anything else is our failure: say nothing about it beyond the code.
	return { status: 500, body: envelope("INTERNAL_ERROR", INTERNAL_ERROR_MESSAGE, false), headers: {}, logLevel: "error" };
}

/**
 * What the server log gets for an error: name, code, type, message and (not
 * in production: `withStack` false there) the stack of our own code, never
 * request headers or bodies (API keys, personal data).
 */
export function describeForLog(thrown: unknown, withStack = false): Record<string, unknown> {
	const err = thrown instanceof WrappedError ? thrown.original : thrown;
	const e = asErrorLike(err);
	const out: Record<string, unknown> = {
		name: typeof e.name === "string" ? e.name : typeof err,
		message: typeof e.message === "string" ? clip(e.message, 2000) : String(err),
	};
	if (e.code !== undefined) out.code = e.code;
	if (typeof e.type === "string") out.type = e.type;
	const nodeID = (err as { nodeID?: unknown } | null)?.nodeID;
	if (typeof nodeID === "string") out.nodeID = nodeID;
	const stack = (err as { stack?: unknown } | null)?.stack;
	if (withStack && typeof stack === "string") out.stack = stack.split("\n").slice(0, 12).join("\n");
	return out;
}
