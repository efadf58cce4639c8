import { Errors } from "moleculer";
import { CoalescingNatsTransporter } from "../../../lib/coalescing-nats-transporter";

/**
 * The queue of CoalescingNatsTransporter against a recording client (the
 * real NATS round trip is test/integration/platform/nats-coalescing.test.ts): nothing
 * is published inside the turn that sent it, a turn's packets are published
 * together and in order, disconnect publishes what is queued first, and a
 * send settles when its packet is published: it rejects with the error of a
 * publish that threw (fail fast, like moleculer's own NATS transporter).
 */

interface Recorder {
	published: Array<[string, string]>;
	publish(topic: string, data: Buffer): void;
}

function transporterWith(client: Recorder | null) {
	const t = new CoalescingNatsTransporter({ url: "nats://127.0.0.1:4222" });
	const warnings: string[] = [];
	Object.assign(t, { client, logger: { warn: (m: string) => warnings.push(m) } });
	return { t, warnings };
}

function recorder(failOn?: string): Recorder {
	return {
		published: [],
		publish(topic, data) {
			if (topic === failOn) throw new Error("CONNECTION_CLOSED");
			this.published.push([topic, data.toString()]);
		},
	};
}

const nextTurn = () => new Promise((r) => setImmediate(r));

it("publishes nothing while the turn that sent is running, then every packet of the turn, in order", async () => {
	const client = recorder();
	const { t } = transporterWith(client);
	const sent = Promise.all([t.send("a", Buffer.from("1")), t.send("b", Buffer.from("2")), t.send("a", Buffer.from("3"))]);
	await Promise.resolve();
	expect(client.published).toEqual([]);
	// The sends resolve once their packets are published, in the next turn.
	await sent;
	expect(client.published).toEqual([
		["a", "1"],
		["b", "2"],
		["a", "3"],
	]);
	// A later turn is a new batch, behind the first.
	await t.send("c", Buffer.from("4"));
	await nextTurn();
	expect(client.published.map(([, d]) => d)).toEqual(["1", "2", "3", "4"]);
});

it("publishes what is queued before the connection is closed", async () => {
	const client = recorder();
	const { t } = transporterWith(client);
	let closedAfter = -1;
	Object.assign(t, { client: Object.assign(client, { flush: async () => undefined, close: async () => void (closedAfter = client.published.length) }) });
	const sent = t.send("last", Buffer.from("words"));
	await t.disconnect();
	await expect(sent).resolves.toBeUndefined();
	expect(closedAfter).toBe(1);
	expect(client.published).toEqual([["last", "words"]]);
});

it("rejects the send whose publish throws, at once and with that error, goes on with the rest of the batch, and warns", async () => {
	const client = recorder("bad");
	const { t, warnings } = transporterWith(client);
	const before = t.send("before", Buffer.from("w"));
	const bad = t.send("bad", Buffer.from("x"));
	const good = t.send("good", Buffer.from("y"));
	await expect(bad).rejects.toThrow("CONNECTION_CLOSED");
	await expect(before).resolves.toBeUndefined();
	await expect(good).resolves.toBeUndefined();
	expect(client.published).toEqual([
		["before", "w"],
		["good", "y"],
	]);
	expect(warnings).toEqual(["NATS publish failed: CONNECTION_CLOSED"]);
});

it("rejects every send of a connection whose publish throws (closed), and the next batch still tries", async () => {
	let closed = true;
	const published: string[] = [];
	const client = {
		publish(topic: string) {
			if (closed) throw Object.assign(new Error("CONNECTION_CLOSED"), { code: "CONNECTION_CLOSED" });
			published.push(topic);
		},
	};
	const { t } = transporterWith(client as unknown as Recorder);
	const results = await Promise.allSettled([t.send("a", Buffer.from("1")), t.send("b", Buffer.from("2"))]);
	expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
	expect(results.map((r) => (r as PromiseRejectedResult).reason.code)).toEqual(["CONNECTION_CLOSED", "CONNECTION_CLOSED"]);
	closed = false;
	await expect(t.send("c", Buffer.from("3"))).resolves.toBeUndefined();
	expect(published).toEqual(["c"]);
});

it("rejects a queued send with BrokerDisconnectedError when the client is gone by the time the batch is published", async () => {
	const client = recorder();
	const { t } = transporterWith(client);
	const sent = t.send("a", Buffer.from("1"));
	Object.assign(t, { client: null });
	await expect(sent).rejects.toBeInstanceOf(Errors.BrokerDisconnectedError);
	expect(client.published).toEqual([]);
});

it("leaves no unhandled rejection behind when the caller drops a send's promise (moleculer does for group events)", async () => {
	const unhandled: unknown[] = [];
	const onUnhandled = (reason: unknown) => void unhandled.push(reason);
	process.on("unhandledRejection", onUnhandled);
	try {
		const client = recorder("bad");
		const { t, warnings } = transporterWith(client);
		void t.send("bad", Buffer.from("x"));
		await nextTurn();
		await nextTurn();
		expect(warnings).toEqual(["NATS publish failed: CONNECTION_CLOSED"]);
		expect(unhandled).toEqual([]);
	} finally {
		process.off("unhandledRejection", onUnhandled);
	}
});

it("drops nothing and throws nothing without a client (not connected yet, or gone)", async () => {
	const { t } = transporterWith(null);
	await expect(t.send("a", Buffer.from("1"))).resolves.toBeUndefined();
	await nextTurn();
});

describe("subjects and the bus user's permissions", () => {
	/** A transporter as the broker would have initialised it: node `orders.pod-1` in namespace `ride`, logged in as `orders`. */
	function busTransporter(allowPublish?: readonly string[]) {
		const t = new CoalescingNatsTransporter({ url: "nats://127.0.0.1:4222" }, { user: "orders", allowPublish });
		const client = recorder();
		const serializer = { serialize: (p: unknown) => Buffer.from(JSON.stringify(p)) };
		Object.assign(t, {
			client,
			logger: { warn: () => undefined },
			prefix: "MOL-ride",
			nodeID: "orders.pod-1",
			broker: { serializer, PROTOCOL_VERSION: "5" },
		});
		return { t, client };
	}
	const packet = (type: string, target: string | null, payload: Record<string, unknown>) => ({ type, target, payload }) as never;

	it("a call goes out on a subject that names its action; an event on one that names the event", async () => {
		const { t, client } = busTransporter();
		await t.publish(packet("REQ", "pricing.pod-2", { action: "pricing.quote", id: "r1" }));
		await t.publish(packet("EVENT", "dispatch.pod-3", { event: "orders.created" }));
		await t.publish(packet("HEARTBEAT", null, {}));
		expect(client.published.map(([subject]) => subject)).toEqual([
			"MOL-ride.REQ.pricing.pod-2.pricing.quote",
			"MOL-ride.EVENT.dispatch.pod-3.orders.created",
			"MOL-ride.HEARTBEATB.orders.pod-1",
		]);
		expect(JSON.parse(client.published[0][1])).toMatchObject({ sender: "orders.pod-1" });
	});

	it("a publish outside the user's permissions fails at once with BUS_PERMISSION_DENIED and sends nothing", async () => {
		const { t, client } = busTransporter(["*.REQ.pricing.*.pricing.quote"]);
		await expect(t.publish(packet("REQ", "orders.pod-9", { action: "orders.transition" }))).rejects.toMatchObject({
			name: "BusPermissionError",
			type: "BUS_PERMISSION_DENIED",
			message: 'The bus user "orders" may not call orders.transition (contracts/bus.ts)',
		});
		await t.publish(packet("REQ", "pricing.pod-2", { action: "pricing.quote" }));
		expect(client.published.map(([subject]) => subject)).toEqual(["MOL-ride.REQ.pricing.pod-2.pricing.quote"]);
	});

	it("`$` events stay in the process, but for the tracing spans", async () => {
		const { t, client } = busTransporter();
		await t.publish(packet("EVENT", "dispatch.pod-3", { event: "$node.connected" }));
		await t.publish(packet("EVENT", "dispatch.pod-3", { event: "$tracing.spans" }));
		expect(client.published.map(([subject]) => subject)).toEqual(["MOL-ride.EVENT.dispatch.pod-3.$tracing.spans"]);
	});
});
