import { Errors, Transporters } from "moleculer";

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
 */

const NatsTransporter = Transporters.NATS;
/** Moleculer's error for a packet sent while disconnected (its constructor takes no argument; the typings inherit one). */
const BrokerDisconnectedError = Errors.BrokerDisconnectedError as unknown as new () => Errors.BrokerDisconnectedError;

type NatsClient = { publish(topic: string, data: Buffer): void } | null;

interface QueuedPacket {
	topic: string;
	data: Buffer;
	resolve: () => void;
	reject: (err: unknown) => void;
}

export class CoalescingNatsTransporter extends NatsTransporter {
	private queued: QueuedPacket[] = [];
	private flushScheduled = false;

	/** Resolves once the packet is published; rejects with the error of a publish that threw. */
	send(topic: string, data: Buffer): Promise<void> {
		if (!this.client) return Promise.resolve();
		const sent = new Promise<void>((resolve, reject) => this.queued.push({ topic, data, resolve, reject }));
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
				client.publish(packet.topic, packet.data);
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
