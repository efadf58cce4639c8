import { Errors } from "moleculer";

/**
 * Error codes of the partner contract (API.md, "Errors"). Services throw
 * `ApiError`s; the gateway turns every error into the contract's envelope.
 * Moleculer carries `code` (HTTP status), `type` (contract code) and `data`
 * across NATS, so the envelope is the same whichever node threw it.
 */
export type ErrorCode =
	| "INVALID_JSON"
	| "VALIDATION_ERROR"
	| "INVALID_WEBHOOK_URL"
	| "UNAUTHORIZED"
	| "ORDER_NOT_FOUND"
	| "NOT_FOUND"
	| "RIDE_NOT_ACTIVE"
	| "RIDE_NOT_COMPLETED"
	| "FEEDBACK_ALREADY_SUBMITTED"
	| "IDEMPOTENCY_KEY_IN_USE"
	| "PAYLOAD_TOO_LARGE"
	| "QUOTE_INVALID"
	| "QUOTE_EXPIRED"
	| "IDEMPOTENCY_KEY_REUSED"
	| "RATE_LIMITED"
	| "SERVICE_UNAVAILABLE"
	| "INTERNAL_ERROR"
	// Internal (never reach partners through the documented endpoints, but get a clean envelope if they do)
	| "CONFLICT"
	| "INVALID_TRANSITION"
	| "INVALID_OTP"
	| "DRIVER_NOT_AVAILABLE"
	| "DRIVER_NOT_FOUND"
	| "FORBIDDEN";

export interface ErrorDetail {
	field: string;
	message: string;
}

export interface ErrorData {
	details?: ErrorDetail[];
	retryAfter?: number;
	[key: string]: unknown;
}

export class ApiError extends Errors.MoleculerClientError {
	declare data: ErrorData | undefined;
	constructor(status: number, code: ErrorCode, message: string, data?: ErrorData) {
		super(message, status, code, data);
	}
}

export const orderNotFound = (): ApiError => new ApiError(404, "ORDER_NOT_FOUND", "Order not found");

export const validationError = (field: string, message: string): ApiError =>
	new ApiError(400, "VALIDATION_ERROR", message, { details: [{ field, message }] });

/** The JSON body every error response has (API.md, "Errors"). */
export interface ErrorEnvelope {
	code: ErrorCode | string;
	message: string;
	details?: ErrorDetail[];
	retryable: boolean;
}
