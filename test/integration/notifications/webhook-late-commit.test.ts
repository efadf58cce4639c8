import type { Client } from "pg";
import { connect } from "../../helpers/db";
import { freePort, httpRequest } from "../../helpers/http";
import { uniqueNamespace, type TestNode } from "../../helpers/node";
import { Cluster, type ServiceProcess } from "../../helpers/processes";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { sleep, waitFor } from "../../helpers/wait";
import { createPartner, createRide, move, startPartnerEndpoint, type PartnerEndpoint } from "../../helpers/webhooks";

/**
 * The safety-net ingest, through a real notifications process: a ride
 * transaction (the same update + outbox insert orders makes) is held open
 * for longer than WEBHOOK_INGEST_WINDOW_MS while other rides' events are
 * ingested past it, then commits. The regular ingest never looks that far
 * back again; before the safety net the event was never delivered and the
 * ride's later status events waited behind it forever. Now it is ingested,
 * delivered, and the later one follows in order; the process logs it and
 * counts it (webhook.ingest.late.total on its Prometheus endpoint).
 */

const WINDOW_MS = 1_000;

let bed: Testbed;
let node: TestNode;
let endpoint: PartnerEndpoint;
let notifications: Cluster;
let proc: ServiceProcess;
let metricsPort: number;
let held: Client | undefined;
const namespace = uniqueNamespace("late");

beforeAll(async () => {
	bed = await startTestbed("whlate", { services: ["partners", "riders", "pricing", "orders"], nats: { namespace }, env: { NODE_ID: `${namespace}-main` } });
	node = bed.node;
	metricsPort = await freePort();
	notifications = new Cluster(
		"late",
		bed.db.url,
		{ WEBHOOK_INGEST_WINDOW_MS: String(WINDOW_MS), WEBHOOK_SAFETY_NET_MS: "250", WEBHOOK_POLL_MS: "100", METRICS_PORT: String(metricsPort) },
		namespace,
	);
	proc = await notifications.start({ label: "notifications", services: "notifications" });
});

afterAll(async () => {
	await held?.end().catch(() => undefined);
	await notifications?.stopAll();
	await endpoint?.close();
	await bed?.stop();
});

async function lateCount(): Promise<number> {
	const page = (await httpRequest(`http://127.0.0.1:${metricsPort}/metrics`)).text;
	const line = page.split("\n").find((l) => l.startsWith("webhook_ingest_late_total"));
	return line ? Number(line.trim().split(/\s+/).pop()) : 0;
}

it("delivers, in order, an event whose transaction committed later than the ingest window, and the ride's later events after it", async () => {
	const partner = await createPartner(node.broker);
	endpoint = await startPartnerEndpoint(partner.webhookSecret);
	const ride = await createRide(node.broker, partner, endpoint.url);
	const other = await createRide(node.broker, partner, endpoint.url);
	await move(node.broker, ride, "accepted");
	await waitFor("accepted delivered", () => endpoint.delivered().some((h) => h.orderId === ride.orderId), 15_000, 20);
	const accepted = endpoint.delivered().find((h) => h.orderId === ride.orderId)!;
	expect(await lateCount()).toBe(0);

	// The ride moves to arrived in a transaction that stays open (what orders does: bump the version, append the outbox row).
	held = await connect(bed.db.url);
	await held.query("BEGIN");
	const { rows } = await held.query(
		"UPDATE orders SET status = 'arrived', version = version + 1, updated_at = clock_timestamp() WHERE id = $1 RETURNING version, updated_at",
		[ride.orderId],
	);
	const heldId = `evt_late${Date.now().toString(36)}`;
	const payload = { ...accepted.body, eventId: heldId, status: "arrived", sequence: rows[0].version, occurredAt: new Date(rows[0].updated_at).toISOString() };
	await held.query(
		`INSERT INTO ride_events (id, order_id, partner_id, sequence, kind, status, webhook_url, payload, occurred_at)
		 SELECT $1, id, partner_id, version, 'status', 'arrived', webhook_url, $2::jsonb, updated_at FROM orders WHERE id = $3`,
		[heldId, JSON.stringify(payload), ride.orderId],
	);

	// Meanwhile other events (larger positions) are ingested and delivered, and the window moves past the held one.
	await move(node.broker, other, "accepted");
	await waitFor("the other ride's event delivered", () => endpoint.delivered().some((h) => h.orderId === other.orderId), 15_000, 20);
	await sleep(3 * WINDOW_MS);
	await move(node.broker, other, "arrived");
	await waitFor("the other ride's second event delivered", () => endpoint.delivered().filter((h) => h.orderId === other.orderId).length === 2, 15_000, 20);
	expect(endpoint.received.some((h) => h.eventId === heldId)).toBe(false);

	await held.query("COMMIT");
	await held.end();
	held = undefined;
	// The ride goes on through orders as usual: its next status event must not wait forever behind the late one.
	await move(node.broker, ride, "started");

	await waitFor("the ride's later event delivered", () => endpoint.delivered().filter((h) => h.orderId === ride.orderId).length === 3, 20_000, 50);
	const seen = endpoint.delivered().filter((h) => h.orderId === ride.orderId);
	expect(seen.map((h) => h.status)).toEqual(["accepted", "arrived", "started"]);
	expect(seen[1].eventId).toBe(heldId);
	expect(seen.map((h) => h.sequence)).toEqual([...seen.map((h) => h.sequence)].sort((x, y) => x - y));
	expect(seen.every((h) => h.signatureValid)).toBe(true);

	await waitFor("the late ingest counted", async () => (await lateCount()) >= 1, 10_000, 100);
	expect(await lateCount()).toBe(1);
	await proc.waitFor(new RegExp(`Safety-net ingest: 1 ride event\\(s\\) committed later than the ingest window.*${heldId}`), 5_000);
});
