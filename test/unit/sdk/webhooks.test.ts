import fc from "fast-check";
import { Webhook } from "standardwebhooks";
import { webhooks, WebhookVerificationError, type WebhookEvent } from "../../../packages/sdk/src";

/**
 * The SDK's webhook verification against the reference Standard Webhooks
 * library: what it signs, the SDK accepts; what it refuses, the SDK refuses.
 */

const secret = `whsec_${Buffer.from("a test secret of 24 bytes").toString("base64")}`;
const oldSecret = `whsec_${Buffer.from("the previous secret bytes").toString("base64")}`;
const now = new Date("2026-12-01T10:00:00Z");
const nowSeconds = Math.floor(now.getTime() / 1000);

function event(eventId = "evt_1", mode: "test" | "live" = "test"): WebhookEvent {
	return { eventId, orderId: "ord_1", status: "accepted", sequence: 2, occurredAt: now.toISOString(), mode, metadata: { partnerRef: "b-1" } };
}

/** A delivery signed by the reference library with each of `secrets` (the platform signs with every valid secret during a rotation). */
function signed(body: string, id: string, secrets: string[] = [secret], at: Date = now) {
	const signature = secrets.map((s) => new Webhook(s).sign(id, at, body)).join(" ");
	return { "webhook-id": id, "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": signature };
}

function reason(fn: () => unknown): string {
	try {
		fn();
	} catch (err) {
		expect(err).toBeInstanceOf(WebhookVerificationError);
		return (err as WebhookVerificationError).reason;
	}
	return "verified";
}

describe("webhooks.verify", () => {
	const body = JSON.stringify(event());

	it("accepts what the reference library signs and returns the typed event", () => {
		const verified = webhooks.verify(body, signed(body, "evt_1"), secret, { now });
		expect(verified).toEqual(event());
		expect(verified.status).toBe("accepted");
	});

	it("takes the raw bytes as a Buffer, and headers as Node's record (any case) or a fetch Headers", () => {
		const headers = signed(body, "evt_1");
		expect(webhooks.verify(Buffer.from(body), headers, secret, { now }).eventId).toBe("evt_1");
		const shouting = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), [v]]));
		expect(webhooks.verify(body, shouting, secret, { now }).eventId).toBe("evt_1");
		expect(webhooks.verify(new Uint8Array(Buffer.from(body)), new Headers(headers), secret, { now }).eventId).toBe("evt_1");
	});

	it("during a rotation either secret verifies the doubly signed webhook; a list of secrets verifies a singly signed one", () => {
		const both = signed(body, "evt_1", [secret, oldSecret]);
		expect(both["webhook-signature"].split(" ")).toHaveLength(2);
		expect(webhooks.verify(body, both, secret, { now }).eventId).toBe("evt_1");
		expect(webhooks.verify(body, both, oldSecret, { now }).eventId).toBe("evt_1");
		expect(webhooks.verify(body, signed(body, "evt_1", [oldSecret]), [secret, oldSecret], { now }).eventId).toBe("evt_1");
		const other = `whsec_${Buffer.from("somebody else's secret").toString("base64")}`;
		expect(reason(() => webhooks.verify(body, both, other, { now }))).toBe("NO_MATCHING_SIGNATURE");
	});

	it("refuses a changed body, id or timestamp", () => {
		const headers = signed(body, "evt_1");
		expect(reason(() => webhooks.verify(body.replace('"accepted"', '"dropped"'), headers, secret, { now }))).toBe("NO_MATCHING_SIGNATURE");
		expect(reason(() => webhooks.verify(body, { ...headers, "webhook-id": "evt_2" }, secret, { now }))).toBe("NO_MATCHING_SIGNATURE");
		const later = String(nowSeconds + 1);
		expect(reason(() => webhooks.verify(body, { ...headers, "webhook-timestamp": later }, secret, { now }))).toBe("NO_MATCHING_SIGNATURE");
	});

	it("refuses timestamps outside the tolerance either way (default 5 minutes, or the one given)", () => {
		const at = (s: number) => signed(body, "evt_1", [secret], new Date((nowSeconds + s) * 1000));
		expect(reason(() => webhooks.verify(body, at(-299), secret, { now }))).toBe("verified");
		expect(reason(() => webhooks.verify(body, at(-301), secret, { now }))).toBe("TIMESTAMP_TOO_OLD");
		expect(reason(() => webhooks.verify(body, at(301), secret, { now }))).toBe("TIMESTAMP_TOO_NEW");
		expect(reason(() => webhooks.verify(body, at(-30), secret, { now, toleranceSeconds: 10 }))).toBe("TIMESTAMP_TOO_OLD");
		const headers = { ...at(0), "webhook-timestamp": "12e5" };
		expect(reason(() => webhooks.verify(body, headers, secret, { now }))).toBe("INVALID_TIMESTAMP");
	});

	it("refuses missing headers, unknown signature versions, a body of another event, and the other mode", () => {
		const headers = signed(body, "evt_1");
		expect(reason(() => webhooks.verify(body, { ...headers, "webhook-signature": undefined }, secret, { now }))).toBe("MISSING_HEADERS");
		const v2 = headers["webhook-signature"].replace("v1,", "v2,");
		expect(reason(() => webhooks.verify(body, { ...headers, "webhook-signature": v2 }, secret, { now }))).toBe("NO_MATCHING_SIGNATURE");
		const other = JSON.stringify(event("evt_9"));
		expect(reason(() => webhooks.verify(other, signed(other, "evt_1"), secret, { now }))).toBe("INVALID_PAYLOAD");
		expect(reason(() => webhooks.verify("not json", signed("not json", "evt_1"), secret, { now }))).toBe("INVALID_PAYLOAD");
		expect(reason(() => webhooks.verify(body, headers, secret, { now, mode: "live" }))).toBe("MODE_MISMATCH");
		expect(webhooks.verify(body, headers, secret, { now, mode: "test" }).mode).toBe("test");
		expect(reason(() => webhooks.verify(body, headers, "whsec_", { now }))).toBe("INVALID_SECRET");
	});

	it("agrees with the reference library on any body and id, and on any one changed signature character", () => {
		// The last base64 character before "=" carries two padding bits: flipping only those is a case of its own.
		const padded = signed(body, "evt_1", [secret], new Date());
		const sig = padded["webhook-signature"];
		const last = sig.length - 2;
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		const samebytes = sig.slice(0, last) + alphabet[alphabet.indexOf(sig[last]) ^ 1] + sig.slice(last + 1);
		expect(Buffer.from(samebytes.slice(3), "base64")).toEqual(Buffer.from(sig.slice(3), "base64"));
		expect(reason(() => webhooks.verify(body, { ...padded, "webhook-signature": samebytes }, secret))).toBe("NO_MATCHING_SIGNATURE");

		fc.assert(
			fc.property(fc.string(), fc.stringMatching(/^evt_[A-Za-z0-9]{1,20}$/), fc.nat(), (note, id, flip) => {
				const raw = JSON.stringify({ ...event(id), metadata: { note } });
				const headers = signed(raw, id, [secret], new Date());
				expect(webhooks.verify(raw, headers, secret).metadata).toEqual({ note });
				const sig = headers["webhook-signature"];
				const at = 3 + (flip % (sig.length - 3));
				const changed = { ...headers, "webhook-signature": sig.slice(0, at) + (sig[at] === "A" ? "B" : "A") + sig.slice(at + 1) };
				const verdict = (fn: () => unknown) => {
					try {
						fn();
						return true;
					} catch {
						return false;
					}
				};
				// Both refuse, also a change of base64 padding bits only (same bytes, not the text that was sent).
				expect([verdict(() => webhooks.verify(raw, changed, secret)), verdict(() => new Webhook(secret).verify(raw, changed))]).toEqual([false, false]);
			}),
			{ numRuns: 200 },
		);
	});
});
