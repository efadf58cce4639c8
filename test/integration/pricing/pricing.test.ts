import { rejection as expectError } from "../../helpers/broker";
import { createTestDatabase, connect, type TestDatabase } from "../../helpers/db";
import { startTestNode, type TestNode } from "../../helpers/node";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { createPartner } from "../../helpers/webhooks";
import { destinationPoint } from "../../../lib/geo";
import { encodeQuote, QuoteKeyring } from "../../../services/pricing/quote-token";
import { computeFare } from "../../../services/pricing/fare";
import { parseTariffs } from "../../../services/pricing/pricing.settings";
import type { EstimateResult, PricedTrip } from "../../../contracts/pricing";

/**
 * pricing on a real broker and a real PostgreSQL: estimate shapes, validation,
 * quote verification, and the secret shared through pricing_secrets.
 */

const SECRET = `it-secret-${"x".repeat(40)}`;
const MG_ROAD = { lat: 12.9716, lng: 77.5946, address: "MG Road" };
const KORAMANGALA = { lat: 12.9352, lng: 77.6245 };

let bed: Testbed;
let db: TestDatabase;
let node: TestNode;
let partnerA: string;
let partnerB: string;

const asPartner = (partnerId: string) => ({ meta: { partnerId } });

beforeAll(async () => {
	bed = await startTestbed("pricing", {
		services: ["partners", "pricing", "riders"],
		env: { QUOTE_SIGNING_SECRET: SECRET, QUOTE_TTL_SECONDS: "300", MAX_TRIP_KM: "100" },
	});
	({ db, node } = bed);
	partnerA = (await createPartner(node.broker, "A")).partnerId;
	partnerB = (await createPartner(node.broker, "B")).partnerId;
});

afterAll(async () => {
	await bed?.stop();
});

describe("pricing.estimate", () => {
	it("quotes scooty then cab with the contract's fields", async () => {
		const before = Date.now();
		const res = await node.broker.call<EstimateResult, Record<string, unknown>>(
			"pricing.estimate",
			{ pickup: MG_ROAD, drop: KORAMANGALA },
			asPartner(partnerA),
		);
		expect(Number.isInteger(res.distance)).toBe(true);
		expect(Number.isInteger(res.duration)).toBe(true);
		expect(res.distance).toBeGreaterThan(5_000);
		expect(res.quotes.map((q) => q.serviceType)).toEqual(["scooty", "cab"]);
		for (const q of res.quotes) {
			expect(q.quoteId).toMatch(/^qt_/);
			expect(q.currency).toBe("INR");
			expect(q.eta).toBeNull(); // no dispatch on this node: degrade, do not fail
			expect(q.fareBreakdown).toEqual({
				baseFare: expect.any(Number),
				distanceFare: expect.any(Number),
				timeFare: expect.any(Number),
				surgeMultiplier: 1,
				tax: expect.any(Number),
			});
			for (const amount of [q.totalAmount, q.fareBreakdown.baseFare, q.fareBreakdown.distanceFare, q.fareBreakdown.timeFare, q.fareBreakdown.tax]) {
				expect(Math.round(amount * 100) / 100).toBe(amount); // ≤ 2 decimals
			}
			const expires = Date.parse(q.expiresAt);
			expect(q.expiresAt).toBe(new Date(expires).toISOString());
			// Whole seconds (the token keeps seconds), rounded up: never shorter than the TTL, at most a second longer.
			expect(expires % 1000).toBe(0);
			expect(expires).toBeGreaterThanOrEqual(before + 300_000);
			expect(expires).toBeLessThanOrEqual(Date.now() + 301_000);
		}
		// Top-level distance/duration are the first quote's; the cab is slower on average.
		expect(res.distance).toBe(res.quotes[0].distance);
		expect(res.duration).toBe(res.quotes[0].duration);
		expect(res.quotes[1].totalAmount).toBeGreaterThan(res.quotes[0].totalAmount);
		// The price is the tariff's, computed from the reported distance and duration.
		const scooty = computeFare(parseTariffs(undefined).scooty, res.quotes[0].distance, res.quotes[0].duration, 10);
		expect(res.quotes[0].totalAmount).toBe(scooty.total / 100);
	});

	it("quotes exactly the requested service type", async () => {
		const res = await node.broker.call<EstimateResult, Record<string, unknown>>(
			"pricing.estimate",
			{ pickup: MG_ROAD, drop: KORAMANGALA, serviceType: "cab" },
			asPartner(partnerA),
		);
		expect(res.quotes).toHaveLength(1);
		expect(res.quotes[0].serviceType).toBe("cab");
		expect(res.duration).toBe(res.quotes[0].duration);
	});

	it("refuses bad input with VALIDATION_ERROR and field details", async () => {
		const call = (params: unknown) => node.broker.call("pricing.estimate", params, asPartner(partnerA));
		const badLat = await expectError(call({ pickup: { lat: 91, lng: 77 }, drop: KORAMANGALA }), "VALIDATION_ERROR");
		expect(JSON.stringify(badLat.data)).toContain("pickup.lat");
		await expectError(call({ pickup: { lat: 12, lng: -181 }, drop: KORAMANGALA }), "VALIDATION_ERROR");
		await expectError(call({ pickup: { lat: "12.9", lng: 77 }, drop: KORAMANGALA }), "VALIDATION_ERROR");
		await expectError(call({ pickup: MG_ROAD }), "VALIDATION_ERROR");
		await expectError(call({ pickup: { ...MG_ROAD, address: "x".repeat(501) }, drop: KORAMANGALA }), "VALIDATION_ERROR");
		const unknownType = await expectError(call({ pickup: MG_ROAD, drop: KORAMANGALA, serviceType: "bike" }), "VALIDATION_ERROR");
		expect(JSON.stringify(unknownType.data)).toContain("serviceType");

		const same = await expectError(call({ pickup: MG_ROAD, drop: { lat: MG_ROAD.lat, lng: MG_ROAD.lng } }), "VALIDATION_ERROR", 400);
		expect(same.data).toEqual({ details: [{ field: "drop", message: expect.stringContaining("away from pickup") }] });
		await expectError(call({ pickup: MG_ROAD, drop: destinationPoint(MG_ROAD, 90, 3) }), "VALIDATION_ERROR", 400);

		// Bengaluru → Mumbai is ~850 km; MAX_TRIP_KM is 100.
		const far = await expectError(call({ pickup: MG_ROAD, drop: { lat: 19.076, lng: 72.8777 } }), "VALIDATION_ERROR", 400);
		expect(far.message).toContain("longer than the maximum of 100 km");
		// 90 km straight is 117 km by road (× 1.3): refused on the distance the partner would be charged for.
		await expectError(call({ pickup: MG_ROAD, drop: destinationPoint(MG_ROAD, 0, 90_000) }), "VALIDATION_ERROR", 400);
	});

	it("needs a partner", async () => {
		await expectError(node.broker.call("pricing.estimate", { pickup: MG_ROAD, drop: KORAMANGALA }), "UNAUTHORIZED", 401);
	});

	it("writes nothing to the database", async () => {
		const pg = bed.pg;
		const tables = (
			await pg.query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
		).rows.map((r) => r.table_name);
		expect(tables).toEqual(expect.arrayContaining(["pricing_secrets", "riders", "partners"]));
		// Every row of every table, fingerprinted: an estimate must change none of them.
		const snapshot = async () => {
			const out: Record<string, string> = {};
			for (const t of tables)
				out[t] = (
					await pg.query<{ h: string }>(`SELECT count(*) || ':' || coalesce(md5(string_agg(x::text, ',' ORDER BY x::text)), '') AS h FROM "${t}" x`)
				).rows[0].h;
			return out;
		};
		const before = await snapshot();
		expect(before.pricing_secrets).toBe("0:"); // QUOTE_SIGNING_SECRET is set: nothing generated
		await Promise.all(Array.from({ length: 10 }, () => node.broker.call("pricing.estimate", { pickup: MG_ROAD, drop: KORAMANGALA }, asPartner(partnerA))));
		expect(await snapshot()).toEqual(before);
	});
});

describe("pricing.verifyQuote", () => {
	async function quote(serviceType: "scooty" | "cab", partnerId = partnerA) {
		const res = await node.broker.call<EstimateResult, Record<string, unknown>>(
			"pricing.estimate",
			{ pickup: MG_ROAD, drop: KORAMANGALA, serviceType },
			asPartner(partnerId),
		);
		return { res, q: res.quotes[0] };
	}

	it("honours a valid quote with the quoted price", async () => {
		const { res, q } = await quote("cab");
		const trip = await node.broker.call<PricedTrip, Record<string, unknown>>(
			"pricing.verifyQuote",
			{ quoteId: q.quoteId, serviceType: "cab", pickup: destinationPoint(MG_ROAD, 10, 150), drop: { ...KORAMANGALA, address: "Koramangala" } },
			asPartner(partnerA),
		);
		expect(trip).toEqual({
			serviceType: "cab",
			totalAmount: q.totalAmount,
			totalAmountPaise: Math.round(q.totalAmount * 100),
			currency: "INR",
			fareBreakdown: q.fareBreakdown,
			distance: res.distance,
			duration: res.duration,
			quoteId: q.quoteId,
			// The terms the ride is booked on: the default cab tariff at the quote's surge (none here).
			terms: {
				currency: "INR",
				baseFarePaise: 5000,
				perKmPaise: 1400,
				perMinutePaise: 150,
				minimumFarePaise: 8000,
				taxBasisPoints: 500,
				surgeTenths: Math.round(q.fareBreakdown.surgeMultiplier * 10),
				waitingPerMinutePaise: 200,
				freeWaitingSeconds: 180,
				cancellationFeePaise: 5000,
			},
		});
	});

	it("refuses garbled, foreign, mismatched and far-away quotes as QUOTE_INVALID", async () => {
		const { q } = await quote("cab");
		const verify = (params: Record<string, unknown>, partnerId = partnerA) =>
			node.broker.call(
				"pricing.verifyQuote",
				{ quoteId: q.quoteId, serviceType: "cab", pickup: MG_ROAD, drop: KORAMANGALA, ...params },
				asPartner(partnerId),
			);

		const garbled = await expectError(verify({ quoteId: "qt_nonsense" }), "QUOTE_INVALID", 422);
		const foreign = await expectError(verify({}, partnerB), "QUOTE_INVALID", 422);
		expect(foreign.message).toBe(garbled.message); // a foreign quote reads exactly like an unknown one
		expect(foreign.data).toEqual(garbled.data);
		await expectError(verify({ quoteId: q.quoteId.slice(0, -4) + "AAAA" }), "QUOTE_INVALID", 422);
		await expectError(verify({ serviceType: "scooty" }), "QUOTE_INVALID", 422);
		await expectError(verify({ pickup: destinationPoint(MG_ROAD, 10, 250) }), "QUOTE_INVALID", 422);
		await expectError(verify({ drop: destinationPoint(KORAMANGALA, 200, 201) }), "QUOTE_INVALID", 422);
		// Bad shapes are still validation errors.
		await expectError(verify({ quoteId: 42 }), "VALIDATION_ERROR");
	});

	it("reports an expired genuine quote as QUOTE_EXPIRED, and a forged expired one as QUOTE_INVALID", async () => {
		const fare = computeFare(parseTariffs(undefined).scooty, 6_000, 900, 10);
		const claims = {
			partnerId: partnerA,
			serviceType: "scooty" as const,
			pickup: MG_ROAD,
			drop: KORAMANGALA,
			distance: 6_000,
			duration: 900,
			fare,
			expiresAt: Date.now() - 1_000,
		};
		const expired = encodeQuote(claims, new QuoteKeyring(SECRET));
		const params = { quoteId: expired, serviceType: "scooty", pickup: MG_ROAD, drop: KORAMANGALA };
		await expectError(node.broker.call("pricing.verifyQuote", params, asPartner(partnerA)), "QUOTE_EXPIRED", 422);
		await expectError(node.broker.call("pricing.verifyQuote", params, asPartner(partnerB)), "QUOTE_INVALID", 422);
		const forged = encodeQuote(claims, new QuoteKeyring(`forger-${"y".repeat(40)}`));
		await expectError(node.broker.call("pricing.verifyQuote", { ...params, quoteId: forged }, asPartner(partnerA)), "QUOTE_INVALID", 422);
	});
});

describe("pricing.quote", () => {
	it("prices a trip at the current tariff without a quote id", async () => {
		const trip = await node.broker.call<PricedTrip, Record<string, unknown>>("pricing.quote", {
			serviceType: "scooty",
			pickup: MG_ROAD,
			drop: KORAMANGALA,
		});
		const est = await node.broker.call<EstimateResult, Record<string, unknown>>(
			"pricing.estimate",
			{ pickup: MG_ROAD, drop: KORAMANGALA, serviceType: "scooty" },
			asPartner(partnerA),
		);
		expect(trip.quoteId).toBeUndefined();
		expect(trip.totalAmount).toBe(est.quotes[0].totalAmount);
		expect(trip.totalAmountPaise).toBe(Math.round(trip.totalAmount * 100));
		expect(trip.distance).toBe(est.distance);
		await expectError(node.broker.call("pricing.quote", { serviceType: "scooty", pickup: MG_ROAD, drop: MG_ROAD }), "VALIDATION_ERROR", 400);
	});
});

describe("signing secret from pricing_secrets", () => {
	it("is generated once and shared by pricing instances on one database", async () => {
		const db2 = await createTestDatabase("pricingsecret");
		// Blank reads as unset: these instances have no configured secret.
		const noSecret = { QUOTE_SIGNING_SECRET: "" };
		let one: TestNode | undefined;
		let two: TestNode | undefined;
		try {
			// Two independent brokers (two "instances") starting together on one database.
			[one, two] = await Promise.all([
				startTestNode({ databaseUrl: db2.url, services: ["pricing"], env: noSecret }),
				startTestNode({ databaseUrl: db2.url, services: ["pricing"], env: noSecret }),
			]);
			const pg = await connect(db2.url);
			try {
				const { rows } = await pg.query<{ name: string; secret: string }>("SELECT name, secret FROM pricing_secrets");
				expect(rows).toHaveLength(1);
				expect(rows[0].secret.length).toBeGreaterThanOrEqual(32);
			} finally {
				await pg.end();
			}
			const est = await one.broker.call<EstimateResult, Record<string, unknown>>(
				"pricing.estimate",
				{ pickup: MG_ROAD, drop: KORAMANGALA, serviceType: "cab" },
				asPartner("ptn_x"),
			);
			const trip = await two.broker.call<PricedTrip, Record<string, unknown>>(
				"pricing.verifyQuote",
				{ quoteId: est.quotes[0].quoteId, serviceType: "cab", pickup: MG_ROAD, drop: KORAMANGALA },
				asPartner("ptn_x"),
			);
			expect(trip.totalAmount).toBe(est.quotes[0].totalAmount);
			// A quote signed with the configured secret of the other test node is not accepted here.
			const other = await node.broker.call<EstimateResult, Record<string, unknown>>(
				"pricing.estimate",
				{ pickup: MG_ROAD, drop: KORAMANGALA, serviceType: "cab" },
				asPartner("ptn_x"),
			);
			await expectError(
				two.broker.call(
					"pricing.verifyQuote",
					{ quoteId: other.quotes[0].quoteId, serviceType: "cab", pickup: MG_ROAD, drop: KORAMANGALA },
					asPartner("ptn_x"),
				),
				"QUOTE_INVALID",
			);
		} finally {
			await one?.stop();
			await two?.stop();
			await db2.drop();
		}
	});

	it("refuses ROUTING=osrm at start", async () => {
		// Another spelling of the URL gets its own (never used) pool, so the refused start leaks nothing into the main node's.
		const url = db.url.replace("127.0.0.1", "localhost");
		await expect(startTestNode({ databaseUrl: url, services: ["pricing"], env: { ROUTING: "osrm", OSRM_URL: "http://127.0.0.1:9" } })).rejects.toThrow(
			/ROUTING=osrm is not implemented/,
		);
	});
});
