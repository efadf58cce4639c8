import type { Context } from "moleculer";
import { bookRide } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { createPartner } from "../../helpers/webhooks";
import { ORDER_ID_HEADER } from "../../../middlewares/observability.middleware";

/**
 * create-order learns its order id mid-handler and binds it to the log
 * context (docs/ARCHITECTURE.md, "Process lifecycle and observability"): from
 * then on what the handler logs, calls and emits carries it — visible to
 * others as the `x-order-id` header on the `orders.created` event it emits.
 * The listener below is a probe of that header, not a stand-in for a service.
 */

let bed: Testbed;
let partnerId: string;
const heard: Array<{ orderId: string; header: unknown }> = [];

beforeAll(async () => {
	bed = await startTestbed("orders_log_context", { services: ["partners", "riders", "pricing", "orders"] });
	bed.node.broker.createService({
		name: "createdProbe",
		events: {
			"orders.created"(ctx: Context<{ orderId: string }>) {
				heard.push({ orderId: ctx.params.orderId, header: (ctx as Context & { headers?: Record<string, unknown> }).headers?.[ORDER_ID_HEADER] });
			},
		},
	});
	await bed.node.broker.waitForServices(["createdProbe"], 10_000);
	partnerId = (await createPartner(bed.node.broker, "Log context partner")).partnerId;
});

afterAll(async () => {
	await bed?.stop();
});

it("binds the new order's id in create-order: the orders.created it emits carries it as the x-order-id header", async () => {
	const order = await bookRide(bed.node.broker, partnerId, { lat: 12.9716, lng: 77.5946 }, { drop: { lat: 12.99, lng: 77.6 } });
	const event = await waitFor("orders.created", () => heard.find((h) => h.orderId === order.orderId), 10_000, 20);
	expect(event).toEqual({ orderId: order.orderId, header: order.orderId });
});
