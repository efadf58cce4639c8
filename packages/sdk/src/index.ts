/**
 * @ride/sdk: the official client of the Partner Ride API. Its types are
 * generated from the API's OpenAPI document; see README.md.
 */
export { RideClient, SDK_VERSION } from "./client";
export type { CallOptions, CreateOrderOptions, RequestOptions, RideClientOptions } from "./client";
export { RideSandbox } from "./sandbox";
export type { SandboxTarget } from "./sandbox";
export { RideApiError, RideConnectionError, RideError, parseRetryAfter } from "./errors";
export type { RideErrorCode } from "./errors";
export { webhooks, verify as verifyWebhook, WebhookVerificationError } from "./webhooks";
export type { VerifyOptions, WebhookHeaders, WebhookVerificationReason } from "./webhooks";
export type * from "./types";
