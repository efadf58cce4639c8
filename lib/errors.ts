import { Errors } from "moleculer";
import { ERRORS, type ErrorCode, type ErrorDetail } from "../contracts/errors";

/**
 * The errors services throw. Codes, statuses and meanings are the table in
 * contracts/errors.ts; the gateway turns every error into the contract's
 * envelope. Moleculer carries `code` (HTTP status), `type` (contract code)
 * and `data` across NATS, so the envelope is the same whichever node threw it.
 */
export type { ErrorCode, ErrorDetail } from "../contracts/errors";

export interface ErrorData {
	details?: ErrorDetail[];
	retryAfter?: number;
	[key: string]: unknown;
}

/**
 * The one error class for a contract answer, thrown by services, middlewares
 * and the gateway alike: the HTTP status is the code's in the error table
 * (contracts/errors.ts), so the two cannot disagree; a code not in the table
 * does not compile.
 */
export class ApiError extends Errors.MoleculerClientError {
	declare type: ErrorCode;
	declare data: ErrorData | undefined;
	constructor(code: ErrorCode, message: string, data?: ErrorData) {
		super(message, ERRORS[code].status, code, data);
	}
}

export const orderNotFound = (): ApiError => new ApiError("ORDER_NOT_FOUND", "Order not found");

export const validationError = (field: string, message: string): ApiError => new ApiError("VALIDATION_ERROR", message, { details: [{ field, message }] });
