import { CoalescingNatsTransporter } from "../../lib/coalescing-nats-transporter";

/**
 * The queue of CoalescingNatsTransporter against a recording client (the
 * real NATS round trip is test/integration/nats-coalescing.test.ts): nothing
 * is published inside the turn that sent it, a turn's packets are published
 * together and in order, and disconnect publishes what is queued first.
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
	await Promise.all([t.send("a", Buffer.from("1")), t.send("b", Buffer.from("2")), t.send("a", Buffer.from("3"))]);
	expect(client.published).toEqual([]);
	await nextTurn();
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
	await t.send("last", Buffer.from("words"));
	await t.disconnect();
	expect(closedAfter).toBe(1);
	expect(client.published).toEqual([["last", "words"]]);
});

it("goes on with the rest of a batch when one publish throws, and warns", async () => {
	const client = recorder("bad");
	const { t, warnings } = transporterWith(client);
	await t.send("bad", Buffer.from("x"));
	await t.send("good", Buffer.from("y"));
	await nextTurn();
	expect(client.published).toEqual([["good", "y"]]);
	expect(warnings).toEqual(["NATS publish failed: CONNECTION_CLOSED"]);
});

it("drops nothing and throws nothing without a client (not connected yet, or gone)", async () => {
	const { t } = transporterWith(null);
	await expect(t.send("a", Buffer.from("1"))).resolves.toBeUndefined();
	await nextTurn();
});
