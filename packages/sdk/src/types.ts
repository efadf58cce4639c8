/**
 * Names for the generated types (generated/openapi.ts, from docs/openapi.json):
 * what partners write in their code. Nothing here is written by hand but the
 * mapping from a route to its request and answer bodies.
 */
import type { components, paths } from "./generated/openapi";

export type { components, operations, paths, webhooks } from "./generated/openapi";

type Schemas = components["schemas"];

export type Point = Schemas["Point"];
export type Place = Schemas["Place"];
export type ServiceType = Schemas["ServiceType"];
export type User = Schemas["User"];
export type Metadata = Schemas["Metadata"];
export type Driver = Schemas["Driver"];
export type DriverLocation = Schemas["DriverLocation"];
export type Fare = Schemas["Fare"];
export type FareBreakdown = Schemas["FareBreakdown"];
export type RideStatus = Schemas["RideStatus"];

export type FareEstimateRequest = Schemas["FareEstimateRequest"];
export type FareEstimate = Schemas["FareEstimate"];
export type Quote = Schemas["Quote"];
export type CreateOrderRequest = Schemas["CreateOrderRequest"];
export type Order = Schemas["Order"];
/** create-order's `200`: the rider's existing active ride, with `code: "USER_HAVE_ACTIVE_RIDE"`. */
export type ActiveRideOrder = Schemas["ActiveRideOrder"];
export type CancelRequest = Schemas["CancelRequest"];
export type CancelResult = Schemas["CancelResult"];
/** cancel's answer to `preview: true`: the fee a cancel would be charged now; nothing changed. */
export type CancelPreview = Schemas["CancelPreview"];
export type CancellationFee = Schemas["CancellationFee"];
export type SandboxAdvanceRequest = Schemas["SandboxAdvanceRequest"];
export type FeedbackRequest = Schemas["FeedbackRequest"];
export type FeedbackResult = Schemas["FeedbackResult"];
export type StatusRequest = Schemas["StatusRequest"];
export type EventsRequest = Schemas["EventsRequest"];
export type RideEvents = Schemas["RideEvents"];
export type RideEventRecord = Schemas["RideEventRecord"];
export type DeliveryState = Schemas["DeliveryState"];

/** The body of every webhook (also `payload` of each `/ride/events` record). */
export type WebhookEvent = Schemas["WebhookEvent"];
export type WebhookStatus = Schemas["WebhookStatus"];

/** The error envelope of every 4xx/5xx answer. */
export type ErrorEnvelope = Schemas["Error"];
export type ErrorDetail = Schemas["ErrorDetail"];
/** The documented error codes (the API's error table). */
export type ErrorCode = ErrorEnvelope["code"];

/** Every partner route: `POST /ride/…`. */
export type RidePath = Extract<{ [P in keyof paths]: paths[P] extends { post: object } ? P : never }[keyof paths], `/ride/${string}`>;

type Post<P extends RidePath> = paths[P]["post"];
type JsonOf<T> = T extends { content: { "application/json": infer B } } ? B : never;

/** The JSON request body of a route. */
export type RequestBodyOf<P extends RidePath> = JsonOf<Post<P>["requestBody"]>;

/** The JSON body of a route's 2xx answers (a union when it has several, e.g. create-order's 200 and 201). */
export type ResponseOf<P extends RidePath> = {
	[S in keyof Post<P>["responses"]]: S extends 200 | 201 | 202 ? JsonOf<Post<P>["responses"][S]> : never;
}[keyof Post<P>["responses"]];
