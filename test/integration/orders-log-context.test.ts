import { randomInt } from "node:crypto";
import type { Context } from "moleculer";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startTestNode, type TestNode } from "../helpers/node";
import { createPartner, waitFor } from "../helpers/webhooks";
import { ORDER_ID_HEADER } from "../../middlewares/observability.middleware";

/**
 * create-order learns its order id mid-handler and binds it to the log
 * context (docs/ARCHITECTURE.md, "Process lifecycle and observability"): from
 * then on what the handler logs, calls and emits carries it — visible to
 * others as the `x-order-id` header on the `orders.created` event it emits.
 * The listener below is a probe of that header, not a stand-in for a service.
 */

let db: TestDatabase;
let node: TestNode;
let partnerId: string;
const heard: Array<{ orderId: string; header: unknown }> = [];

beforeAll(async () => {
	db = await createTestDatabase("orders_log_context");
	node = await startTestNode({ databaseUrl: db.url, services: ["partners", "riders", "pricing", "orders"] });
	node.broker.createService({
		name: "createdProbe",
		events: {
			"orders.created"(ctx: Context<{ orderId: string }>) {
				heard.push({ orderId: ctx.params.orderId, header: (ctx as Context & { headers?: Record<string, unknown> }).headers?.[ORDER_ID_HEADER] });
			},
		},
	});
	await node.broker.waitForServices(["createdProbe"], 10_000);
	partnerId = (await createPartner(node.broker, "Log context partner")).partnerId;
});

afterAll(async () => {
	await node?.stop();
	await db?.drop();
});

it("binds the new order's id in create-order: the orders.created it emits carries it as the x-order-id header", async () => {
	const pickup = { lat: 12.9716, lng: 77.5946 };
	const order = await node.broker.call<{ orderId: string }, unknown>(
		"orders.create",
		{
			user: { name: "Kiran P", phone: `+9195${String(randomInt(0, 100_000_000)).padStart(8, "0")}` },
			serviceType: "cab",
			pickup,
			drop: { lat: 12.99, lng: 77.6 },
			webhookURL: "https://partner.example.com/hooks",
		},
		{ meta: { partnerId } },
	);
	const event = await waitFor("orders.created", () => heard.find((h) => h.orderId === order.orderId), 10_000, 20);
	expect(event).toEqual({ orderId: order.orderId, header: order.orderId });
});
