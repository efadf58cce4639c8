import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createWebhookClient, type WebhookClient } from "../../../services/notifications/webhook-client";

/**
 * The webhook client against a local HTTP server whose answers start in time
 * but whose body never finishes: the status line the partner sent within the
 * deadline decides the try (API.md: "any 2xx within 10 s counts as
 * delivered"; a Retry-After on 429/503 is honoured), the slow body only cuts
 * the kept snippet short.
 */

let server: Server;
let base: string;
let client: WebhookClient;
const open = new Set<ServerResponse>();
let requests = 0;

beforeAll(async () => {
	server = createServer((req, res) => {
		requests += 1;
		req.resume();
		req.on("end", () => {
			open.add(res);
			if (req.url === "/ok-slow-body") res.writeHead(200, { "content-type": "text/plain" });
			else if (req.url === "/throttled-slow-body") res.writeHead(429, { "content-type": "text/plain", "retry-after": "7" });
			else res.writeHead(503, { "content-type": "text/plain", "retry-after": "3" });
			res.write("first bytes "); // … and the rest never comes
		});
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
	client = createWebhookClient({ allowPrivate: true, timeoutMs: 300 });
});

afterAll(async () => {
	client.close();
	for (const res of open) res.destroy();
	server.closeAllConnections();
	await new Promise<void>((resolve) => server.close(() => resolve()));
});

const send = (path: string) => client.send(`${base}${path}`, { "webhook-id": "evt_slowbody" }, Buffer.from("{}"));

it("a 2xx status received in time is delivered even if its body is still coming at the deadline", async () => {
	const result = await send("/ok-slow-body");
	expect(result).toMatchObject({ outcome: "delivered", status: 200 });
	expect(result.snippet).toBe("first bytes ");
});

it("a 429 or 503 received in time keeps its Retry-After even if its body is still coming at the deadline", async () => {
	await expect(send("/throttled-slow-body")).resolves.toMatchObject({ outcome: "HTTP_4XX", status: 429, retryAfterMs: 7_000 });
	await expect(send("/unavailable-slow-body")).resolves.toMatchObject({ outcome: "HTTP_5XX", status: 503, retryAfterMs: 3_000 });
});

it("never connects to a URL whose port is outside WEBHOOK_PORTS (BLOCKED_ADDRESS, no request)", async () => {
	const narrowed = createWebhookClient({ allowPrivate: true, timeoutMs: 300, ports: [80, 443, 8443] });
	try {
		const before = requests;
		const result = await narrowed.send(`${base}/ok-slow-body`, { "webhook-id": "evt_port" }, Buffer.from("{}"));
		expect(result).toMatchObject({ outcome: "BLOCKED_ADDRESS", status: null });
		expect(requests).toBe(before);
	} finally {
		narrowed.close();
	}
});
