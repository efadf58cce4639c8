import { Errors, Transporters } from "moleculer";
import { BUS_CROSSING_INTERNAL_EVENTS } from "../contracts/bus";
import { allowedBy } from "./bus-permissions";
import { isBusNodeIdOf, packetSubject, senderMatches, subjectToken, subscriptionSubject } from "./bus-subjects";

/**
 * Moleculer's NATS transporter, with the packets a process sends during one
 * turn of the event loop written to the NATS socket together.
 *
 * Why: the `nats` client flushes its outbound buffer one microtask after a
 * publish, so every macrotask that publishes makes its own socket write. A
 * gateway under load handles each HTTP request in a macrotask of its own, so
 * each call it forwarded was one write, and each write wakes the NATS server:
 * in the profile of a gateway over NATS, those writes were ~20% of its CPU,
 * against ~3% for all its HTTP answers. Here `send` queues the packet and
 * the queue is published at `setImmediate`, right after the loop's I/O
 * phase: every request read in that phase leaves in one write. A packet
 * waits at most for the rest of that phase (nothing when idle); the order of
 * packets is kept.
 *
 * Failing fast, as the stock transporter does: its `send` publishes at once,
 * so a publish that throws (a closed connection, a packet over the server's
 * `max_payload`) fails the `send`, and moleculer's transit rejects the call
 * or emit that sent it. Here `send` settles when its packet is published: it
 * rejects with the publish's error, and the caller's call rejects with it
 * instead of waiting out the request timeout.
 *
 * Subjects that name the action, the event and the sender
 * (lib/bus-subjects.ts): a request goes to `<prefix>.REQ.<node>.<action>`,
 * an event to `<prefix>.EVENT.<node>.<event>`, a discovery packet names its
 * sender, so the NATS server can give each service's user only the calls
 * and events of its row in contracts/bus.ts (lib/bus-permissions.ts). With
 * a bus user (NATS_USER) the node id must be `<user>.<name>`, and a publish
 * outside the user's permissions fails at once, here, with
 * BUS_PERMISSION_DENIED (the server would refuse it too, but only tells the
 * connection later, and the call would wait out its timeout). A received
 * discovery packet whose body names another sender than its subject is
 * dropped. `$` events other than BUS_CROSSING_INTERNAL_EVENTS stay in their
 * process.
 *
 * Failing fast while the bus is down: the `nats` client keeps a lost
 * connection's publishes in a buffer and reconnects, so a call sent during
 * an outage would wait out the whole request timeout (15 s) before its 503.
 * From the client's `disconnect` status until its `reconnect`, a request is
 * refused at once with BrokerDisconnectedError (the gateway answers 503 with
 * `Retry-After`, lib/peer-unavailable.ts), and the calls already waiting for
 * an answer from another node are rejected with it too (their answers may
 * never come). Events, answers and heartbeats still go to the client's
 * buffer: an event sent during a short outage is delivered when the bus is
 * back, and none of them is waited for. The client retries every
 * RECONNECT_WAIT_MS, so calls resume within about that after NATS returns;
 * a silent peer (a cut network, no TCP reset) is noticed after
 * PING_INTERVAL_MS × MAX_PINGS_OUT.
 *
 * Failing fast when nobody receives a request: each request is published
 * with a reply subject of this node's (`<prefix>.RES.<node>.<request id>`),
 * which the answering node ignores (Moleculer answers on its own subject).
 * When no subscriber has the request's subject (its node crashed, or has not
 * reconnected yet after an outage), the NATS server answers there at once
 * with "no responders" (status 503, no payload), and the call fails with
 * ServiceNotAvailableError instead of waiting out its timeout.
 */

const NatsTransporter = Transporters.NATS;
/** Moleculer's error for a packet sent while disconnected (its constructor takes no argument; the typings inherit one). */
const BrokerDisconnectedError = Errors.BrokerDisconnectedError as unknown as new () => Errors.BrokerDisconnectedError;

type NatsClient = { publish(topic: string, data: Buffer, opts?: { reply: string }): void } | null;
/** The client's connection news (`nats`: one iterator per caller). */
type NatsStatusSource = { status(): AsyncIterable<{ type: string }> };

/** How often a lost connection is tried again (the `nats` default is 2 s). */
export const RECONNECT_WAIT_MS = 250;
/** Pings that find a connection silent: PING_INTERVAL_MS × MAX_PINGS_OUT until it counts as lost (the default is 4 min). */
export const PING_INTERVAL_MS = 5_000;
export const MAX_PINGS_OUT = 2;

/** Gauge: 1 while this process's NATS connection is up, 0 during an outage (docs/OPERATIONS.md, "Alerts"). */
export const BUS_CONNECTED_METRIC = "bus.connected";

/** What the transporter reads of Moleculer's transit: the calls sent to other nodes that wait for their answer. */
interface TransitPending {
	pendingRequests: Map<string, { nodeID?: string | null; action?: { name?: string }; reject(err: unknown): void }>;
	removePendingRequest(id: string): void;
}

interface QueuedPacket {
	topic: string;
	data: Buffer;
	/** A request's reply subject, where the server's "no responders" comes. */
	reply?: string;
	resolve: () => void;
	reject: (err: unknown) => void;
}

/** How this node is known on the bus: its NATS user and what that user may publish (lib/bus-permissions.ts). */
export interface BusIdentity {
	user?: string;
	/** Subject patterns the server allows this user to publish to; unset: no local check (no permissions on that server). */
	allowPublish?: readonly string[];
}

/** A publish the bus user is not allowed (contracts/bus.ts): the call or emit fails with it at once. */
export class BusPermissionError extends Errors.MoleculerError {
	constructor(user: string, what: string) {
		super(`The bus user "${user}" may not ${what} (contracts/bus.ts)`, 500, "BUS_PERMISSION_DENIED", { user, what });
		this.name = "BusPermissionError";
	}
}

/** What publish reads of Moleculer's outgoing packet. */
interface OutPacket {
	type: string;
	target?: string | null;
	payload?: OutPayload;
}

interface OutPayload {
	action?: string;
	event?: string;
}

type NatsSubscriber = {
	subscribe(subject: string, opts: { callback: (err: unknown, msg: { subject: string; data: Uint8Array; headers?: { code?: number } }) => void }): unknown;
};

export class CoalescingNatsTransporter extends NatsTransporter {
	private queued: QueuedPacket[] = [];
	private flushScheduled = false;
	private readonly bus: BusIdentity;
	/** False from the client's `disconnect` until its `reconnect`: requests are refused meanwhile. */
	private busUp = true;

	constructor(opts: ConstructorParameters<typeof NatsTransporter>[0], bus: BusIdentity = {}) {
		super({ reconnectTimeWait: RECONNECT_WAIT_MS, pingInterval: PING_INTERVAL_MS, maxPingOut: MAX_PINGS_OUT, ...(opts as object) });
		this.bus = bus;
	}

	/** True while the NATS connection is up (false during an outage, until the client reconnects). */
	get busConnected(): boolean {
		return this.busUp;
	}

	async connect(): Promise<void> {
		await super.connect();
		this.setBusUp(true);
		this.watchConnection(this.client as unknown as NatsStatusSource);
		this.watchNoResponders();
	}

	/** This node's reply subject of a request (`<prefix>.RES.<node>.<id>`): one token longer than its answers' subject. */
	private replySubject(id: string): string {
		return `${subscriptionSubject(this.prefix, "RES", this.nodeID)}.${id}`;
	}

	/** The server's "no responders" to this node's requests: the call fails now (its node is gone), not at its timeout. */
	private watchNoResponders(): void {
		const client = this.client as unknown as NatsSubscriber | null;
		if (!client) return;
		client.subscribe(this.replySubject("*"), {
			callback: (_err, msg) => {
				if (msg.data.length !== 0 || msg.headers?.code !== 503) return;
				const id = msg.subject.slice(msg.subject.lastIndexOf(".") + 1);
				const transit = this.transit as unknown as TransitPending | undefined;
				const req = transit?.pendingRequests.get(id);
				if (!req) return;
				transit!.removePendingRequest(id);
				req.reject(new Errors.ServiceNotAvailableError({ action: req.action?.name ?? "", nodeID: req.nodeID ?? undefined }));
			},
		});
	}

	/** Records the connection's state, for the calls and for the `bus_connected` gauge. */
	private setBusUp(up: boolean): void {
		this.busUp = up;
		const broker = this.broker;
		if (!broker?.isMetricsEnabled()) return;
		if (!broker.metrics.hasMetric(BUS_CONNECTED_METRIC))
			broker.metrics.register({
				type: "gauge",
				name: BUS_CONNECTED_METRIC,
				description: "1 while this process's NATS connection is up, 0 during an outage",
			});
		broker.metrics.set(BUS_CONNECTED_METRIC, up ? 1 : 0);
	}

	/** Follows the client's connection news until it closes. */
	private watchConnection(client: NatsStatusSource | null): void {
		if (!client || typeof client.status !== "function") return;
		void (async () => {
			for await (const s of client.status()) {
				if (s.type === "disconnect") this.busLost();
				else if (s.type === "reconnect") {
					this.setBusUp(true);
					this.logger.info("NATS connection is back: calls go out again");
				}
			}
		})().catch(() => undefined);
	}

	/** The connection dropped: calls waiting for another node's answer fail now instead of at their timeout. */
	private busLost(): void {
		if (!this.busUp) return;
		this.setBusUp(false);
		const transit = this.transit as unknown as TransitPending | undefined;
		let failed = 0;
		for (const [id, req] of transit?.pendingRequests ?? []) {
			if (!req.nodeID || req.nodeID === this.nodeID) continue;
			transit!.removePendingRequest(id);
			req.reject(new BrokerDisconnectedError());
			failed++;
		}
		this.logger.warn(`NATS connection lost: calls to other nodes fail at once until it is back (${failed} waiting calls failed)`);
	}

	/** Checks at start that the node id fits the subject layout (and the user's permissions), and that the broker balances. */
	init(...args: Parameters<InstanceType<typeof NatsTransporter>["init"]>): void {
		super.init(...args);
		if (!this.broker) return;
		if (this.broker.options.disableBalancer) throw new Error("The bus transporter needs the broker's balancer: disableBalancer must be false");
		const nodeID = this.nodeID;
		if (this.bus.user !== undefined) {
			if (!isBusNodeIdOf(this.bus.user, nodeID))
				throw new Error(`With NATS_USER=${this.bus.user} the node id must be "${this.bus.user}.<name>" (got "${nodeID}")`);
		} else if (subjectToken(nodeID) !== nodeID) {
			throw new Error(`The node id "${nodeID}" must be one NATS subject token (letters, digits, - and _)`);
		}
	}

	/** Publishes a packet on its subject (lib/bus-subjects.ts), after the local permission check. */
	publish(packet: Parameters<InstanceType<typeof NatsTransporter>["publish"]>[0]): Promise<void> {
		const out = packet as unknown as OutPacket;
		const payload = out.payload ?? {};
		if (
			out.type === "EVENT" &&
			typeof payload.event === "string" &&
			payload.event.startsWith("$") &&
			!BUS_CROSSING_INTERNAL_EVENTS.includes(payload.event)
		) {
			return Promise.resolve();
		}
		if (out.type === "REQ" && !this.busUp) return this.refuseRequest(packet as unknown as { payload?: { id?: unknown } });
		const subject = packetSubject(this.prefix, { type: out.type, target: out.target, sender: this.nodeID, action: payload.action, event: payload.event });
		if (this.bus.user !== undefined && this.bus.allowPublish && !allowedBy(this.bus.allowPublish, subject)) {
			const what = out.type === "REQ" ? `call ${payload.action}` : out.type === "EVENT" ? `emit ${payload.event}` : `send ${out.type} on ${subject}`;
			return Promise.reject(new BusPermissionError(this.bus.user, what));
		}
		const id = out.type === "REQ" ? (packet as unknown as { payload?: { id?: unknown } }).payload?.id : undefined;
		return this.send(subject, this.serialize(packet), typeof id === "string" && subjectToken(id) === id ? { reply: this.replySubject(id) } : undefined);
	}

	/**
	 * A request while the bus is down: its call fails at once. The pending
	 * request is failed here and the send resolves, so the outage is logged
	 * once (busLost), not once per call by Moleculer's transit; a send whose
	 * request is not pending (nothing waits for it) is rejected instead.
	 */
	private refuseRequest(packet: { payload?: { id?: unknown } }): Promise<void> {
		const id = packet.payload?.id;
		const transit = this.transit as unknown as TransitPending | undefined;
		const req = typeof id === "string" ? transit?.pendingRequests.get(id) : undefined;
		if (!req) return Promise.reject(new BrokerDisconnectedError());
		transit!.removePendingRequest(id as string);
		req.reject(new BrokerDisconnectedError());
		return Promise.resolve();
	}

	/** Not used: the broker's balancer picks the node of every call and event (see init). */
	publishBalancedRequest(): Promise<void> {
		return Promise.reject(new Error("Balanced requests are not used on this bus"));
	}

	publishBalancedEvent(): Promise<void> {
		return Promise.reject(new Error("Balanced events are not used on this bus"));
	}

	/** Subscribes to one of Moleculer's subscriptions on its subject; discovery packets must name their real sender. */
	subscribe(cmd: string, nodeID?: string): Promise<void> {
		const subject = subscriptionSubject(this.prefix, cmd, nodeID);
		(this.client as NatsSubscriber).subscribe(subject, {
			callback: (_err, msg) => {
				const data = Buffer.from(msg.data);
				if (!this.senderIsSubject(cmd, msg.subject, data)) return;
				void this.receive(cmd, data);
			},
		});
		return Promise.resolve();
	}

	/** A discovery packet speaks for the node its subject names, or it is dropped (with a warning: someone is forging). */
	private senderIsSubject(cmd: string, subject: string, data: Buffer): boolean {
		if (cmd === "REQ" || cmd === "EVENT" || cmd === "RES") return true;
		let sender: unknown;
		try {
			sender = (this.broker.serializer!.deserialize(data, cmd) as { sender?: unknown }).sender;
		} catch {
			return true; // Moleculer reports the unreadable packet itself.
		}
		if (senderMatches(this.prefix, cmd, this.nodeID, subject, sender)) return true;
		this.logger.warn(`Dropped a ${cmd} packet on ${subject} claiming another sender`);
		return false;
	}

	/** Resolves once the packet is published; rejects with the error of a publish that threw. */
	send(topic: string, data: Buffer, meta?: { reply?: string }): Promise<void> {
		if (!this.client) return Promise.resolve();
		const reply = typeof meta?.reply === "string" ? meta.reply : undefined;
		const sent = new Promise<void>((resolve, reject) => this.queued.push({ topic, data, reply, resolve, reject }));
		// Moleculer drops the promise of some sends (an event published to several groups):
		// their failure is logged by publishQueued, not left as an unhandled rejection.
		sent.catch(() => undefined);
		if (!this.flushScheduled) {
			this.flushScheduled = true;
			setImmediate(() => this.publishQueued());
		}
		return sent;
	}

	/** Publishes what is queued, in order; the nats client then writes it in one go. */
	publishQueued(): void {
		this.flushScheduled = false;
		const queued = this.queued;
		if (queued.length === 0) return;
		this.queued = [];
		const client = this.client as NatsClient;
		for (let i = 0; i < queued.length; i++) {
			const packet = queued[i];
			if (!client) {
				// Disconnected between the send and this turn: nothing to publish on.
				packet.reject(new BrokerDisconnectedError());
				continue;
			}
			try {
				if (packet.reply === undefined) client.publish(packet.topic, packet.data);
				else client.publish(packet.topic, packet.data, { reply: packet.reply });
			} catch (err) {
				// This packet only (a closing connection, a payload over max_payload): the rest of the batch goes on.
				this.logger.warn(`NATS publish failed: ${(err as Error)?.message ?? err}`);
				packet.reject(err);
				continue;
			}
			packet.resolve();
		}
	}

	/** Nothing queued is left behind: it is published before the connection drains and closes. */
	disconnect(): Promise<void> {
		this.publishQueued();
		return super.disconnect();
	}
}
