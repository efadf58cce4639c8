import { Webhook } from "standardwebhooks";
import type { RotatedWebhookSecret } from "../../../contracts/partners";
import { createRide, move, startWebhookTestbed, waitFor, type ReceivedWebhook, type WebhookTestbed } from "../../helpers/webhooks";

/**
 * rotate-webhook-secret through the real services (partners, orders,
 * notifications) and a real partner endpoint: during the grace period every
 * webhook carries a signature per secret, so the standardwebhooks package
 * verifies it with the old secret and with the new one; once the grace period
 * is over only the new one verifies. notifications had the old secret cached
 * (60 s): partners.changed makes it fetch again.
 */

let bed: WebhookTestbed;

beforeAll(async () => {
	bed = await startWebhookTestbed("whrotation", {});
}, 60_000);

afterAll(async () => {
	await bed?.stop();
});

async function firstWebhookOfNewRide(): Promise<ReceivedWebhook> {
	const ride = await createRide(bed.node.broker, bed.partner, bed.endpoint.url);
	await move(bed.node.broker, ride, "accepted");
	return waitFor(`a webhook for ${ride.orderId}`, () => bed.hooksOf(ride)[0]);
}

const verifies = (secret: string, hook: ReceivedWebhook): boolean => {
	try {
		new Webhook(secret).verify(hook.raw, hook.headers);
		return true;
	} catch {
		return false;
	}
};

const rotate = (graceSeconds: number) =>
	bed.node.broker.call<RotatedWebhookSecret, { partnerId: string; mode: string; graceSeconds: number }>("partners.rotateWebhookSecret", {
		partnerId: bed.partner.partnerId,
		mode: "test",
		graceSeconds,
	});

it("signs with both secrets during the grace period, then with the new one only", async () => {
	const original = bed.partner.webhookSecret;
	// notifications now holds the original secret in its cache.
	const before = await firstWebhookOfNewRide();
	expect(before.headers["webhook-signature"].split(" ")).toHaveLength(1);
	expect(verifies(original, before)).toBe(true);

	const first = await rotate(3_600);
	expect(first.webhookSecret).not.toBe(original);
	expect(Date.parse(first.previousValidUntil)).toBeGreaterThan(Date.now() + 3_000_000);
	const during = await firstWebhookOfNewRide();
	expect(during.headers["webhook-signature"].split(" ")).toHaveLength(2);
	expect(verifies(original, during)).toBe(true);
	expect(verifies(first.webhookSecret, during)).toBe(true);

	// A grace of 0 ends every older secret now: only the newest signs.
	const second = await rotate(0);
	const after = await firstWebhookOfNewRide();
	expect(after.headers["webhook-signature"].split(" ")).toHaveLength(1);
	expect(verifies(second.webhookSecret, after)).toBe(true);
	expect(verifies(first.webhookSecret, after)).toBe(false);
	expect(verifies(original, after)).toBe(false);
});

it("refuses a malformed secret or an unknown partner, changing nothing", async () => {
	const call = (params: Record<string, unknown>) => bed.node.broker.call("partners.rotateWebhookSecret", params);
	const count = async () =>
		(await bed.pg.query("SELECT count(*)::int AS n FROM webhook_secrets WHERE partner_id = $1", [bed.partner.partnerId])).rows[0].n as number;
	const before = await count();
	await expect(call({ partnerId: bed.partner.partnerId, mode: "test", webhookSecret: "whsec_short" })).rejects.toMatchObject({
		code: 400,
		type: "VALIDATION_ERROR",
	});
	await expect(call({ partnerId: "ptn_nobody", mode: "test" })).rejects.toMatchObject({ code: 404 });
	await expect(call({ partnerId: bed.partner.partnerId, mode: "test", graceSeconds: -1 })).rejects.toMatchObject({ code: 422 });
	await expect(call({ partnerId: bed.partner.partnerId })).rejects.toMatchObject({ code: 422 });
	await expect(call({ partnerId: bed.partner.partnerId, mode: "both" })).rejects.toMatchObject({ code: 422 });
	expect(await count()).toBe(before);
});
