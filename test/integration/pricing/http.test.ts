import { randomBytes } from "node:crypto";
import { PartnerApi } from "../../helpers/http";
import { startTestbed, type Testbed } from "../../helpers/testbed";

/** POST /ride/fare-estimate through the real gateway over HTTP. */

let bed: Testbed;
let http: PartnerApi;
const apiKey = `rk_test_${randomBytes(24).toString("base64url")}`;

beforeAll(async () => {
	bed = await startTestbed("pricinghttp", {
		services: ["partners", "pricing", "riders", "gateway"],
		env: { BOOTSTRAP_PARTNER_KEY: apiKey, QUOTE_SIGNING_SECRET: `http-it-${"q".repeat(40)}` },
	});
	if (!bed.node.baseUrl) throw new Error("the gateway did not report an address");
	http = new PartnerApi(bed.node.baseUrl, apiKey);
});

afterAll(async () => {
	await bed?.stop();
});

describe("POST /ride/fare-estimate", () => {
	it("answers 200 with one quote per service type", async () => {
		const res = await http.post<any>("/ride/fare-estimate", { pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } });
		expect(res.status).toBe(200);
		expect(res.body).toMatchObject({ distance: expect.any(Number), duration: expect.any(Number) });
		expect(res.body.quotes.map((q: { serviceType: string }) => q.serviceType)).toEqual(["scooty", "cab"]);
		expect(res.body.quotes[0]).toMatchObject({
			quoteId: expect.stringMatching(/^qt_/),
			totalAmount: expect.any(Number),
			currency: "INR",
			eta: null,
			expiresAt: expect.any(String),
			fareBreakdown: { baseFare: 20, surgeMultiplier: 1 },
		});
	});

	it("answers 400 VALIDATION_ERROR for a bad latitude, equal points and an unknown service type", async () => {
		const cases = [
			{ body: { pickup: { lat: 95, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } }, field: "pickup.lat" },
			{ body: { pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9716, lng: 77.5946 } }, field: "drop" },
			{ body: { pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 }, serviceType: "bike" }, field: "serviceType" },
		];
		for (const c of cases) {
			const res = await http.post<any>("/ride/fare-estimate", c.body);
			expect(res.status).toBe(400);
			expect(res.body).toMatchObject({ code: "VALIDATION_ERROR", retryable: false });
			expect(res.body.details.map((d: { field: string }) => d.field)).toContain(c.field);
		}
	});

	it("answers 401 without a valid key", async () => {
		const res = await new PartnerApi(http.baseUrl, "nope").post("/ride/fare-estimate", {
			pickup: { lat: 12.9716, lng: 77.5946 },
			drop: { lat: 12.9352, lng: 77.6245 },
		});
		expect(res.status).toBe(401);
		expect(res.body.code).toBe("UNAUTHORIZED");
	});
});
