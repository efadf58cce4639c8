import { onlineDriver } from "../../helpers/rides";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { waitFor } from "../../helpers/wait";
import { createPartner } from "../../helpers/webhooks";
import { destinationPoint } from "../../../lib/geo";
import type { EstimateResult, PricedTrip } from "../../../contracts/pricing";

/**
 * ETA and surge from the real dispatch service: drivers come online through
 * dispatch's driver actions, demand comes from real orders that stay
 * `searching`, and pricing asks `dispatch.supplyDemand` for both.
 */

const PICKUP = { lat: 12.9716, lng: 77.5946 };
const DROP = { lat: 12.9352, lng: 77.6245 };

let bed: Testbed;
let partnerId: string;

const estimate = () =>
	bed.node.broker.call<EstimateResult, Record<string, unknown>>("pricing.estimate", { pickup: PICKUP, drop: DROP }, { meta: { partnerId } });

/** The first estimate in which `done` holds (polled every 100 ms, for up to 20 s). */
const estimateOnce = (what: string, done: (r: EstimateResult) => boolean) =>
	waitFor(
		what,
		async () => {
			const r = await estimate();
			return done(r) ? r : null;
		},
		20_000,
		100,
	);

beforeAll(async () => {
	bed = await startTestbed("pricingdispatch", {
		services: ["partners", "pricing", "riders", "orders", "dispatch"],
		env: {
			QUOTE_SIGNING_SECRET: `dispatch-it-${"d".repeat(40)}`,
			SUPPLY_DEMAND_CACHE_MS: "0", // every estimate asks dispatch afresh
			SURGE_MAX: "2",
			DISPATCH_TIMEOUT_MS: "600000", // the rides must stay searching for the whole test
		},
	});
	partnerId = (await createPartner(bed.node.broker, "Surge")).partnerId;
});

afterAll(async () => {
	await bed?.stop();
});

it("has no ETA and no surge while nobody is around", async () => {
	const res = await estimate();
	expect(res.quotes.map((q) => [q.serviceType, q.eta, q.fareBreakdown.surgeMultiplier])).toEqual([
		["scooty", null, 1],
		["cab", null, 1],
	]);
});

it("reports the ETA of an available driver of that type", async () => {
	await onlineDriver(bed.node.broker, PICKUP, 800, "scooty");
	const res = await estimateOnce("a scooty ETA", (r) => r.quotes[0].eta !== null);
	const [scooty, cab] = res.quotes;
	expect(Number.isInteger(scooty.eta)).toBe(true);
	expect(scooty.eta).toBeGreaterThan(0);
	expect(cab.eta).toBeNull();
});

it("surges the service type whose demand exceeds its supply, up to SURGE_MAX", async () => {
	const calm = (await estimate()).quotes[1];
	for (let i = 0; i < 2; i++) {
		await bed.node.broker.call(
			"orders.create",
			{
				user: { name: `Rider ${i}`, phone: `+91981234560${i}` },
				serviceType: "cab",
				pickup: destinationPoint(PICKUP, i * 90, 300),
				drop: DROP,
				webhookURL: "http://127.0.0.1:9/hooks",
			},
			{ meta: { partnerId } },
		);
	}
	const res = await estimateOnce("cab surge", (r) => r.quotes[1].fareBreakdown.surgeMultiplier > 1);
	const [scooty, cab] = res.quotes;
	expect(cab.fareBreakdown.surgeMultiplier).toBe(2); // two cab requests, no cab at all: maximum shortage
	expect(cab.totalAmount).toBeGreaterThan(calm.totalAmount);
	expect(scooty.fareBreakdown.surgeMultiplier).toBe(1); // the scooty driver covers scooty demand (none)

	// The surged price is what create-order is charged without a quote, and what a quote honours.
	const trip = await bed.node.broker.call<PricedTrip, Record<string, unknown>>("pricing.quote", { serviceType: "cab", pickup: PICKUP, drop: DROP });
	expect(trip.fareBreakdown.surgeMultiplier).toBe(2);
	const honoured = await bed.node.broker.call<PricedTrip, Record<string, unknown>>(
		"pricing.verifyQuote",
		{ quoteId: cab.quoteId, serviceType: "cab", pickup: PICKUP, drop: DROP },
		{ meta: { partnerId } },
	);
	expect(honoured.totalAmount).toBe(cab.totalAmount);
});
