import { PartnerApi } from "../../helpers/http";
import type { TestNode } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import type { CreatedKey, CreatedPartner } from "../../../contracts/partners";

/**
 * The rate limit is per (partner, mode): one partner's test traffic (a load
 * test, a leaked test key) using up its whole limit leaves its live requests
 * answered. Real gateway over HTTP, real partners, riders, pricing and orders
 * on PostgreSQL; the limit counted in the gateway's memory (the Redis store
 * takes the same key, services/gateway/rate-limiter.ts).
 */

const RATE = 5;

let bed: Testbed;
let node: TestNode;
let testApi: PartnerApi;
let liveApi: PartnerApi;

beforeAll(async () => {
	bed = await startTestbed("modelimits", {
		services: ["partners", "riders", "pricing", "orders", "gateway"],
		env: { RATE_LIMIT_PER_MINUTE: String(RATE), RATE_LIMIT_BURST: String(RATE) },
	});
	node = bed.node;
	const partner = await node.broker.call<CreatedPartner, { name: string }>("partners.create", { name: "Load tester" });
	const live = await node.broker.call<CreatedKey, { partnerId: string; label: string; mode: string }>("partners.createKey", {
		partnerId: partner.partnerId,
		label: "production",
		mode: "live",
	});
	testApi = new PartnerApi(node.baseUrl!, partner.apiKey);
	liveApi = new PartnerApi(node.baseUrl!, live.apiKey);
});

afterAll(async () => {
	await bed?.stop();
});

it("test traffic exhausting its limit leaves the same partner's live requests 200", async () => {
	const ride = await liveApi.post<{ orderId: string }>("/ride/create-order", {
		user: { name: "Asha Rao", phone: randomPhone("+9198") },
		serviceType: "cab",
		pickup: { lat: 12.9716, lng: 77.5946 },
		drop: { lat: 12.9352, lng: 77.6245 },
		webhookURL: "https://partner.example.com/hooks/rides",
	});
	expect(ride.status).toBe(201);

	// The test key spends its whole limit, and more.
	const statuses: number[] = [];
	for (let n = 0; n < RATE * 2; n++) statuses.push((await testApi.post("/ride/status", { orderId: "ord_doesnotexist000000000" })).status);
	expect(statuses.filter((s) => s === 429)).toHaveLength(RATE);
	expect(statuses.slice(RATE)).toEqual(Array.from({ length: RATE }, () => 429));

	// Live still has its own (it spent one on create-order above).
	for (let n = 0; n < RATE - 1; n++) {
		const answer = await liveApi.post<{ orderId: string; status: string }>("/ride/status", { orderId: ride.body.orderId });
		expect({ status: answer.status, orderId: answer.body.orderId }).toEqual({ status: 200, orderId: ride.body.orderId });
	}
	// And it is limited on its own count, not the test one.
	expect((await liveApi.post("/ride/status", { orderId: ride.body.orderId })).status).toBe(429);
});
