import { createServer } from "node:http";
import { webhooks, WebhookVerificationError } from "@ride/sdk";

// Your webhook secret of the mode this endpoint serves (live in production).
const secret = process.env.RIDE_WEBHOOK_SECRET!;

createServer((req, res) => {
	const chunks: Buffer[] = [];
	req.on("data", (chunk: Buffer) => chunks.push(chunk));
	req.on("end", () => {
		try {
			// The raw bytes, before any JSON parsing: the signature covers them.
			const event = webhooks.verify(Buffer.concat(chunks), req.headers, secret, { mode: "live" });
			console.log(`${event.orderId} #${event.sequence} ${event.status}`); // de-duplicate on event.eventId
			res.writeHead(204).end();
		} catch (err) {
			res.writeHead(err instanceof WebhookVerificationError ? 400 : 500).end();
		}
	});
}).listen(8443);
