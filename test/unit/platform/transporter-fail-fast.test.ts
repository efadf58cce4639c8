import { CoalescingNatsTransporter } from "../../../lib/coalescing-nats-transporter";

/**
 * CoalescingNatsTransporter's fail-fast rules against a recording client and
 * transit (the real outage is test/integration/platform/bus-outage.test.ts):
 * a lost connection fails the calls waiting on other nodes and refuses new
 * ones until it is back, while events still go out; a request carries its
 * reply subject, and the server's "no responders" there fails its call.
 */

interface Pending {
	nodeID: string;
	action: { name: string };
	reject: jest.Mock;
}

function setup() {
	const published: Array<{ topic: string; reply?: string }> = [];
	let noResponders: ((err: unknown, msg: { subject: string; data: Uint8Array; headers?: { code?: number } }) => void) | undefined;
	const client = {
		publish: (topic: string, _data: Buffer, opts?: { reply: string }) => published.push({ topic, reply: opts?.reply }),
		subscribe: (subject: string, opts: { callback: typeof noResponders }) => {
			if (subject.endsWith(".*")) noResponders = opts.callback;
		},
	};
	const pendingRequests = new Map<string, Pending>();
	const transit = { pendingRequests, removePendingRequest: (id: string) => pendingRequests.delete(id) };
	const t = new CoalescingNatsTransporter({ url: "nats://127.0.0.1:4222" });
	Object.assign(t, {
		client,
		transit,
		prefix: "MOL-x",
		nodeID: "gw-1",
		broker: { isMetricsEnabled: () => false },
		logger: { warn: () => undefined, info: () => undefined },
		serialize: () => Buffer.from("packet"),
	});
	const internals = t as unknown as { busLost(): void; setBusUp(up: boolean): void; watchNoResponders(): void };
	const pending = (id: string, nodeID: string): Pending => {
		const p = { nodeID, action: { name: "orders.create" }, reject: jest.fn() };
		pendingRequests.set(id, p);
		return p;
	};
	return { t, internals, published, pendingRequests, pending, noResponders: () => noResponders! };
}

const request = (id: string) => ({ type: "REQ", target: "back-1", payload: { id, action: "orders.create" } });
const event = { type: "EVENT", target: "back-1", payload: { event: "orders.created" } };

it("a lost connection fails the calls waiting on other nodes, at once", () => {
	const { internals, pendingRequests, pending } = setup();
	const remote = pending("r1", "back-1");
	const local = pending("l1", "gw-1");
	internals.busLost();
	expect(remote.reject).toHaveBeenCalledWith(expect.objectContaining({ name: "BrokerDisconnectedError" }));
	expect(pendingRequests.has("r1")).toBe(false);
	expect(local.reject).not.toHaveBeenCalled();
	expect(pendingRequests.has("l1")).toBe(true);
});

it("refuses requests while the connection is down, sends events, and sends requests again once it is back", async () => {
	const { t, internals, published, pendingRequests, pending } = setup();
	internals.busLost();
	const refused = pending("r2", "back-1");
	// The call fails (not the send: Moleculer would log every one of them as an error).
	await t.publish(request("r2") as never);
	expect(refused.reject).toHaveBeenCalledWith(expect.objectContaining({ name: "BrokerDisconnectedError" }));
	expect(pendingRequests.has("r2")).toBe(false);
	// A request nothing waits for: its send fails.
	await expect(t.publish(request("r9") as never)).rejects.toMatchObject({ name: "BrokerDisconnectedError" });
	await t.publish(event as never);
	expect(published.map((p) => p.topic)).toEqual(["MOL-x.EVENT.back-1.orders.created"]);

	internals.setBusUp(true);
	await t.publish(request("r3") as never);
	expect(published[1]).toEqual({ topic: "MOL-x.REQ.back-1.orders.create", reply: "MOL-x.RES.gw-1.r3" });
	expect(t.busConnected).toBe(true);
});

it("the server's no responders on a request's reply subject fails that call only", () => {
	const { internals, pendingRequests, pending, noResponders } = setup();
	internals.watchNoResponders();
	const gone = pending("r4", "back-1");
	const other = pending("r5", "back-1");
	// An answer-shaped message (data, no 503) on the reply subject is ignored.
	noResponders()(null, { subject: "MOL-x.RES.gw-1.r5", data: new Uint8Array([1]), headers: { code: 503 } });
	noResponders()(null, { subject: "MOL-x.RES.gw-1.r4", data: new Uint8Array(0), headers: { code: 503 } });
	expect(gone.reject).toHaveBeenCalledWith(expect.objectContaining({ name: "ServiceNotAvailableError" }));
	expect(pendingRequests.has("r4")).toBe(false);
	expect(other.reject).not.toHaveBeenCalled();
});
