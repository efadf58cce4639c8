import { Webhook } from "standardwebhooks";
import { newWebhookSecret } from "../../../lib/secrets";
import { signature, signedHeaders, signingKey, webhookBody } from "../../../services/notifications/signing";

/** The KeyObject cache of signing.ts: made once per secret, never shared between secrets (partners). */
describe("webhook signing keys (cached KeyObjects)", () => {
	it("makes one key per secret and reuses it", () => {
		const secret = newWebhookSecret();
		expect(signingKey(secret)).toBe(signingKey(secret));
		expect(signingKey(secret).export()).toEqual(Buffer.from(secret.slice("whsec_".length), "base64"));
	});

	it("never signs one partner's webhook with another partner's key, however the calls interleave", async () => {
		const secrets = Array.from({ length: 20 }, () => newWebhookSecret());
		const body = webhookBody({ eventId: "evt_1", orderId: "ord_1", status: "accepted", sequence: 1, occurredAt: "2026-11-22T10:15:30.123Z" }, "test");
		const ts = 1_790_000_000;
		const results = await Promise.all(
			Array.from({ length: 400 }, async (_, i) => {
				await new Promise((r) => setImmediate(r));
				const secret = secrets[(i * 7) % secrets.length];
				return { secret, sig: signature(secret, `evt_${i}`, ts, body), id: `evt_${i}` };
			}),
		);
		for (const { secret, sig, id } of results) {
			expect(sig).toBe(new Webhook(secret).sign(id, new Date(ts * 1000), body.toString("utf8")));
			for (const other of secrets) if (other !== secret) expect(sig).not.toBe(new Webhook(other).sign(id, new Date(ts * 1000), body.toString("utf8")));
		}
	});

	it("signs with every secret of a rotation, each with its own key", () => {
		const [current, previous] = [newWebhookSecret(), newWebhookSecret()];
		const body = Buffer.from('{"a":1}');
		const now = Date.now();
		const headers = signedHeaders(
			[{ secret: current }, { secret: previous, validUntil: new Date(now + 60_000).toISOString() }],
			"evt_r",
			body,
			now,
			"test",
		);
		expect(() => new Webhook(current).verify(body.toString(), { ...headers })).not.toThrow();
		expect(() => new Webhook(previous).verify(body.toString(), { ...headers })).not.toThrow();
		expect(() => new Webhook(newWebhookSecret()).verify(body.toString(), { ...headers })).toThrow();
	});
});
