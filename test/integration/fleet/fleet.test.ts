import { randomBytes } from "node:crypto";
import type { Client } from "pg";
import { PartnerApi } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { createPartner } from "../../helpers/webhooks";
import { destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";

/**
 * The simulated fleet at SIM_SPEED=60: rides booked through the gateway over
 * HTTP reach `dropped` by themselves, with location events on the way; the
 * fare estimate's `eta` reflects the simulated drivers; sandbox directives
 * force no_driver_found, a drop-out, or fast steps; a pickup outside the
 * seeded cities gets a spawned driver; and the ride finishes even when the
 * dispatch + fleet process is replaced in the middle of it.
 *
 * The partner-facing services run on one broker, dispatch + fleet on another,
 * over the real NATS.
 */

const BENGALURU: Point = { lat: 12.9716, lng: 77.5946 };
const MUMBAI: Point = { lat: 19.076, lng: 72.8777 };
const CHENNAI: Point = { lat: 13.0827, lng: 80.2707 };
const NOWHERE: Point = { lat: 15.3647, lng: 75.124 }; // Hubballi: no seeded city near

const SIM_ENV = {
	FLEET_MODE: "simulated",
	SIM_SPEED: "60",
	FLEET_DRIVERS_PER_CITY: "3",
	FLEET_SEED_RADIUS_M: "1500",
	FLEET_TICK_MS: "100",
	DISPATCH_TICK_MS: "50",
	DISPATCH_SWEEP_MS: "1000",
	DISPATCH_TIMEOUT_MS: "20000",
};

/** Simulated rides take a while, even at SIM_SPEED=60. */
const RIDE_MS = 60_000;

let bed: Testbed;
let pg: Client;
let namespace: string;
let core: TestNode;
let sim: TestNode | undefined;
let api: PartnerApi;

const post = (path: string, body: unknown) => api.post<any>(path, body);

async function startSim(label: string): Promise<TestNode> {
	const n = await startTestNode({
		databaseUrl: bed.db.url,
		services: ["dispatch", "fleet"],
		nats: { namespace },
		env: { ...SIM_ENV, NODE_ID: `${label}-${randomBytes(3).toString("hex")}` },
	});
	await waitFor("the fleet to be seeded", async () => (await n.broker.call<{ seeded: number }>("fleet.status")).seeded === 18, 30_000);
	await waitFor(
		"the gateway's node to see dispatch",
		async () =>
			core.broker.registry
				.getServiceList({ onlyAvailable: true })
				.some((s: { name: string; nodeID?: string }) => s.name === "dispatch" && s.nodeID === n.broker.nodeID),
		RIDE_MS,
	);
	return n;
}

async function book(pickup: Point, metadata: Record<string, unknown> = {}, serviceType = "cab"): Promise<{ orderId: string; otp: string }> {
	const res = await post("/ride/create-order", {
		user: { name: "Asha Rao", phone: randomPhone("+9195") },
		serviceType,
		pickup: { ...pickup, address: "Somewhere" },
		drop: destinationPoint(pickup, 120, 2000),
		webhookURL: "https://partner.example.com/hooks/rides",
		metadata: { partnerRef: "fleet-test", ...metadata },
	});
	expect(res.status).toBe(201);
	return res.body;
}

/** Polls /ride/status until the ride is `wanted`; any answer but 200 fails the test at once. */
async function untilStatus(orderId: string, wanted: string, timeoutMs = RIDE_MS): Promise<any> {
	const res = await waitFor(
		`${orderId} to be ${wanted}`,
		async () => {
			const r = await post("/ride/status", { orderId });
			return r.status !== 200 || r.body.status === wanted ? r : null;
		},
		timeoutMs,
		150, // the gateway's rate limit allows this pace
	);
	expect(res.status).toBe(200);
	return res.body;
}

interface EventRow {
	sequence: number;
	kind: string;
	status: string;
	payload: { driver?: { id: string; phone: string }; eta?: number; location?: Point & { heading?: number } };
}

async function events(orderId: string): Promise<EventRow[]> {
	return (await pg.query<EventRow>("SELECT sequence, kind, status, payload FROM ride_events WHERE order_id = $1 ORDER BY sequence", [orderId])).rows;
}

beforeAll(async () => {
	namespace = uniqueNamespace("fleet");
	bed = await startTestbed("fleet", {
		services: ["gateway", "partners", "riders", "pricing", "orders"],
		nats: { namespace },
		env: { ...SIM_ENV, NODE_ID: `core-${randomBytes(3).toString("hex")}`, SUPPLY_DEMAND_CACHE_MS: "0" },
	});
	({ node: core, pg } = bed);
	expect(core.baseUrl).toBeDefined();
	api = new PartnerApi(core.baseUrl!, (await createPartner(core.broker, "Sandbox partner")).apiKey);
	sim = await startSim("sim-a");
});

afterAll(async () => {
	await sim?.stop();
	await bed?.stop();
});

describe("simulated fleet (SIM_SPEED=60)", () => {
	it("gives fare estimates an eta from the simulated drivers, and none where there are none", async () => {
		const here = await post("/ride/fare-estimate", { pickup: BENGALURU, drop: destinationPoint(BENGALURU, 0, 4000) });
		expect(here.status).toBe(200);
		expect(here.body.quotes.map((q: any) => q.serviceType)).toEqual(["scooty", "cab"]);
		for (const q of here.body.quotes) {
			expect(typeof q.eta).toBe("number");
			// Seeded within 1.5 km: at most 1.5 km × 1.3 at 20 km/h ≈ 351 s.
			expect(q.eta).toBeGreaterThan(0);
			expect(q.eta).toBeLessThanOrEqual(352);
		}
		const there = await post("/ride/fare-estimate", { pickup: NOWHERE, drop: destinationPoint(NOWHERE, 0, 4000) });
		expect(there.status).toBe(200);
		for (const q of there.body.quotes) expect(q.eta).toBeNull();
	});

	it("drives booked rides to dropped by themselves, with location events; obeys sandbox directives; spawns drivers where none are", async () => {
		const [plain, none, fastFar, dropOut] = await Promise.all([
			book(destinationPoint(BENGALURU, 45, 300)),
			book(MUMBAI, { sandbox: { scenario: "no_driver_found" } }),
			book(CHENNAI, { sandbox: { scenario: "fast" } }, "scooty"),
			book(destinationPoint(MUMBAI, 200, 400), { sandbox: { scenario: "driver_drop_out" } }),
		]);

		// no_driver_found, at once, without offering anyone the ride.
		await untilStatus(none.orderId, "no_driver_found", 15_000);
		expect((await events(none.orderId)).map((e) => e.status)).toEqual(["no_driver_found"]);

		// Chennai has no seeded drivers: one is spawned near the pickup, and "fast" finishes in moments.
		const fast = await untilStatus(fastFar.orderId, "dropped", 30_000);
		expect(fast.driver.phone).toMatch(/^\+9181/);
		expect((await events(fastFar.orderId)).filter((e) => e.kind === "status").map((e) => e.status)).toEqual(["accepted", "arrived", "started", "dropped"]);

		// driver_drop_out: the first driver gives up on the way; another one accepts.
		const twoAccepts = await waitFor(
			"a second accepted",
			async () => {
				const acc = (await events(dropOut.orderId)).filter((e) => e.status === "accepted");
				return acc.length >= 2 ? acc : null;
			},
			RIDE_MS,
		);
		expect(twoAccepts[0].payload.driver!.id).not.toBe(twoAccepts[1].payload.driver!.id);
		expect((await post("/ride/cancel", { orderId: dropOut.orderId })).status).toBe(200);

		// The plain ride: accepted, on its way with location events, arrived, started with the OTP, on to the drop.
		const done = await untilStatus(plain.orderId, "dropped");
		expect(done.driver).toMatchObject({ id: expect.stringMatching(/^drv_/), vehicleNumber: expect.stringMatching(/^SIM/) });
		const rows = await events(plain.orderId);
		rows.forEach((r, i) => expect(r.sequence).toBe(i + 1));
		const statuses = rows.filter((e) => e.kind === "status").map((e) => e.status);
		expect(statuses).toEqual(["accepted", "arrived", "started", "dropped"]);
		const at = (s: string) => rows.findIndex((e) => e.status === s);
		const toPickup = rows.slice(at("accepted") + 1, at("arrived")).filter((e) => e.kind === "location");
		const toDrop = rows.slice(at("started") + 1, at("dropped")).filter((e) => e.kind === "location");
		expect(toPickup.length).toBeGreaterThanOrEqual(1);
		expect(toDrop.length).toBeGreaterThanOrEqual(2);
		// The driver really moves towards the drop: the eta shrinks.
		expect(toDrop[toDrop.length - 1].payload.eta!).toBeLessThan(toDrop[0].payload.eta!);
		expect(toDrop[0].payload.location).not.toEqual(toDrop[toDrop.length - 1].payload.location);
		// The drop event is at the drop.
		const dropped = rows[at("dropped")].payload.location!;
		const drop = destinationPoint(destinationPoint(BENGALURU, 45, 300), 120, 2000);
		expect(dropped.lat).toBeCloseTo(drop.lat, 4);
		expect(dropped.lng).toBeCloseTo(drop.lng, 4);
	});

	it("finishes a ride when the dispatch + fleet process is replaced in the middle of it", async () => {
		const ride = await book(destinationPoint(BENGALURU, 270, 500));
		await untilStatus(ride.orderId, "accepted", 20_000);
		await sim!.stop();
		sim = undefined;
		const before = (await events(ride.orderId)).length;
		sim = await startSim("sim-b");
		await untilStatus(ride.orderId, "dropped");
		const rows = await events(ride.orderId);
		expect(rows.length).toBeGreaterThan(before);
		expect(rows.filter((e) => e.kind === "status").map((e) => e.status)).toEqual(["accepted", "arrived", "started", "dropped"]);
		// Still the same driver: the new process carried on with the old assignment.
		expect(new Set(rows.filter((e) => e.kind === "status").map((e) => e.payload.driver!.id)).size).toBe(1);
	});
});
