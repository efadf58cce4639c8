import { Webhook } from "standardwebhooks";
import { newWebhookSecret } from "../../../lib/secrets";
import { signedHeaders, signature, webhookBody } from "../../../services/notifications/signing";
import { IngestWindow } from "../../../services/notifications/ingest-window";

describe("webhook signing (Standard Webhooks)", () => {
	const secret = newWebhookSecret();
	const payload = {
		metadata: { partnerRef: "b-1" },
		status: "accepted",
		eta: 120,
		orderId: "ord_1",
		sequence: 2,
		eventId: "evt_abc",
		occurredAt: "2026-11-22T10:15:30.123Z",
	};

	it("is verified by the standardwebhooks package, as a partner would", () => {
		const body = webhookBody(payload, "test");
		const headers = signedHeaders([{ secret }], "evt_abc", body, Date.now(), "test");
		const verified = new Webhook(secret).verify(body.toString("utf8"), { ...headers }) as Record<string, unknown>;
		expect(verified).toEqual({ ...payload, mode: "test" });
		expect(headers["webhook-id"]).toBe("evt_abc");
		expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
	});

	it("matches the package's own signature byte for byte", () => {
		const body = Buffer.from('{"a":"é"}');
		const ts = 1_790_000_000;
		expect(signature(secret, "evt_1", ts, body)).toBe(new Webhook(secret).sign("evt_1", new Date(ts * 1000), body.toString("utf8")));
	});

	it("fails verification with another secret, a changed body, or another id", () => {
		const body = webhookBody(payload, "test");
		const headers = signedHeaders([{ secret }], "evt_abc", body, Date.now(), "test");
		expect(() => new Webhook(newWebhookSecret()).verify(body.toString(), { ...headers })).toThrow();
		expect(() => new Webhook(secret).verify(body.toString().replace("accepted", "arrived"), { ...headers })).toThrow();
		expect(() => new Webhook(secret).verify(body.toString(), { ...headers, "webhook-id": "evt_other" })).toThrow();
	});

	it("regenerates the timestamp per try while the id stays the event id", () => {
		const body = webhookBody(payload, "test");
		const a = signedHeaders([{ secret }], "evt_abc", body, 1_790_000_000_000, "test");
		const b = signedHeaders([{ secret }], "evt_abc", body, 1_790_000_005_000, "test");
		expect(a["webhook-id"]).toBe(b["webhook-id"]);
		expect(Number(b["webhook-timestamp"]) - Number(a["webhook-timestamp"])).toBe(5);
		expect(a["webhook-signature"]).not.toBe(b["webhook-signature"]);
	});

	it("during a rotation signs with every secret still valid: the standardwebhooks package verifies with either", () => {
		const oldSecret = newWebhookSecret();
		const body = webhookBody(payload, "test");
		const now = 1_790_000_000_000;
		const secrets = [
			{ secret, validUntil: null },
			{ secret: oldSecret, validUntil: new Date(now + 60_000).toISOString() },
		];
		const headers = signedHeaders(secrets, "evt_abc", body, now, "test");
		const parts = headers["webhook-signature"].split(" ");
		expect(parts).toHaveLength(2);
		expect(parts[0]).toBe(signature(secret, "evt_abc", now / 1000, body));
		expect(parts[1]).toBe(signature(oldSecret, "evt_abc", now / 1000, body));
		// The package checks the timestamp against its own clock: verify at `now`.
		jest.useFakeTimers({ now });
		try {
			expect(new Webhook(secret).verify(body.toString(), { ...headers })).toEqual({ ...payload, mode: "test" });
			expect(new Webhook(oldSecret).verify(body.toString(), { ...headers })).toEqual({ ...payload, mode: "test" });
			expect(() => new Webhook(newWebhookSecret()).verify(body.toString(), { ...headers })).toThrow();
		} finally {
			jest.useRealTimers();
		}
	});

	it("after the grace period signs with the new secret only", () => {
		const oldSecret = newWebhookSecret();
		const body = webhookBody(payload, "test");
		const now = 1_790_000_000_000;
		const secrets = [
			{ secret, validUntil: null },
			{ secret: oldSecret, validUntil: new Date(now).toISOString() },
		];
		const headers = signedHeaders(secrets, "evt_abc", body, now, "test");
		expect(headers["webhook-signature"]).toBe(signature(secret, "evt_abc", now / 1000, body));
		expect(() => signedHeaders([{ secret: oldSecret, validUntil: new Date(now).toISOString() }], "evt_abc", body, now, "test")).toThrow(
			/No webhook secret/,
		);
	});

	it("puts the body's fields in the contract's order (jsonb does not keep it)", () => {
		const keys = Object.keys(JSON.parse(webhookBody({ ...payload, extra: 1 }, "test").toString()));
		expect(keys).toEqual(["eventId", "orderId", "status", "sequence", "occurredAt", "mode", "eta", "metadata", "extra"]);
	});
});

describe("ingest window over ride_events.position", () => {
	it("starts from the seed and only trusts observations older than the window", () => {
		const w = new IngestWindow(10_000, 5);
		expect(w.lowerBound(0)).toBe(5);
		w.observe(1_000, 40);
		w.observe(2_000, 90);
		expect(w.lowerBound(10_999)).toBe(5);
		expect(w.lowerBound(11_000)).toBe(40);
		expect(w.lowerBound(12_500)).toBe(90);
		expect(w.size).toBe(0);
	});

	it("never moves backwards", () => {
		const w = new IngestWindow(1_000, 100);
		w.observe(0, 50);
		w.observe(10, 30);
		expect(w.lowerBound(5_000)).toBe(100);
	});

	it("keeps a late-committing row in range: its position is above everything ingested before it was handed out", () => {
		const w = new IngestWindow(60_000, 0);
		// t=0: rows 1..10 ingested. t=1000: row 11 handed out (transaction still open); rows 12..20 commit and are ingested.
		w.observe(0, 10);
		w.observe(1_500, 20);
		// Row 11 commits at t=30 s (well inside the window): the scan still starts below it.
		expect(w.lowerBound(30_000)).toBeLessThan(11);
		// Once the window has passed, the bound may move past it (it was ingested by then).
		expect(w.lowerBound(61_500)).toBe(20);
	});
});
