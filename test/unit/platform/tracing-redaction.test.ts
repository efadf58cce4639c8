import { buildBrokerConfig } from "../../../moleculer.config";
import { createTraceRedactor, REDACTED } from "../../../lib/trace-redaction";
import { readSettings } from "../../../lib/settings";

describe("trace redaction (lib/trace-redaction.ts)", () => {
	const r = createTraceRedactor();

	test("keeps allow-listed ids and enumerations, redacts every other value but keeps its key", () => {
		const out = r.params({
			apiKey: "pk_live_abcdef0123456789",
			orderId: "ord_123",
			otp: "4821",
			serviceType: "cab",
			user: { name: "Asha Rao", phone: "+919812345678" },
			pickup: { lat: 12.97, lng: 77.59, address: "MG Road" },
			webhookURL: "https://partner.example.com/hooks?token=abc",
			webhookSecret: "whsec_c2VjcmV0",
			eventIds: ["ev_1", "ev_2"],
		});
		expect(out).toEqual({
			apiKey: REDACTED,
			orderId: "ord_123",
			otp: REDACTED,
			serviceType: "cab",
			user: { name: REDACTED, phone: REDACTED },
			pickup: { lat: REDACTED, lng: REDACTED, address: REDACTED },
			webhookURL: REDACTED,
			webhookSecret: REDACTED,
			eventIds: ["ev_1", "ev_2"],
		});
	});

	test("an allow-listed name never lets a nested secret through; objects that are not plain data are redacted whole", () => {
		expect(r.params({ orderId: { apiKey: "k" } })).toEqual({ orderId: { apiKey: REDACTED } });
		expect(
			r.params({
				req: new (class Req {
					headers = { authorization: "Bearer k" };
				})(),
			}),
		).toEqual({ req: REDACTED });
		expect(r.params({ blob: Buffer.from("secret") })).toEqual({ blob: REDACTED });
		expect(r.params("a bare string param")).toBe(REDACTED);
		const deep = { a: { b: { c: { d: { e: { orderId: "x" } } } } } };
		expect(JSON.stringify(r.params(deep))).not.toContain('"x"');
	});

	test("meta keeps allow-listed scalar keys only", () => {
		expect(r.meta({ partnerId: "ptr_1", requestId: "req_1", idempotencyKey: "booking-1", $statusCode: 201, apiKey: "k" })).toEqual({
			partnerId: "ptr_1",
			requestId: "req_1",
		});
		expect(r.meta(undefined)).toBeUndefined();
	});

	test("TRACING_TAGS_ALLOW adds names, but never a secret-looking one", () => {
		const wider = createTraceRedactor(readSettings({ TRACING_TAGS_ALLOW: "rating, apiKey ,webhookSecret,otp,phone" }).tracingTagsAllow);
		expect(wider.params({ rating: 5, apiKey: "k", webhookSecret: "s", otp: "1234", phone: "+91" })).toEqual({
			rating: 5,
			apiKey: REDACTED,
			webhookSecret: REDACTED,
			otp: REDACTED,
			phone: REDACTED,
		});
	});

	test("the broker config installs the redacting tags for actions and events, and errors without their data", () => {
		const cfg = buildBrokerConfig({ TRACING: "true", TRACING_EXPORTER: "Event", METRICS_PORT: "0" });
		const tracing = cfg.tracing as { tags: { action: (ctx: unknown, ...res: unknown[]) => unknown; event: unknown }; errorFields: string[] };
		const ctx = { params: { apiKey: "k_123", orderId: "ord_1" }, meta: { requestId: "r1", partnerId: "p1" } };
		expect(tracing.tags.action(ctx)).toEqual({ params: { apiKey: REDACTED, orderId: "ord_1" }, meta: { requestId: "r1", partnerId: "p1" } });
		// The call at the end of the span (with the response) adds nothing: responses hold keys and OTPs too.
		expect(tracing.tags.action(ctx, { apiKey: "k_123" })).toEqual({});
		expect(tracing.tags.event).toBe(tracing.tags.action);
		expect(tracing.errorFields).not.toContain("data");
	});
});
