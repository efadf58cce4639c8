import type { CallOptions, RideClient } from "./client";
import type { Order, SandboxAdvanceRequest } from "./types";

/** Where `advance` can take a manual sandbox ride (`SandboxAdvanceRequest["to"]`). */
export type SandboxTarget = NonNullable<SandboxAdvanceRequest["to"]>;

/**
 * Sandbox controls (test keys only). A ride booked with
 * `metadata: { sandbox: "manual" }` waits until it is moved here; each step
 * sends exactly the webhooks a real ride sends.
 */
export class RideSandbox {
	constructor(private readonly client: Pick<RideClient, "request">) {}

	/**
	 * Moves a manual ride one step (`scheduled → searching → accepted →
	 * arrived → started → dropped`; from `scheduled` its dispatch starts now),
	 * or straight to `to`. Not repeated after a timeout: a repeated step
	 * would move the ride twice.
	 */
	advance(orderId: string, to?: SandboxTarget, options?: CallOptions): Promise<Order> {
		const body: SandboxAdvanceRequest = to === undefined ? { orderId } : { orderId, to };
		return this.client.request("/ride/sandbox/advance", body, { ...options, repeatable: false });
	}
}
