import type { DriverJob, DriverView, RideView, SupplyDemandReply } from "../../../contracts/dispatch";
import { destinationPoint } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import { PartnerApi } from "../../helpers/http";
import { offerFor, onlineDriver, randomPhone } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";

/**
 * Test and live side by side in one deployment running the simulated fleet
 * (real gateway over HTTP, PostgreSQL, every service on one node):
 * - a test key's ride is driven by the sandbox while a live key's ride at the
 *   same pickup waits — searching, never offered to a simulated driver, no
 *   driver spawned for it, counted only in live supply/demand — until a live
 *   driver comes online, who is offered it (its location cadence is the
 *   contract's, not compressed by SIM_SPEED);
 * - simulated drivers stay within SIM_MAX_DRIVERS: more test rides far apart
 *   than there are spawn slots all finish, the later ones with spawned
 *   drivers moved over from rides that ended, and the simulated drivers never
 *   outnumber the bound.
 */

const BENGALURU: Point = { lat: 12.9716, lng: 77.5946 };
/** Far from Bengaluru and from each other (beyond the search radius): each needs a driver of its own. */
const FAR: Point[] = [
	{ lat: 13.0827, lng: 80.2707 }, // Chennai
	{ lat: 15.3647, lng: 75.124 }, // Hubballi
	{ lat: 12.2958, lng: 76.6394 }, // Mysuru
	{ lat: 17.385, lng: 78.4867 }, // Hyderabad
	{ lat: 18.5204, lng: 73.8567 }, // Pune
	{ lat: 9.9312, lng: 76.2673 }, // Kochi
];
const SEEDED = 2; // one city, one driver of each type
const MAX_DRIVERS = 4; // so two spawn slots

let bed: Testbed;
let testApi: PartnerApi;
let liveApi: PartnerApi;

beforeAll(async () => {
	bed = await startTestbed("fleet-modes", {
		services: ["gateway", "partners", "riders", "pricing", "orders", "dispatch", "notifications", "fleet"],
		env: {
			FLEET_MODE: "simulated",
			SIM_SPEED: "60",
			SIM_CITIES: `${BENGALURU.lat},${BENGALURU.lng}`,
			FLEET_DRIVERS_PER_CITY: "1",
			FLEET_SEED_RADIUS_M: "1000",
			SIM_MAX_DRIVERS: String(MAX_DRIVERS),
			FLEET_TICK_MS: "100",
			DISPATCH_TICK_MS: "50",
			DISPATCH_TIMEOUT_MS: "120000",
			RATE_LIMIT_PER_MINUTE: "0",
			AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
		},
	});
	const broker = bed.node.broker;
	const testKey = await broker.call<{ apiKey: string }, unknown>("partners.create", { name: "Fleet modes test", mode: "test" });
	const liveKey = await broker.call<{ apiKey: string }, unknown>("partners.create", { name: "Fleet modes live", mode: "live" });
	testApi = new PartnerApi(bed.node.baseUrl!, testKey.apiKey);
	liveApi = new PartnerApi(bed.node.baseUrl!, liveKey.apiKey);
	await waitFor("the fleet to be seeded", async () => (await broker.call<{ seeded: number }>("fleet.status")).seeded === SEEDED, 30_000);
}, 60_000);

afterAll(async () => {
	await bed?.stop();
});

const call = <T>(action: string, params: unknown = {}): Promise<T> => bed.node.broker.call<T, unknown>(action, params);
const simulatedDrivers = async (): Promise<DriverView[]> => call<DriverView[]>("dispatch.listDrivers", { simulated: true, limit: 1000 });

async function book(api: PartnerApi, pickup: Point, metadata: Record<string, unknown> = {}): Promise<string> {
	const res = await api.post<{ orderId: string }>("/ride/create-order", {
		user: { name: "Asha Rao", phone: randomPhone("+9194") },
		serviceType: "cab",
		pickup: { ...pickup, address: "Somewhere" },
		drop: destinationPoint(pickup, 120, 1500),
		webhookURL: "https://partner.example.com/hooks/rides",
		metadata,
	});
	expect(res.status).toBe(201);
	return res.body.orderId;
}

async function status(api: PartnerApi, orderId: string): Promise<{ status: string; driver?: { id: string } }> {
	const res = await api.post<{ status: string; driver?: { id: string } }>("/ride/status", { orderId });
	expect(res.status).toBe(200);
	return res.body;
}

it("a test ride moves by itself while a live ride at the same pickup waits for a live driver", async () => {
	const pickup = destinationPoint(BENGALURU, 45, 300);
	const liveOrder = await book(liveApi, pickup);
	const testOrder = await book(testApi, pickup, { sandbox: { scenario: "fast" } });
	const before = (await simulatedDrivers()).length;

	await waitFor(`test ride ${testOrder} dropped`, async () => (await status(testApi, testOrder)).status === "dropped", 60_000);

	// The live ride is still searching: never offered to anybody, no simulated driver spawned for it.
	expect((await status(liveApi, liveOrder)).status).toBe("searching");
	const liveRide = await call<RideView>("dispatch.ride", { orderId: liveOrder });
	expect(liveRide).toMatchObject({ mode: "live", phase: "searching", driverId: null, sandbox: null });
	expect(liveRide.offers).toEqual([]);
	expect((await call<RideView>("dispatch.ride", { orderId: testOrder })).mode).toBe("test");
	expect((await simulatedDrivers()).length).toBe(before);
	for (const d of await simulatedDrivers()) expect(d.mode).toBe("test");

	// Supply and demand per mode: the searching live ride is live demand only; the simulated drivers are test supply only.
	// (The simulated driver that just dropped the test ride is free again once dispatch has applied the drop: wait for it.)
	const test = await waitFor(
		"a free simulated cab in test supply",
		async () => {
			const reply = await call<SupplyDemandReply>("dispatch.supplyDemand", { point: pickup, mode: "test" });
			return reply.cab.available > 0 ? reply : null;
		},
		30_000,
	);
	const live = await call<SupplyDemandReply>("dispatch.supplyDemand", { point: pickup, mode: "live" });
	expect(live.cab).toMatchObject({ available: 0, eta: null, demand: 1 });
	expect(test.cab.demand).toBe(0);
	expect(test.cab.available).toBeGreaterThan(0);

	// A live driver comes online: the live ride is offered to it, and it takes the ride.
	const driver = await onlineDriver(bed.node.broker, pickup, 400, "cab", "Live Driver", "live");
	expect(driver.mode).toBe("live");
	await offerFor(bed.node.broker, driver.driverId, liveOrder, 30_000);
	const job = await call<DriverJob>("dispatch.acceptOffer", { driverId: driver.driverId, orderId: liveOrder });
	expect(job.ride).toMatchObject({ orderId: liveOrder, status: "accepted" });
	const accepted = await status(liveApi, liveOrder);
	expect(accepted.status).toBe("accepted");
	expect(accepted.driver?.id).toBe(driver.driverId);
	// Its location events keep the contract's 5 s cadence: SIM_SPEED compresses the sandbox's clock, not real drivers'.
	const { rows } = await bed.pg.query("SELECT extract(epoch FROM next_location_at - phase_since) * 1000 AS ms FROM dispatch_rides WHERE order_id = $1", [
		liveOrder,
	]);
	expect(Number(rows[0].ms)).toBeGreaterThanOrEqual(5000);
}, 90_000);

it("simulated drivers stay within SIM_MAX_DRIVERS: far rides beyond the spawn slots are served by moved drivers", async () => {
	let most = 0;
	const orders: string[] = [];
	for (const pickup of FAR) orders.push(await book(testApi, pickup, { sandbox: { scenario: "fast" } }));

	const drivers = await waitFor(
		"every far test ride dropped",
		async () => {
			most = Math.max(most, (await simulatedDrivers()).length);
			const done = await Promise.all(orders.map((o) => status(testApi, o)));
			for (const s of done) expect(["searching", "accepted", "arrived", "started", "dropped"]).toContain(s.status);
			return done.every((s) => s.status === "dropped") ? done.map((s) => s.driver!.id) : null;
		},
		90_000,
	);

	const all = await simulatedDrivers();
	most = Math.max(most, all.length);
	expect(most).toBeLessThanOrEqual(MAX_DRIVERS);
	expect(all).toHaveLength(MAX_DRIVERS);
	// Six far rides, two spawn slots: the spawned drivers were moved from ride to ride.
	const spawned = new Set(drivers);
	expect(spawned.size).toBeLessThanOrEqual(MAX_DRIVERS - SEEDED);
	for (const id of spawned) expect(all.find((d) => d.driverId === id)?.phone).toMatch(/^\+9181/);
}, 120_000);
