import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { randomInt } from "node:crypto";
import type { ServiceBroker } from "moleculer";
import { Webhook } from "standardwebhooks";
import type { DeliveryStatesResult } from "../../contracts/notifications";
import { randomPhone } from "./rides";
import { startTestbed, type Testbed } from "./testbed";

/**
 * Test fixtures for webhook delivery: a real partner endpoint (node http
 * server on 127.0.0.1:0) that verifies every signature with the
 * `standardwebhooks` package and records what arrived, plus helpers that
 * make real rides move through the orders service.
 */

export interface ReceivedWebhook {
	eventId: string;
	orderId: string;
	status: string;
	sequence: number;
	timestamp: number;
	signatureValid: boolean;
	body: Record<string, unknown>;
	/** The exact bytes received and the signature headers, to verify with another secret. */
	raw: string;
	headers: { "webhook-id": string; "webhook-timestamp": string; "webhook-signature": string };
	/** The `Ride-Mode` header ("" when absent). */
	rideMode: string;
	path: string;
	receivedAt: number;
	/** What the endpoint answered (0 = not (yet) answered: in progress, hung, or the caller went away). */
	answered: number;
	answeredAt: number;
	/** The caller closed the connection before the answer (killed mid-delivery, or its timeout). */
	abandoned: boolean;
}

export interface Reply {
	status?: number;
	headers?: Record<string, string>;
	body?: string;
	/** Wait this long before answering. */
	delayMs?: number;
	/** Never answer (the client must time out). */
	hang?: boolean;
	/** Cut the connection without an answer (the client sees a connection failure at once). */
	drop?: boolean;
}

export type Behaviour = (hook: ReceivedWebhook, attemptOfThisEvent: number) => Reply | undefined;

export interface PartnerEndpoint {
	url: string;
	port: number;
	received: ReceivedWebhook[];
	/** Requests for the same eventId that overlapped in time (must stay empty). */
	concurrentDuplicates: string[];
	/** Sets how the endpoint answers (default 200). */
	behave(fn: Behaviour): void;
	/** Accepted (2xx) deliveries, first one per event, in arrival order. */
	delivered(): ReceivedWebhook[];
	close(): Promise<void>;
}

export async function startPartnerEndpoint(secret: string): Promise<PartnerEndpoint> {
	const verifier = new Webhook(secret);
	const received: ReceivedWebhook[] = [];
	const concurrentDuplicates: string[] = [];
	const inFlight = new Map<string, number>();
	const attempts = new Map<string, number>();
	let behaviour: Behaviour = () => undefined;
	const hung = new Set<ServerResponse>();

	const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
		const chunks: Buffer[] = [];
		req.on("data", (c: Buffer) => chunks.push(c));
		req.on("end", () => {
			const raw = Buffer.concat(chunks).toString("utf8");
			const headers = {
				"webhook-id": String(req.headers["webhook-id"] ?? ""),
				"webhook-timestamp": String(req.headers["webhook-timestamp"] ?? ""),
				"webhook-signature": String(req.headers["webhook-signature"] ?? ""),
			};
			let signatureValid = false;
			try {
				verifier.verify(raw, headers);
				signatureValid = true;
			} catch {
				signatureValid = false;
			}
			let body: Record<string, unknown> = {};
			try {
				body = JSON.parse(raw) as Record<string, unknown>;
			} catch {
				body = {};
			}
			const hook: ReceivedWebhook = {
				eventId: headers["webhook-id"],
				orderId: String(body.orderId ?? ""),
				status: String(body.status ?? ""),
				sequence: Number(body.sequence),
				timestamp: Number(headers["webhook-timestamp"]),
				signatureValid: signatureValid && body.eventId === headers["webhook-id"],
				body,
				raw,
				headers,
				rideMode: String(req.headers["ride-mode"] ?? ""),
				path: req.url ?? "/",
				receivedAt: Date.now(),
				answered: 0,
				answeredAt: 0,
				abandoned: false,
			};
			received.push(hook);
			const n = (attempts.get(hook.eventId) ?? 0) + 1;
			attempts.set(hook.eventId, n);
			const active = (inFlight.get(hook.eventId) ?? 0) + 1;
			inFlight.set(hook.eventId, active);
			if (active > 1) concurrentDuplicates.push(hook.eventId);
			let gone = false;
			res.on("close", () => {
				inFlight.set(hook.eventId, (inFlight.get(hook.eventId) ?? 1) - 1);
				// Closed before our answer went out: the caller went away (killed, timed out).
				if (!res.writableFinished) {
					gone = true;
					hook.abandoned = true;
				}
			});

			const reply = behaviour(hook, n) ?? {};
			if (reply.hang) {
				hung.add(res);
				return;
			}
			if (reply.drop) {
				req.socket.destroy();
				return;
			}
			const answer = () => {
				// The caller went away meanwhile (killed mid-delivery): nobody ever got an answer.
				if (gone || req.socket.destroyed) return;
				hook.answered = reply.status ?? 200;
				hook.answeredAt = Date.now();
				res.writeHead(hook.answered, { "content-type": "text/plain", ...(reply.headers ?? {}) });
				res.end(reply.body ?? "ok");
			};
			if (reply.delayMs) setTimeout(answer, reply.delayMs);
			else answer();
		});
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	const port = (server.address() as AddressInfo).port;

	return {
		url: `http://127.0.0.1:${port}/hooks`,
		port,
		received,
		concurrentDuplicates,
		behave(fn) {
			behaviour = fn;
		},
		delivered() {
			const seen = new Set<string>();
			return received.filter((h) => h.answered >= 200 && h.answered < 300 && !seen.has(h.eventId) && seen.add(h.eventId));
		},
		async close() {
			for (const res of hung) res.destroy();
			server.closeAllConnections();
			await new Promise<void>((resolve) => server.close(() => resolve()));
		},
	};
}

/** Kept here for the suites that import it with the endpoint; the one definition is in wait.ts. */
export { waitFor } from "./wait";

export interface TestPartner {
	partnerId: string;
	apiKey: string;
	/** The test secret (the first key is a test key). */
	webhookSecret: string;
	/** Each mode's own secret. */
	webhookSecrets: { test: string; live: string };
}

export function createPartner(broker: ServiceBroker, name = "Webhook test partner"): Promise<TestPartner> {
	return broker.call<TestPartner, { name: string }>("partners.create", { name });
}

export interface TestRide {
	orderId: string;
	otp: string;
	status: string;
}

/** A real ride through orders.create (as the gateway would call it for the partner's key of `mode`, test unless told). */
export async function createRide(broker: ServiceBroker, partner: TestPartner, webhookURL: string, mode: "test" | "live" = "test"): Promise<TestRide> {
	return broker.call<TestRide, unknown>(
		"orders.create",
		{
			user: { name: "Test Rider", phone: randomPhone() },
			serviceType: "cab",
			pickup: { lat: 12.9716, lng: 77.5946 },
			drop: { lat: 12.9352, lng: 77.6245 },
			webhookURL,
			metadata: { partnerRef: `ref-${randomInt(0, 1e9)}` },
		},
		{ meta: { partnerId: partner.partnerId, mode } },
	);
}

/** A testbed running the services a ride's webhooks go through (partners, riders, pricing, orders, notifications), with a partner and that partner's endpoint. */
export interface WebhookTestbed extends Testbed {
	partner: TestPartner;
	endpoint: PartnerEndpoint;
	/** The ride's requests at the endpoint, every try. */
	hooksOf(ride: TestRide): ReceivedWebhook[];
	/** The ride's accepted deliveries, first one per event, in arrival order. */
	deliveredOf(ride: TestRide): ReceivedWebhook[];
	/** The ride's event rows, in sequence order. */
	eventsOf(orderId: string): Promise<Array<{ id: string; sequence: number; status: string; kind: string }>>;
	/** notifications' delivery state of each event. */
	states(eventIds: string[]): Promise<DeliveryStatesResult>;
}

/** Starts the webhook testbed with `env` (the delivery settings under test); `stop` also closes the endpoint. */
export async function startWebhookTestbed(label: string, env: Record<string, string>): Promise<WebhookTestbed> {
	const bed = await startTestbed(label, {
		services: ["partners", "riders", "pricing", "orders", "notifications"],
		env: { WEBHOOK_ALLOW_PRIVATE: "true", ...env },
	});
	try {
		const partner = await createPartner(bed.node.broker);
		const endpoint = await startPartnerEndpoint(partner.webhookSecret);
		const stopBed = bed.stop;
		return Object.assign(bed, {
			partner,
			endpoint,
			hooksOf: (ride: TestRide) => endpoint.received.filter((h) => h.orderId === ride.orderId),
			deliveredOf: (ride: TestRide) => endpoint.delivered().filter((h) => h.orderId === ride.orderId),
			eventsOf: async (orderId: string) =>
				(await bed.pg.query("SELECT id, sequence, status, kind FROM ride_events WHERE order_id = $1 ORDER BY sequence", [orderId])).rows,
			states: (eventIds: string[]) => bed.node.broker.call<DeliveryStatesResult, { eventIds: string[] }>("notifications.deliveryStates", { eventIds }),
			async stop() {
				await endpoint.close();
				await stopBed();
			},
		});
	} catch (err) {
		await bed.stop();
		throw err;
	}
}

let driverCounter = 0;

/** One status move through orders.transition, with what each status needs. */
export async function move(
	broker: ServiceBroker,
	ride: TestRide,
	to: "accepted" | "arrived" | "started" | "dropped" | "searching" | "no_driver_found",
): Promise<void> {
	const params: Record<string, unknown> = { orderId: ride.orderId, to };
	if (to === "accepted") {
		driverCounter += 1;
		params.driver = {
			id: `drv_test${driverCounter}`,
			name: "Ravi Kumar",
			phone: "+919800000001",
			vehicleNumber: "KA01AB1234",
			location: { lat: 12.975, lng: 77.59, heading: 45 },
		};
		params.eta = 240;
	}
	if (to === "arrived") Object.assign(params, { location: { lat: 12.9716, lng: 77.5946, heading: 0 }, eta: 0 });
	if (to === "started") Object.assign(params, { otp: ride.otp, eta: 900 });
	if (to === "dropped") params.location = { lat: 12.9352, lng: 77.6245, heading: 90 };
	await broker.call("orders.transition", params);
}

/** Moves a ride along the happy path: accepted, arrived, started, dropped (four status events). */
export async function completeRide(broker: ServiceBroker, ride: TestRide): Promise<void> {
	for (const to of ["accepted", "arrived", "started", "dropped"] as const) await move(broker, ride, to);
}

export function recordLocation(broker: ServiceBroker, ride: TestRide, lat: number): Promise<unknown> {
	return broker.call("orders.recordLocation", { orderId: ride.orderId, location: { lat, lng: 77.59, heading: 10 }, eta: 100 });
}

/**
 * Per order, a status event never arrives before every earlier status event
 * of that order was accepted (2xx) by the endpoint. Duplicates (at least
 * once) are fine. Returns the violations.
 */
export function orderViolations(received: ReceivedWebhook[]): string[] {
	const acceptedAt = new Map<string, number>(); // `${orderId}#${seq}` → first 2xx answer time
	const statusSeqs = new Map<string, Set<number>>();
	for (const h of received) {
		if (h.status === "location_updated") continue;
		const seqs = statusSeqs.get(h.orderId) ?? new Set<number>();
		seqs.add(h.sequence);
		statusSeqs.set(h.orderId, seqs);
		if (h.answered >= 200 && h.answered < 300) {
			const key = `${h.orderId}#${h.sequence}`;
			acceptedAt.set(key, Math.min(acceptedAt.get(key) ?? Infinity, h.answeredAt));
		}
	}
	const violations: string[] = [];
	for (const h of received) {
		if (h.status === "location_updated") continue;
		for (const s of statusSeqs.get(h.orderId) ?? []) {
			if (s >= h.sequence) continue;
			const at = acceptedAt.get(`${h.orderId}#${s}`);
			if (at === undefined || at > h.receivedAt) violations.push(`${h.orderId}: #${h.sequence} arrived before #${s} was accepted`);
		}
	}
	return violations;
}
