import { randomBytes } from "node:crypto";
import type { Client } from "pg";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";
import { httpRequest, type HttpAnswer } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { randomPhone } from "../../helpers/rides";
import { sleep, waitFor } from "../../helpers/wait";
import { startPartnerEndpoint, type PartnerEndpoint } from "../../helpers/webhooks";
import { destinationPoint, haversineMeters } from "../../../lib/geo";
import type { Point } from "../../../contracts/common";
import type { DriverJob, DriverView } from "../../../contracts/dispatch";
import type { DriverTokenCreated } from "../../../contracts/driver";

/**
 * Driver presence over real HTTP, NATS and PostgreSQL, with the presence
 * rules on (no TELEPORTING_DRIVERS: the default 250 km/h speed limit and
 * 300 m arrival radius) and short silence and flush cadences:
 *
 * - node A: the gateway, dispatch and the services a booking needs;
 * - node B: a second gateway and a second dispatch on the same NATS
 *   namespace and database, whose search radius is 1 m so it can never make
 *   an offer: a wait held on B is answered by an offer made on A;
 * - later node C: a second dispatch that matches, racing A for rides.
 *
 * Drivers are live drivers with tokens (dispatch.createDriverToken) talking
 * to `/driver/*`; rides are booked by a live partner through gateway A. An
 * available driver that is not meant to go silent keeps reporting its
 * position (`keepAlive`), as a driver app does.
 */

const COMMON_ENV: Record<string, string> = {
	FLEET_MODE: "live",
	RATE_LIMIT_PER_MINUTE: "0",
	AUTH_FAILURE_LIMIT_PER_MINUTE: "0",
	DRIVER_SILENT_AFTER_MS: "1500",
	DRIVER_PRESENCE_SWEEP_MS: "200",
	DRIVER_POSITION_FLUSH_MS: "100",
	DISPATCH_TICK_MS: "50",
	DISPATCH_RETRY_MS: "100",
	DISPATCH_RETRY_MAX_MS: "300",
	// Offers stay pending for the whole file: the tests read them, nobody has to answer.
	DISPATCH_OFFER_TIMEOUT_MS: "60000",
	DISPATCH_SWEEP_MS: "1000",
	DISPATCH_INDEX_REFRESH_MS: "1000",
};

/** Each test in its own city, farther apart than the 5 km search radius: no test's driver is ever offered another test's ride. */
const CITIES: Record<string, Point> = {
	topology: { lat: 12.9716, lng: 77.5946 }, // Bengaluru
	supersede: { lat: 19.076, lng: 72.8777 }, // Mumbai
	silent: { lat: 28.6139, lng: 77.209 }, // Delhi
	revoked: { lat: 13.0827, lng: 80.2707 }, // Chennai
	jumps: { lat: 22.5726, lng: 88.3639 }, // Kolkata
	concurrent: { lat: 17.385, lng: 78.4867 }, // Hyderabad
};

/** A keep-alive ping every this often: well inside DRIVER_SILENT_AFTER_MS. */
const PING_MS = 250;
const STEP_MS = 20_000;

let db: TestDatabase;
let pg: Client;
let namespace: string;
let nodeA: TestNode;
let nodeB: TestNode | undefined;
let nodeC: TestNode | undefined;
let partner: { partnerId: string; apiKey: string; webhookSecret: string };
let endpoint: PartnerEndpoint;

/** Node `n`'s broker knows the dispatch service of node `of`. */
function sees(n: TestNode, of: TestNode): boolean {
	return n.broker.registry
		.getServiceList({ onlyAvailable: true })
		.some((s: { name: string; nodeID?: string }) => s.name === "dispatch" && s.nodeID === of.broker.nodeID);
}

beforeAll(async () => {
	db = await createTestDatabase("presence");
	namespace = uniqueNamespace("presence");
	nodeA = await startTestNode({
		databaseUrl: db.url,
		services: ["gateway", "partners", "riders", "pricing", "orders", "dispatch"],
		nats: { namespace },
		env: { ...COMMON_ENV, NODE_ID: `a-${randomBytes(3).toString("hex")}` },
	});
	nodeB = await startTestNode({
		databaseUrl: db.url,
		services: ["gateway", "dispatch"],
		nats: { namespace },
		// Matching is impossible here: no driver is ever within 1 m of a pickup.
		env: { ...COMMON_ENV, DISPATCH_SEARCH_RADIUS_M: "1", NODE_ID: `b-${randomBytes(3).toString("hex")}` },
	});
	// Broadcasts (offerCreated, driverWaitStarted, driverTokensChanged) reach a node only once it is known.
	await waitFor("A and B to discover each other's dispatch", () => sees(nodeA, nodeB!) && sees(nodeB!, nodeA), STEP_MS);
	pg = await connect(db.url);
	partner = await nodeA.broker.call("partners.create", { name: "Presence partner", mode: "live" });
	endpoint = await startPartnerEndpoint(partner.webhookSecret);
});

afterAll(async () => {
	await pg?.end().catch(() => undefined);
	await nodeC?.stop();
	await nodeB?.stop();
	await nodeA?.stop();
	await endpoint?.close();
	await db?.drop();
});

// ---- helpers ----------------------------------------------------------------------------

function driverCall<T = Record<string, any>>(base: string, d: DriverTokenCreated, path: string, body?: unknown, method = "POST"): Promise<HttpAnswer<T>> {
	return httpRequest<T>(`${base}/driver${path}`, { method, headers: { Authorization: `Bearer ${d.token}` }, body });
}

const viaA = <T = Record<string, any>>(d: DriverTokenCreated, path: string, body?: unknown) => driverCall<T>(nodeA.baseUrl!, d, path, body);
const viaB = <T = Record<string, any>>(d: DriverTokenCreated, path: string, body?: unknown) => driverCall<T>(nodeB!.baseUrl!, d, path, body);

function newDriver(name: string): Promise<DriverTokenCreated> {
	return nodeA.broker.call<DriverTokenCreated, unknown>("dispatch.createDriverToken", {
		name,
		phone: randomPhone("+9196"),
		vehicleNumber: `KA01${randomBytes(2).toString("hex")}`,
		serviceType: "cab",
		mode: "live",
	});
}

/** A driver with a token, online at `at` through gateway A. */
async function onlineDriver(name: string, at: Point): Promise<DriverTokenCreated> {
	const d = await newDriver(name);
	const online = await viaA<DriverView>(d, "/online", { location: { lat: at.lat, lng: at.lng } });
	expect(online.status).toBe(200);
	expect(online.body.status).toBe("available");
	return d;
}

/** The driver as the operators read it (fresh from PostgreSQL). */
function driverJob(driverId: string): Promise<DriverJob> {
	return nodeA.broker.call<DriverJob, unknown>("dispatch.driver", { driverId });
}

/** A driver app reporting where it is every PING_MS through gateway A; `stop` says which pings were refused. */
function keepAlive(d: DriverTokenCreated, where: () => Point): { stop: () => Promise<string[]> } {
	let running = true;
	const refused: string[] = [];
	const loop = (async () => {
		while (running) {
			const p = where();
			const r = await viaA(d, "/location", { locations: [{ lat: p.lat, lng: p.lng }] });
			if (r.status !== 200) refused.push(`${r.status} ${r.text}`);
			await sleep(PING_MS);
		}
	})();
	return {
		async stop() {
			running = false;
			await loop;
			return refused;
		},
	};
}

async function book(pickup: Point): Promise<{ orderId: string; otp: string; status: string }> {
	const res = await httpRequest<{ orderId: string; otp: string; status: string }>(`${nodeA.baseUrl}/ride/create-order`, {
		headers: { Authorization: `Bearer ${partner.apiKey}` },
		body: {
			user: { name: "Asha Rao", phone: randomPhone() },
			serviceType: "cab",
			pickup,
			drop: destinationPoint(pickup, 0, 3000),
			webhookURL: `${endpoint.url}/hooks`,
		},
	});
	expect(res.status).toBe(201);
	expect(res.body.status).toBe("searching");
	return res.body;
}

/** Waits this node's dispatch holds open (`/driver/offers` long-polls). */
function waitsHeld(n: TestNode): number {
	return (n.broker.getLocalService("dispatch") as unknown as { offerWaits: { size: number } }).offerWaits.size;
}

/** Every `dispatch.offerCreated` a node's broker broadcast (its dispatch made that offer), by order id. */
function offersAnnounced(n: TestNode): { orderIds: () => string[]; restore: () => void } {
	const spy = jest.spyOn(n.broker, "broadcast");
	return {
		orderIds: () =>
			(spy.mock.calls as unknown[][])
				.filter(([event]) => event === "dispatch.offerCreated")
				.map(([, payload]) => (payload as { orderId: string }).orderId),
		restore: () => spy.mockRestore(),
	};
}

async function offersOf(driverId: string): Promise<Array<{ order_id: string; state: string }>> {
	return (await pg.query<{ order_id: string; state: string }>("SELECT order_id, state FROM dispatch_offers WHERE driver_id = $1", [driverId])).rows;
}

// ---- tests -------------------------------------------------------------------------------

it("answers a wait held on one instance with an offer made on the other, long before its deadline", async () => {
	const pickup = CITIES.topology;
	const d = await onlineDriver("Topology driver", destinationPoint(pickup, 90, 300));
	const alive = keepAlive(d, () => destinationPoint(pickup, 90, 300));
	const fromA = offersAnnounced(nodeA);
	const fromB = offersAnnounced(nodeB!);
	try {
		const waitSeconds = 20;
		const opened = Date.now();
		const wait = viaB<DriverJob>(d, "/offers", { waitSeconds });
		// Gateway B hands the call to its own dispatch (preferLocal): the wait is held on B.
		await waitFor("the wait to be held on B", () => waitsHeld(nodeB!) === 1, STEP_MS);
		expect(waitsHeld(nodeA)).toBe(0);

		const ride = await book(pickup);
		const answer = await wait;
		const elapsed = Date.now() - opened;
		expect(answer.status).toBe(200);
		// A wait that ran out answers offer null: the offer itself ended it.
		expect(answer.body.offer?.orderId).toBe(ride.orderId);
		expect(answer.body.driver).toMatchObject({ driverId: d.driverId, status: "offered", orderId: ride.orderId });
		expect(elapsed).toBeLessThan(waitSeconds * 1000);
		// A made the offer, B (holding the wait) made none.
		expect(fromA.orderIds()).toContain(ride.orderId);
		expect(fromB.orderIds()).toEqual([]);
		expect(await offersOf(d.driverId)).toEqual([{ order_id: ride.orderId, state: "pending" }]);
	} finally {
		fromA.restore();
		fromB.restore();
		expect(await alive.stop()).toEqual([]);
	}
});

it("a driver's second wait, on the other instance, ends its first at once; the second gets the offer", async () => {
	const pickup = CITIES.supersede;
	const at = destinationPoint(pickup, 180, 400);
	const d = await onlineDriver("Supersede driver", at);
	const alive = keepAlive(d, () => at);
	try {
		const waitSeconds = 20;
		const firstOpened = Date.now();
		const first = viaB<DriverJob>(d, "/offers", { waitSeconds });
		await waitFor("the first wait to be held on B", () => waitsHeld(nodeB!) === 1, STEP_MS);

		let secondSettled = false;
		const second = viaA<DriverJob>(d, "/offers", { waitSeconds }).finally(() => {
			secondSettled = true;
		});
		const firstAnswer = await first;
		expect(Date.now() - firstOpened).toBeLessThan(waitSeconds * 1000);
		expect(firstAnswer.status).toBe(200);
		expect(firstAnswer.body).toMatchObject({ offer: null, ride: null, driver: { driverId: d.driverId, status: "available" } });
		// The second wait is still open, on A, and B holds nothing any more.
		expect(secondSettled).toBe(false);
		await waitFor("the second wait to be held on A", () => waitsHeld(nodeA) === 1, STEP_MS);
		expect(waitsHeld(nodeB!)).toBe(0);

		const ride = await book(pickup);
		const secondAnswer = await second;
		expect(secondAnswer.status).toBe(200);
		expect(secondAnswer.body.offer?.orderId).toBe(ride.orderId);
		expect(waitsHeld(nodeA)).toBe(0);
	} finally {
		expect(await alive.stop()).toEqual([]);
	}
});

it("a silent driver goes offline, is passed over for a ride next to it, and is back with its next position", async () => {
	const pickup = CITIES.silent;
	const silentAt = destinationPoint(pickup, 0, 50);
	const farAt = destinationPoint(pickup, 270, 1500);
	const silent = await onlineDriver("Silent driver", silentAt);
	const far = await onlineDriver("Far driver", farAt);
	const alive = keepAlive(far, () => farAt);
	try {
		// No position from the silent driver for longer than DRIVER_SILENT_AFTER_MS: the sweep takes it offline.
		await waitFor("the silent driver to go offline", async () => (await driverJob(silent.driverId)).driver.status === "offline", STEP_MS);
		const row = await pg.query("SELECT status, offline_reason FROM drivers WHERE id = $1", [silent.driverId]);
		expect(row.rows[0]).toEqual({ status: "offline", offline_reason: "silent" });
		// The driver that kept reporting stayed available.
		expect((await driverJob(far.driverId)).driver.status).toBe("available");

		// The ride is 50 m from the silent driver and 1.5 km from the other: it goes to the one that is there.
		const ride = await book(pickup);
		const offer = await viaA<DriverJob>(far, "/offers", { waitSeconds: 20 });
		expect(offer.body.offer?.orderId).toBe(ride.orderId);
		expect((await driverJob(silent.driverId)).driver).toMatchObject({ status: "offline", orderId: null });
		expect(await offersOf(silent.driverId)).toEqual([]);

		// Its next position brings it back.
		const back = await viaA<DriverView>(silent, "/location", { locations: [{ lat: silentAt.lat, lng: silentAt.lng }] });
		expect(back.status).toBe(200);
		expect(back.body.status).toBe("available");
		expect((await driverJob(silent.driverId)).driver.status).toBe("available");
		const after = await pg.query("SELECT status, offline_reason FROM drivers WHERE id = $1", [silent.driverId]);
		expect(after.rows[0]).toEqual({ status: "available", offline_reason: null });
	} finally {
		expect(await alive.stop()).toEqual([]);
	}
});

it("a revoked driver is offline at once, refused on both gateways, and not offered a ride next to it", async () => {
	const pickup = CITIES.revoked;
	const revokedAt = destinationPoint(pickup, 45, 50);
	const otherAt = destinationPoint(pickup, 225, 1500);
	const revoked = await onlineDriver("Revoked driver", revokedAt);
	const other = await onlineDriver("Other driver", otherAt);
	const aliveRevoked = keepAlive(revoked, () => revokedAt);
	const aliveOther = keepAlive(other, () => otherAt);
	try {
		// Online and waiting (on B), the other driver waiting too (on A).
		const revokedWait = viaB<DriverJob>(revoked, "/offers", { waitSeconds: 3 });
		await waitFor("the revoked driver's wait to be held on B", () => waitsHeld(nodeB!) === 1, STEP_MS);
		expect((await aliveRevoked.stop()).length).toBe(0);

		const answer = await nodeA.broker.call<{ driverId: string; revoked: number }, unknown>("dispatch.revokeDriverTokens", {
			driverId: revoked.driverId,
		});
		expect(answer).toEqual({ driverId: revoked.driverId, revoked: 1 });
		// Offline as soon as the call returned.
		expect((await driverJob(revoked.driverId)).driver.status).toBe("offline");
		const row = await pg.query("SELECT status, offline_reason FROM drivers WHERE id = $1", [revoked.driverId]);
		expect(row.rows[0]).toEqual({ status: "offline", offline_reason: "revoked" });
		// Its token is refused on the next call, through either gateway (each instance dropped its cache).
		for (const call of [viaA, viaB]) {
			const refused = await call(revoked, "/location", { locations: [{ lat: revokedAt.lat, lng: revokedAt.lng }] });
			expect(refused.status).toBe(401);
			expect(refused.body).toMatchObject({ code: "UNAUTHORIZED", message: expect.any(String) });
		}

		// The ride is next to the revoked driver; the other one gets it.
		const ride = await book(pickup);
		const offer = await viaA<DriverJob>(other, "/offers", { waitSeconds: 20 });
		expect(offer.body.offer?.orderId).toBe(ride.orderId);
		expect(await offersOf(revoked.driverId)).toEqual([]);
		expect((await driverJob(revoked.driverId)).driver).toMatchObject({ status: "offline", orderId: null });
		// The wait it had open never gets an offer.
		const ended = await revokedWait;
		expect(ended.status).toBe(200);
		expect(ended.body.offer).toBeNull();
	} finally {
		await aliveRevoked.stop();
		expect(await aliveOther.stop()).toEqual([]);
	}
});

it("refuses an impossible jump (422) and an arrival far from the pickup (409); plausible moves and an arrival at the pickup pass", async () => {
	const pickup = CITIES.jumps;
	const start = destinationPoint(pickup, 90, 2000);
	let here = start;
	const d = await onlineDriver("Jumping driver", start);
	const alive = keepAlive(d, () => here);
	let stopped = false;
	try {
		// 50 km in a moment: refused with the error envelope, nothing recorded.
		const far = destinationPoint(start, 0, 50_000);
		const jump = await viaA(d, "/location", { locations: [{ lat: far.lat, lng: far.lng }] });
		expect(jump.status).toBe(422);
		expect(jump.body).toMatchObject({ code: "LOCATION_IMPLAUSIBLE", message: expect.any(String) });
		const unchanged = (await driverJob(d.driverId)).driver.location!;
		expect(haversineMeters(unchanged, start)).toBeLessThan(1);

		// A few metres is a driver moving.
		here = destinationPoint(start, 270, 5);
		const step = await viaA<DriverView>(d, "/location", { locations: [{ lat: here.lat, lng: here.lng }] });
		expect(step.status).toBe(200);
		expect(haversineMeters(step.body.location!, here)).toBeLessThan(1);

		// The driver takes a ride 2 km away.
		const ride = await book(pickup);
		const offer = await viaA<DriverJob>(d, "/offers", { waitSeconds: 20 });
		expect(offer.body.offer?.orderId).toBe(ride.orderId);
		const accepted = await viaA<DriverJob>(d, "/accept", { orderId: ride.orderId });
		expect(accepted.status).toBe(200);
		// On the ride the silence sweep no longer applies; the moves below are the only positions.
		expect(await alive.stop()).toEqual([]);
		stopped = true;

		const early = await viaA(d, "/arrived", { orderId: ride.orderId });
		expect(early.status).toBe(409);
		expect(early.body).toMatchObject({ code: "NOT_AT_PICKUP", message: expect.any(String) });
		expect((await driverJob(d.driverId)).ride).toMatchObject({ orderId: ride.orderId, status: "accepted" });

		// Towards the pickup, 180 m per report: within the jump tolerance however fast the reports come.
		while (haversineMeters(here, pickup) > 180) {
			here = destinationPoint(here, 270, 180);
			const moved = await viaA(d, "/location", { locations: [{ lat: here.lat, lng: here.lng }] });
			expect(moved.status).toBe(200);
		}
		// The last metres travel with the call.
		const arrived = await viaA<DriverJob>(d, "/arrived", { orderId: ride.orderId, location: { lat: pickup.lat, lng: pickup.lng } });
		expect(arrived.status).toBe(200);
		expect(arrived.body.ride).toMatchObject({ orderId: ride.orderId, status: "arrived" });
		expect(haversineMeters((await driverJob(d.driverId)).driver.location!, pickup)).toBeLessThan(1);
	} finally {
		if (!stopped) await alive.stop();
	}
});

it("two matching instances never give a ride two pending offers nor a driver two", async () => {
	const DRIVERS = 20;
	const RIDES = 20;
	const pickup = CITIES.concurrent;
	// B cannot match: it leaves, and a dispatch that can takes its place.
	await nodeB!.stop();
	nodeB = undefined;
	nodeC = await startTestNode({
		databaseUrl: db.url,
		services: ["dispatch"],
		nats: { namespace },
		env: { ...COMMON_ENV, NODE_ID: `c-${randomBytes(3).toString("hex")}` },
	});
	await waitFor("A and C to discover each other's dispatch", () => sees(nodeA, nodeC!) && sees(nodeC!, nodeA), STEP_MS);
	const instances = [nodeA, nodeC];

	const drivers = await Promise.all(Array.from({ length: DRIVERS }, (_, i) => newDriver(`Concurrent driver ${i}`)));
	const spots = drivers.map((_, i) => destinationPoint(pickup, (i * 37) % 360, 100 + i * 40));
	// Online and reporting through both instances in turn (internal actions, addressed by node id).
	const report = (action: string, i: number, round: number) =>
		nodeA.broker.call(
			action,
			{ driverId: drivers[i].driverId, location: { lat: spots[i].lat, lng: spots[i].lng } },
			{ nodeID: instances[(i + round) % 2].broker.nodeID },
		);
	await Promise.all(drivers.map((_, i) => report("dispatch.goOnline", i, 0)));
	let running = true;
	const refused: string[] = [];
	const pinger = (async () => {
		for (let round = 1; running; round++) {
			await Promise.all(
				drivers.map((_, i) =>
					report("dispatch.reportLocation", i, round).catch((err: Error) => refused.push(`${drivers[i].driverId}: ${err.message}`)),
				),
			);
			await sleep(PING_MS);
		}
	})();
	const fromA = offersAnnounced(nodeA);
	const fromC = offersAnnounced(nodeC);
	try {
		const rides = await Promise.all(Array.from({ length: RIDES }, (_, i) => book(destinationPoint(pickup, (i * 53) % 360, 20 + i * 10))));
		const count = async () => (await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM dispatch_offers WHERE state = 'pending'")).rows[0].n;
		const ids = rides.map((r) => r.orderId);
		await waitFor(
			"every ride to be offered",
			async () => (await pg.query("SELECT 1 FROM dispatch_offers WHERE state = 'pending' AND order_id = ANY($1)", [ids])).rowCount === RIDES,
			STEP_MS,
		);
		expect(await count()).toBeGreaterThanOrEqual(RIDES);

		const driverIds = drivers.map((d) => d.driverId);
		const { rows: pending } = await pg.query<{ order_id: string; driver_id: string }>(
			"SELECT order_id, driver_id FROM dispatch_offers WHERE state = 'pending' AND driver_id = ANY($1)",
			[driverIds],
		);
		// One pending offer per ride and per driver.
		expect(pending).toHaveLength(RIDES);
		expect(new Set(pending.map((o) => o.order_id)).size).toBe(RIDES);
		expect(new Set(pending.map((o) => o.driver_id)).size).toBe(RIDES);
		expect(new Set(pending.map((o) => o.order_id))).toEqual(new Set(ids));
		// Every offered driver holds exactly one pending offer, the one for the ride its row names; and every pending offer's driver is offered that ride.
		const { rows: mismatched } = await pg.query(
			`SELECT d.id, d.status, d.order_id,
			        (SELECT count(*)::int FROM dispatch_offers o WHERE o.driver_id = d.id AND o.state = 'pending') AS pending,
			        (SELECT count(*)::int FROM dispatch_offers o WHERE o.driver_id = d.id AND o.state = 'pending' AND o.order_id = d.order_id) AS matching
			 FROM drivers d WHERE d.id = ANY($1)`,
			[driverIds],
		);
		const wrong = mismatched.filter((r) => (r.status === "offered" ? r.pending !== 1 || r.matching !== 1 : r.pending !== 0));
		expect(wrong).toEqual([]);
		expect(mismatched.filter((r) => r.status === "offered")).toHaveLength(RIDES);
		// Each offer was made (and announced) once, by one of the two instances.
		const announced = [...fromA.orderIds(), ...fromC.orderIds()].filter((id) => ids.includes(id));
		expect(announced.sort()).toEqual([...ids].sort());
		console.info(
			`offers made: A ${fromA.orderIds().filter((id) => ids.includes(id)).length}, C ${fromC.orderIds().filter((id) => ids.includes(id)).length}`,
		);
	} finally {
		fromA.restore();
		fromC.restore();
		running = false;
		await pinger;
	}
	expect(refused).toEqual([]);
});
