import type { ServiceBroker } from "moleculer";
import { PartnerApi } from "../../helpers/http";
import { offerFor, onlineDriver, randomPhone } from "../../helpers/rides";
import { TELEPORTING_DRIVERS } from "../../helpers/node";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { createPartner, type TestPartner } from "../../helpers/webhooks";
import { waitFor } from "../../helpers/wait";

/**
 * TRACING=true with the Event exporter, through the real gateway, partners,
 * orders and dispatch: the spans that leave the process carry no API key,
 * OTP, phone number, rider name, webhook URL or secret, while the ids one
 * searches traces by (orderId, requestId, partnerId) are still there.
 */

interface Captured {
	name: string;
	text: string;
}

let bed: Testbed;
let partner: TestPartner;
const spans: Captured[] = [];

function flush(broker: ServiceBroker): void {
	const tracer = (broker as unknown as { tracer: { exporter?: { flush(): void }[] } }).tracer;
	for (const e of tracer.exporter ?? []) e.flush();
}

beforeAll(async () => {
	bed = await startTestbed("tracing", {
		services: ["gateway", "partners", "pricing", "riders", "orders", "dispatch"],
		env: { ...TELEPORTING_DRIVERS, TRACING: "true", TRACING_EXPORTER: "Event", DISPATCH_OFFER_TIMEOUT_MS: "5000" },
	});
	bed.node.broker.createService({
		name: "span-collector",
		events: {
			"$tracing.spans"(ctx: { params: { name: string; tags: unknown; error?: unknown }[] }) {
				for (const s of ctx.params) spans.push({ name: s.name, text: JSON.stringify({ tags: s.tags, error: s.error ?? null }) });
			},
		},
	});
	await bed.node.broker.waitForServices(["span-collector"]);
	partner = await createPartner(bed.node.broker, "Tracing partner");
}, 60_000);

afterAll(async () => {
	await bed?.stop();
});

test("spans carry ids but no API key, OTP, phone, name, webhook URL or secret", async () => {
	const api = new PartnerApi(bed.node.baseUrl!, partner.apiKey);
	const phone = randomPhone();
	const webhookURL = "http://127.0.0.1:9/hooks/rides?token=hook-token-5f3a9c";
	const pickup = { lat: 13.35, lng: 77.1 };
	const driver = await onlineDriver(bed.node.broker, pickup, 300);

	const created = await api.post<{ orderId: string; otp: string }>("/ride/create-order", {
		user: { name: "Zubeida Quarashi", phone },
		serviceType: "cab",
		pickup: { ...pickup, address: "Secret Lane 42" },
		drop: { lat: 13.33, lng: 77.12 },
		webhookURL,
	});
	expect(created.status).toBe(201);
	const { orderId, otp } = created.body;
	await offerFor(bed.node.broker, driver.driverId, orderId);
	await bed.node.broker.call("dispatch.acceptOffer", { driverId: driver.driverId, orderId });
	await bed.node.broker.call("dispatch.arrive", { driverId: driver.driverId, orderId, location: { ...pickup, heading: 0 } });
	const wrongOtp = otp === "0000" ? "1111" : "0000";
	await expect(bed.node.broker.call("dispatch.startRide", { driverId: driver.driverId, orderId, otp: wrongOtp })).rejects.toMatchObject({ code: 422 });
	await bed.node.broker.call("dispatch.startRide", { driverId: driver.driverId, orderId, otp });
	// A refused value (validation error data) does not travel in the span's error either.
	await expect(bed.node.broker.call("orders.get", { orderId: "x".repeat(5000) + phone })).rejects.toBeDefined();
	expect((await api.post("/ride/status", { orderId })).status).toBe(200);

	const byName = (n: string) => spans.filter((s) => s.name.includes(n));
	await waitFor("spans of partners.authenticate, orders.create and dispatch.startRide", () => {
		flush(bed.node.broker);
		return byName("partners.authenticate").length > 0 && byName("orders.create").length > 0 && byName("dispatch.startRide").length >= 2;
	});

	const all = spans.map((s) => s.text).join("\n");
	for (const secret of [partner.apiKey, partner.webhookSecret, phone, phone.slice(1), "Zubeida", "Secret Lane", "hook-token-5f3a9c", driver.phone]) {
		expect([secret, all.includes(secret)]).toEqual([secret, false]);
	}
	// The OTP is four digits: check the startRide spans' own params, where it was sent.
	for (const s of byName("dispatch.startRide")) {
		const tags = JSON.parse(s.text).tags as { params: Record<string, unknown> };
		expect(tags.params.otp).toBe("[REDACTED]");
		expect(tags.params.orderId).toBe(orderId);
	}
	// The ids are still there to search by.
	const create = JSON.parse(byName("orders.create")[0].text).tags as { params: Record<string, unknown>; meta: Record<string, unknown>; requestID: string };
	expect(create.meta.partnerId).toBe(partner.partnerId);
	expect(typeof create.meta.requestId).toBe("string");
	expect(create.params.serviceType).toBe("cab");
	expect(all).toContain(orderId);
});
