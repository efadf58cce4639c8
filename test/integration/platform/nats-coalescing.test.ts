import { Errors, ServiceBroker, type Context } from "moleculer";
import { CoalescingNatsTransporter } from "../../../lib/coalescing-nats-transporter";
import { TEST_NATS_URL } from "../../helpers/db";
import { uniqueNamespace } from "../../helpers/node";
import { waitFor } from "../../helpers/wait";

/**
 * The coalescing transporter (what every broker uses over NATS, see
 * moleculer.config.ts) between two brokers on the real NATS: calls made in
 * separate macrotasks of one loop turn leave in one socket write instead of
 * one each, every call gets its own answer, a sender's events arrive in the
 * order sent, an event sent just before stopping is not lost, and a call
 * whose request NATS refuses (over the server's max_payload) fails at once
 * with the client's error instead of waiting out the request timeout.
 */

let namespace: string;
let caller: ServiceBroker;
let callee: ServiceBroker;
const received: number[] = [];

function broker(nodeID: string, requestTimeout = 10_000): ServiceBroker {
	return new ServiceBroker({ namespace, nodeID, transporter: new CoalescingNatsTransporter({ url: TEST_NATS_URL }), logger: false, requestTimeout });
}

/** The broker's nats client: the server's INFO (max_payload) is on it. */
function natsClient(b: ServiceBroker): { info?: { max_payload: number } } {
	return (b.transit!.tx as unknown as { client: { info?: { max_payload: number } } }).client;
}

/** Counts the socket writes of a broker's NATS connection (the nats client's transport, an internal of nats.js). */
function countWrites(b: ServiceBroker): { count: number; bytes: number } {
	const client = (b.transit!.tx as unknown as { client: { protocol: { transport: { send(d: Uint8Array): void } } } }).client;
	const transport = client.protocol.transport;
	const counter = { count: 0, bytes: 0 };
	const send = transport.send.bind(transport);
	transport.send = (d: Uint8Array) => {
		counter.count++;
		counter.bytes += d.length;
		send(d);
	};
	return counter;
}

beforeAll(async () => {
	namespace = uniqueNamespace("coalesce");
	callee = broker(`${namespace}-callee`);
	callee.createService({
		name: "echo",
		actions: { back: (ctx: Context<{ n: number }>) => ({ n: ctx.params.n }) },
		events: { "echo.seq": (ctx: Context<{ n: number }>) => void received.push(ctx.params.n) },
	});
	caller = broker(`${namespace}-caller`);
	await Promise.all([callee.start(), caller.start()]);
	await caller.waitForServices(["echo"], 20_000);
});

afterAll(async () => {
	await caller?.stop();
	await callee?.stop();
});

it("sends the calls made in separate macrotasks of one loop turn in a few writes, not one each, and answers each its own", async () => {
	const writes = countWrites(caller);
	const calls = await new Promise<Array<Promise<{ n: number }>>>((resolve) => {
		const made: Array<Promise<{ n: number }>> = [];
		// 200 macrotasks in one check phase, as a gateway's HTTP requests arrive in one I/O phase.
		for (let n = 0; n < 200; n++) setImmediate(() => made.push(caller.call<{ n: number }, { n: number }>("echo.back", { n })));
		setImmediate(() => resolve(made));
	});
	const answers = await Promise.all(calls);
	expect(answers.map((a) => a.n)).toEqual([...Array(200).keys()]);
	// Moleculer's plain NATS transporter makes 200 writes here (one per macrotask); coalesced, the
	// ~80 KB of requests go in a few: the nats client also writes whenever its buffer passes 32 KB,
	// and a heartbeat may fall in between.
	expect(writes.count).toBeGreaterThan(0);
	expect(writes.count).toBeLessThanOrEqual(Math.ceil(writes.bytes / 32_768) + 2);
});

it("keeps a sender's events in order, and publishes one sent just before the broker stops", async () => {
	received.length = 0;
	for (let n = 0; n < 1000; n++) await caller.emit("echo.seq", { n });
	await waitFor("every event", () => received.length === 1000, 20_000, 50);
	expect(received).toEqual([...Array(1000).keys()]);

	const last = broker(`${namespace}-last`);
	await last.start();
	await last.waitForServices(["echo"], 20_000);
	received.length = 0;
	await last.emit("echo.seq", { n: 42 });
	await last.stop();
	await waitFor("the last event", () => received.length === 1, 10_000, 50);
	expect(received).toEqual([42]);
});

it("rejects a call whose request is over the server's max_payload with the publish error, not a request timeout", async () => {
	// A call left to its timeout (20 s here) rejects with RequestTimeoutError: the assertion is on
	// what the call rejects with, not on how long it took.
	const big = broker(`${namespace}-big`, 20_000);
	await big.start();
	try {
		await big.waitForServices(["echo"], 20_000);
		const maxPayload = natsClient(big).info?.max_payload;
		expect(maxPayload).toBeGreaterThan(0);
		const call = big.call("echo.back", { n: 1, pad: "x".repeat(maxPayload! + 1) });
		const err = await call.then(
			() => undefined,
			(e: unknown) => e as Error & { code?: string },
		);
		expect(err).toBeInstanceOf(Error);
		expect(err).not.toBeInstanceOf(Errors.RequestTimeoutError);
		expect(err?.code).toBe("MAX_PAYLOAD_EXCEEDED");
		// Only that packet was refused: the connection carries the next call.
		await expect(big.call("echo.back", { n: 2 })).resolves.toEqual({ n: 2 });
	} finally {
		await big.stop();
	}
});
