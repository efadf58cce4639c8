import { createServer, connect as tcpConnect, type Server, type Socket } from "node:net";
import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { PartnerApi, type HttpAnswer } from "../../helpers/http";
import { startTestNode, type TestNode } from "../../helpers/node";
import { rideRequest } from "../../helpers/rides";
import { waitFor } from "../../helpers/wait";
import { createPartner } from "../../helpers/webhooks";

/**
 * Degraded mode: PostgreSQL becomes unreachable. The platform (one process)
 * reaches its database through a TCP proxy of the test's own; the proxy is
 * cut — every connection dropped, new ones accepted but never answered (a
 * black hole, the worst case: nothing refuses) — and later restored. With
 * the broker's request timeout at 30 s, calls that need the database answer
 * 503 SERVICE_UNAVAILABLE with `Retry-After` within the connect and acquire
 * bounds (DB_CONNECT_TIMEOUT_MS, DB_ACQUIRE_TIMEOUT_MS); once the database is
 * back, bookings succeed again and the ride booked before is still there.
 */

const CALL_BOUND_MS = 10_000;

interface DbProxy {
	port: number;
	cut(): void;
	restore(): void;
	close(): Promise<void>;
}

/** A TCP proxy to PostgreSQL that can be cut (connections dropped, new ones black-holed) and restored. */
async function startDbProxy(upstreamPort: number): Promise<DbProxy> {
	let open = true;
	const sockets = new Set<Socket>();
	const track = (s: Socket) => {
		sockets.add(s);
		s.on("close", () => sockets.delete(s));
		s.on("error", () => s.destroy());
	};
	const server: Server = createServer((client) => {
		track(client);
		if (!open) return; // Black hole: accepted, never answered.
		const upstream = tcpConnect(upstreamPort, "127.0.0.1");
		track(upstream);
		client.pipe(upstream).pipe(client);
		client.on("close", () => upstream.destroy());
		upstream.on("close", () => client.destroy());
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	const dropAll = () => {
		for (const s of sockets) s.destroy();
	};
	return {
		port: (server.address() as { port: number }).port,
		cut() {
			open = false;
			dropAll();
		},
		restore() {
			open = true;
			dropAll(); // The black-holed ones: their clients try again on a fresh connection.
		},
		close: () =>
			new Promise<void>((resolve) => {
				dropAll();
				server.close(() => resolve());
			}),
	};
}

describe("database outage: calls fail fast, work resumes", () => {
	let db: TestDatabase;
	let proxy: DbProxy;
	let node: TestNode | undefined;
	let api: PartnerApi;

	beforeAll(async () => {
		db = await createTestDatabase("dboutage");
		const url = new URL(db.url);
		proxy = await startDbProxy(Number(url.port || 5432));
		url.hostname = "127.0.0.1";
		url.port = String(proxy.port);
		node = await startTestNode({
			databaseUrl: url.toString(),
			services: ["gateway", "partners", "riders", "pricing", "orders", "dispatch", "notifications"],
			env: { REQUEST_TIMEOUT_MS: "30000", DB_CONNECT_TIMEOUT_MS: "1000", DB_ACQUIRE_TIMEOUT_MS: "2000" },
		});
		const partner = await createPartner(node.broker, "Database outage partner");
		api = new PartnerApi(node.baseUrl!, partner.apiKey);
	}, 60_000);

	afterAll(async () => {
		proxy?.restore();
		await node?.stop().catch(() => undefined);
		await proxy?.close().catch(() => undefined);
		await db?.drop().catch(() => undefined);
	}, 30_000);

	async function bounded(what: string, call: () => Promise<HttpAnswer>): Promise<HttpAnswer & { what: string }> {
		let timer: NodeJS.Timeout | undefined;
		const bound = new Promise<never>(
			(_, reject) => (timer = setTimeout(() => reject(new Error(`${what} not answered in ${CALL_BOUND_MS} ms`)), CALL_BOUND_MS)),
		);
		try {
			return { ...(await Promise.race([call(), bound])), what };
		} finally {
			clearTimeout(timer);
		}
	}

	test("503 + Retry-After within the bounds while PostgreSQL is cut; bookings resume after", async () => {
		const before = await api.post<{ orderId: string }>("/ride/create-order", rideRequest("https://partner.example.com/hooks", 1));
		expect(before.status).toBe(201);

		proxy.cut();
		const during = await Promise.all([
			bounded("create-order", () => api.post("/ride/create-order", rideRequest("https://partner.example.com/hooks", 2))),
			bounded("status", () => api.post("/ride/status", { orderId: before.body.orderId })),
			bounded("events", () => api.post("/ride/events", { orderId: before.body.orderId })),
		]);
		for (const a of during) {
			const body = a.body as { code?: string; retryable?: boolean };
			expect([a.what, a.status, body.code, body.retryable]).toEqual([a.what, 503, "SERVICE_UNAVAILABLE", true]);
			expect([a.what, Number(a.headers.get("retry-after")) > 0]).toEqual([a.what, true]);
		}

		proxy.restore();
		const after = await waitFor(
			"a booking accepted again",
			async () => {
				const r = await api.post<{ orderId: string }>("/ride/create-order", rideRequest("https://partner.example.com/hooks", 3));
				return r.status === 201 ? r : null;
			},
			20_000,
			200,
		);
		expect(after.body.orderId).toMatch(/^ord_/);
		const status = await api.post<{ status: string }>("/ride/status", { orderId: before.body.orderId });
		expect([status.status, status.body.status]).toEqual([200, "searching"]);
	}, 60_000);
});
