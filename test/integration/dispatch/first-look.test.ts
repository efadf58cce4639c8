import { Sequelize } from "sequelize";
import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { Db, runMigrations } from "../../../mixins/db.mixin";
import { migrations } from "../../../services/dispatch/migrations";
import { DispatchRepo } from "../../../services/dispatch/dispatch.repo";
import type { FirstLook } from "../../../services/dispatch/ride-mirror.repo";
import { destinationPoint } from "../../../lib/geo";
import { newId } from "../../../lib/ids";
import type { DriverMode } from "../../../contracts/dispatch";
import type { Point, ServiceType } from "../../../contracts/common";

/**
 * A new ride's first look is decided by the statement that mirrors it
 * (ride-mirror.repo.ts insertNewRides), issue 9: a ride that a driver could
 * be offered is due at once; one nobody could be offered (no available
 * driver of its mode and type inside the search radius) starts backed off by
 * the first retry, capped at its deadline, so it costs no update a moment
 * later. A sandbox `no_driver_found` ride stays due (it ends at once). The
 * repo runs on the real PostgreSQL with no matcher around, so whatever
 * `next_match_at` holds right after the insert is the insert's.
 */

const FIRST: FirstLook = { retryMatchMs: 4000, dispatchTimeoutMs: 120_000, radiusM: 5000 };
const CENTRE: Point = { lat: 22.5726, lng: 88.3639 }; // Kolkata

let db: TestDatabase;
let seq: Sequelize;
let repo: DispatchRepo;
let sql: Db;

beforeAll(async () => {
	db = await createTestDatabase("firstlook");
	seq = new Sequelize(db.url, { logging: false });
	await runMigrations(seq, { service: "dispatch", migrations }, db.url);
	sql = new Db(seq);
	repo = new DispatchRepo(sql);
});

afterAll(async () => {
	await seq?.close();
	await db?.drop();
});

async function availableDriver(at: Point, mode: DriverMode, serviceType: ServiceType = "cab"): Promise<string> {
	const id = newId("drv");
	await repo.drivers.insertDriver(id, {
		name: "Test Driver",
		phone: `+9190${String(Math.floor(Math.random() * 1e8)).padStart(8, "0")}`,
		vehicleNumber: "WB01AA0001",
		serviceType,
		mode,
	});
	await repo.drivers.setDriverLocation(id, at, true);
	return id;
}

function ride(pickup: Point, mode: DriverMode, extra: { serviceType?: ServiceType; sandbox?: "no_driver_found" } = {}) {
	return {
		orderId: newId("ord"),
		partnerId: "ptn_firstlook",
		mode,
		serviceType: extra.serviceType ?? ("cab" as ServiceType),
		pickup,
		drop: destinationPoint(pickup, 90, 3000),
		sandbox: extra.sandbox ?? null,
		seen: { version: 1, updatedAt: new Date().toISOString() },
	};
}

/** next_match_at − search_started_at, in ms (both set by the insert). */
async function firstWaitMs(orderId: string): Promise<number> {
	const rows = await sql.rows<{ wait: string }>(
		"SELECT (extract(epoch FROM next_match_at - search_started_at) * 1000)::text AS wait FROM dispatch_rides WHERE order_id = $1",
		[orderId],
	);
	return Math.round(Number(rows[0].wait));
}

it("in one statement, a ride with a driver of its mode and type near is due at once; rides nobody could be offered start one retry later", async () => {
	const near = destinationPoint(CENTRE, 45, 1500);
	await availableDriver(near, "live", "cab");
	const rides = [
		ride(CENTRE, "live"), // the live cab 1.5 km away can be offered it
		ride(CENTRE, "test"), // no test driver anywhere
		ride(CENTRE, "live", { serviceType: "scooty" }), // no scooty
		ride(destinationPoint(CENTRE, 0, 20_000), "live"), // 20 km north: outside the radius
	];
	expect(await repo.mirror.insertNewRides(rides, FIRST)).toEqual([true, true, true, true]);
	expect(await Promise.all(rides.map((r) => firstWaitMs(r.orderId)))).toEqual([0, FIRST.retryMatchMs, FIRST.retryMatchMs, FIRST.retryMatchMs]);
	// The due one is what the next matching pass looks at; the others are not due yet.
	const due = await repo.matching.dueSearches(100, {
		minMs: FIRST.retryMatchMs,
		maxMs: 30_000,
		dispatchTimeoutMs: FIRST.dispatchTimeoutMs,
		radiusM: FIRST.radiusM,
	});
	expect(due).toEqual([{ order_id: rides[0].orderId, backed_off: false }]);
});

it("an offline driver does not count; a sandbox no_driver_found ride stays due; the first wait never passes the deadline", async () => {
	const spot = destinationPoint(CENTRE, 200, 40_000);
	await repo.drivers.setDriverOffline(await availableDriver(destinationPoint(spot, 0, 500), "live"), "driver");
	const lonely = ride(spot, "live");
	const sandbox = ride(spot, "test", { sandbox: "no_driver_found" });
	await repo.mirror.insertNewRides([lonely, sandbox], FIRST);
	expect(await firstWaitMs(lonely.orderId)).toBe(FIRST.retryMatchMs);
	expect(await firstWaitMs(sandbox.orderId)).toBe(0);

	const short = ride(spot, "live");
	await repo.mirror.insertNewRides([short], { ...FIRST, dispatchTimeoutMs: 1500 });
	expect(await firstWaitMs(short.orderId)).toBe(1500);
});

it("a ride already mirrored is left alone (its first look included)", async () => {
	const r = ride(destinationPoint(CENTRE, 300, 60_000), "live");
	expect(await repo.mirror.insertNewRides([r], FIRST)).toEqual([true]);
	await availableDriver(r.pickup, "live");
	expect(await repo.mirror.insertNewRides([r], FIRST)).toEqual([false]);
	expect(await firstWaitMs(r.orderId)).toBe(FIRST.retryMatchMs);
});
