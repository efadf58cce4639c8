import { Errors } from "moleculer";
import { ERRORS, type ErrorCode, type ErrorDetail } from "../contracts/errors";

/**
 * The errors services throw. Codes, statuses and meanings are the table in
 * contracts/errors.ts; the gateway turns every error into the contract's
 * envelope. Moleculer carries `code` (HTTP status), `type` (contract code)
 * and `data` across NATS, so the envelope is the same whichever node threw it.
 */
export type { ErrorCode, ErrorDetail, ErrorEnvelope } from "../contracts/errors";

export interface ErrorData {
	details?: ErrorDetail[];
	retryAfter?: number;
	[key: string]: unknown;
}

export class ApiError extends Errors.MoleculerClientError {
	declare data: ErrorData | undefined;
	/** `status` defaults to the code's status in the error table. */
	constructor(status: number | undefined, code: ErrorCode, message: string, data?: ErrorData) {
		super(message, status ?? ERRORS[code].status, code, data);
	}
}

export const orderNotFound = (): ApiError => new ApiError(404, "ORDER_NOT_FOUND", "Order not found");

export const validationError = (field: string, message: string): ApiError =>
	new ApiError(400, "VALIDATION_ERROR", message, { details: [{ field, message }] });
