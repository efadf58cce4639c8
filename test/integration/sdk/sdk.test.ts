import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { RideApiError, RideClient, webhooks, WebhookVerificationError, type RideEventRecord, type WebhookEvent } from "../../../packages/sdk/src";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";

/**
 * @ride/sdk against the whole platform in this process (gateway over HTTP,
 * PostgreSQL, the simulated fleet): a sandbox ride from quote to feedback
 * whose webhooks a local receiver verifies with the SDK, the API's errors as
 * RideApiError, idempotent bookings, and the README's quickstart run as a
 * child process.
 */

const ROOT = resolve(__dirname, "../../..");
const BENGALURU = { lat: 12.9716, lng: 77.5946 };
const pickup = { ...BENGALURU, address: "MG Road" };
const drop = { lat: 12.9352, lng: 77.6245 };

interface Received {
	event?: WebhookEvent;
	refused?: string;
}

let bed: Testbed;
let receiver: Server;
let hooksUrl: string;
let apiKey: string;
let webhookSecret: string;
let ride: RideClient;
const received: Received[] = [];

beforeAll(async () => {
	bed = await startTestbed("sdk", {
		services: ["gateway", "partners", "riders", "pricing", "orders", "dispatch", "notifications", "fleet"],
		env: {
			FLEET_MODE: "simulated",
			SIM_SPEED: "60",
			SIM_CITIES: `${BENGALURU.lat},${BENGALURU.lng}`,
			FLEET_DRIVERS_PER_CITY: "1",
			FLEET_SEED_RADIUS_M: "1000",
			FLEET_TICK_MS: "100",
			FLEET_FAST_LEG_MS: "300",
			DISPATCH_TICK_MS: "50",
			RATE_LIMIT_PER_MINUTE: "0",
		},
	});
	({ apiKey, webhookSecret } = await bed.node.broker.call<{ apiKey: string; webhookSecret: string }, unknown>("partners.create", {
		name: "SDK test partner",
		mode: "test",
	}));
	ride = new RideClient({ apiKey, baseUrl: bed.node.baseUrl!, timeoutMs: 10_000 });

	// The partner's endpoint: the raw bytes and headers go to the SDK's verify, as the README shows.
	receiver = createServer((req, res) => {
		const chunks: Buffer[] = [];
		req.on("data", (c: Buffer) => chunks.push(c));
		req.on("end", () => {
			try {
				received.push({ event: webhooks.verify(Buffer.concat(chunks), req.headers, webhookSecret, { mode: "test" }) });
				res.writeHead(204).end();
			} catch (err) {
				received.push({ refused: err instanceof WebhookVerificationError ? err.reason : String(err) });
				res.writeHead(400).end();
			}
		});
	});
	await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
	hooksUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
}, 60_000);

afterAll(async () => {
	receiver?.closeAllConnections();
	await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
	await bed?.stop();
});

const eventsOf = (orderId: string) => received.flatMap((r) => (r.event?.orderId === orderId ? [r.event] : []));
const statusesOf = (orderId: string) => eventsOf(orderId).flatMap((e) => (e.status === "location_updated" ? [] : [e.status]));

it("a sandbox ride from quote to feedback, its webhooks verified by the SDK", async () => {
	const { quotes } = await ride.fareEstimate({ pickup, drop, serviceType: "cab" });
	expect(quotes).toHaveLength(1);
	const order = await ride.createOrder({
		user: { name: "Asha Rao", phone: randomPhone() },
		serviceType: "cab",
		pickup,
		drop,
		quoteId: quotes[0].quoteId,
		webhookURL: hooksUrl,
		metadata: { partnerRef: "sdk-1", sandbox: { scenario: "fast" } },
	});
	expect(order).toMatchObject({ status: "searching", fare: { totalAmount: quotes[0].totalAmount }, metadata: { partnerRef: "sdk-1" } });
	expect("code" in order).toBe(false);

	await waitFor("the dropped webhook", () => statusesOf(order.orderId).includes("dropped"), 30_000);
	expect(statusesOf(order.orderId)).toEqual(["accepted", "arrived", "started", "dropped"]);
	expect(received.filter((r) => r.refused)).toEqual([]);
	const hooks = eventsOf(order.orderId);
	expect(hooks.every((e) => e.mode === "test" && (e.metadata as { partnerRef?: string }).partnerRef === "sdk-1")).toBe(true);
	expect(hooks.find((e) => e.status === "accepted")?.driver?.id).toMatch(/^drv_/);

	const status = await ride.status({ orderId: order.orderId });
	expect(status).toMatchObject({ orderId: order.orderId, status: "dropped", driver: { id: expect.stringMatching(/^drv_/) } });

	// Every event in order across pages of two, each payload the webhook that arrived. The platform
	// records a delivery once our 204 reaches it, a moment after the receiver saw the webhook.
	const isStatus = (r: RideEventRecord) => r.status !== "location_updated";
	const records = await waitFor("every status event recorded as delivered", async () => {
		const all: RideEventRecord[] = [];
		for await (const record of ride.events({ orderId: order.orderId, limit: 2 })) all.push(record);
		return all.filter(isStatus).every((r) => r.delivery.state === "delivered") && all;
	});
	expect(records.map((r) => r.sequence)).toEqual([...records.map((r) => r.sequence)].sort((a, b) => a - b));
	const statusRecords = records.filter(isStatus);
	expect(statusRecords.map((r) => r.status)).toEqual(["accepted", "arrived", "started", "dropped"]);
	for (const r of statusRecords) expect(hooks.find((h) => h.eventId === r.eventId)).toEqual(r.payload);

	await expect(ride.feedback({ orderId: order.orderId, rating: 5, comment: "Smooth ride" })).resolves.toEqual({
		code: "FEEDBACK_SUBMITTED",
		orderId: order.orderId,
	});
	const again = await ride.feedback({ orderId: order.orderId, rating: 4 }).catch((e: unknown) => e);
	expect(again).toBeInstanceOf(RideApiError);
	expect(again).toMatchObject({ status: 409, code: "FEEDBACK_ALREADY_SUBMITTED", retryable: false, requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
	await expect(ride.cancel({ orderId: order.orderId })).rejects.toMatchObject({ status: 409, code: "RIDE_NOT_ACTIVE" });
});

it("the platform's errors arrive as RideApiError: validation details, an unknown key, an unknown order", async () => {
	const invalid = await ride.fareEstimate({ pickup: { lat: 91, lng: 77.59 }, drop }).catch((e: unknown) => e);
	expect(invalid).toMatchObject({ status: 400, code: "VALIDATION_ERROR", details: [expect.objectContaining({ field: "pickup.lat" })] });
	const stranger = new RideClient({ apiKey: "ride_test_unknown", baseUrl: bed.node.baseUrl! });
	await expect(stranger.status({ orderId: "ord_x" })).rejects.toMatchObject({ status: 401, code: "UNAUTHORIZED" });
	await expect(ride.status({ orderId: "ord_nope" })).rejects.toMatchObject({ status: 404, code: "ORDER_NOT_FOUND" });
});

it("createOrder with the same Idempotency-Key books once", async () => {
	const body = {
		user: { name: "Ravi", phone: randomPhone() },
		serviceType: "scooty" as const,
		pickup,
		drop,
		webhookURL: hooksUrl,
		metadata: { sandbox: { scenario: "no_driver_found" } },
	};
	const first = await ride.createOrder(body, { idempotencyKey: "sdk-booking-1" });
	const second = await ride.createOrder(body, { idempotencyKey: "sdk-booking-1" });
	expect(second.orderId).toBe(first.orderId);
	await expect(ride.createOrder({ ...body, serviceType: "cab" }, { idempotencyKey: "sdk-booking-1" })).rejects.toMatchObject({
		code: "IDEMPOTENCY_KEY_REUSED",
	});
});

it("the README's quickstart runs as it is", async () => {
	const { stdout } = await promisify(execFile)(
		process.execPath,
		["--conditions=ride-sdk-source", "--import", "tsx", "packages/sdk/examples/quickstart.mts"],
		{ cwd: ROOT, timeout: 60_000, env: { ...process.env, RIDE_API_KEY: apiKey, RIDE_BASE_URL: bed.node.baseUrl!, RIDE_WEBHOOK_URL: hooksUrl } },
	);
	const booked = /^booked (ord_\S+): searching, \d+(\.\d+)? INR$/m.exec(stdout);
	expect(booked).not.toBeNull();
	expect(stdout).toContain(`${booked![1]} is customer_cancelled`);
	expect((await ride.status({ orderId: booked![1] })).status).toBe("customer_cancelled");
});

it("a manual sandbox ride walked through every state by client.sandbox, its webhooks verified", async () => {
	const order = await ride.createOrder({
		user: { name: "Meera", phone: randomPhone() },
		serviceType: "scooty",
		pickup,
		drop,
		webhookURL: hooksUrl,
		metadata: { partnerRef: "sdk-manual", sandbox: "manual" },
	});
	expect(order.status).toBe("searching");
	// The fee a cancel would cost now (free while searching), typed as the preview; nothing changes.
	await expect(ride.previewCancel({ orderId: order.orderId })).resolves.toMatchObject({
		code: "CANCEL_PREVIEW",
		status: "searching",
		cancellationFee: { amount: 0, rule: "searching" },
	});

	const walked: string[] = [];
	for (let step = 0; step < 4; step++) walked.push((await ride.sandbox.advance(order.orderId)).status);
	expect(walked).toEqual(["accepted", "arrived", "started", "dropped"]);
	await waitFor("the dropped webhook", () => statusesOf(order.orderId).includes("dropped"), 30_000);
	expect(statusesOf(order.orderId)).toEqual(["accepted", "arrived", "started", "dropped"]);
	expect(received.filter((r) => r.refused)).toEqual([]);
	expect(eventsOf(order.orderId).find((e) => e.status === "dropped")?.finalFare?.totalAmount).toBeGreaterThan(0);

	// A finished ride cannot be advanced; a live key may not steer the sandbox at all.
	await expect(ride.sandbox.advance(order.orderId, "dropped")).rejects.toMatchObject({ status: 409, code: "RIDE_NOT_ACTIVE" });
	const live = await bed.node.broker.call<{ apiKey: string }, unknown>("partners.create", { name: "SDK live partner", mode: "live" });
	const liveClient = new RideClient({ apiKey: live.apiKey, baseUrl: bed.node.baseUrl!, maxRetries: 0 });
	await expect(liveClient.sandbox.advance(order.orderId)).rejects.toMatchObject({ status: 403, code: "SANDBOX_ONLY" });
});

it("client.sandbox.advance jumps a manual ride straight to a state", async () => {
	const order = await ride.createOrder({
		user: { name: "Kiran", phone: randomPhone() },
		serviceType: "cab",
		pickup,
		drop,
		webhookURL: hooksUrl,
		metadata: { sandbox: "manual" },
	});
	await expect(ride.sandbox.advance(order.orderId, "no_driver_found")).resolves.toMatchObject({ status: "no_driver_found" });
	await waitFor("the no_driver_found webhook", () => statusesOf(order.orderId).includes("no_driver_found"), 30_000);
	expect(statusesOf(order.orderId)).toEqual(["no_driver_found"]);
});
