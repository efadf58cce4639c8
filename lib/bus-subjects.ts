/**
 * The NATS subjects the platform's transporter (lib/coalescing-nats-transporter.ts)
 * uses for Moleculer's packets: laid out so a NATS permission can name one
 * action, one event or one sender. Moleculer's own layout
 * (`MOL.REQ.<node>`, `MOL.EVENT.<node>`, `MOL.INFO`, …) cannot: every
 * request to a node shares one subject whatever the action, and the node a
 * discovery packet speaks for is only in its body.
 *
 *   <prefix>.REQ.<target>.<action>          a call, to the node chosen by the caller's balancer
 *   <prefix>.EVENT.<target>.<event>         an event, to a node that handles it
 *   <prefix>.RES.<target>                   an answer, to the caller
 *   <prefix>.<CMD>.<target>.<sender>        DISCOVER, INFO, PING, PONG to one node
 *   <prefix>.<CMD>B.<sender>                DISCOVER, INFO, HEARTBEAT, DISCONNECT, PING to all
 *
 * `<prefix>` is `MOL` or `MOL-<namespace>` (one token). With NATS_USER set a
 * node id is `<user>.<name>` (two tokens, busNodeId), so `<target>` and
 * `<sender>` start with the user: the server lets a user publish discovery
 * packets only under its own name and subscribe only to what is addressed
 * to its own nodes, and a receiver drops a discovery packet whose body
 * names another sender than its subject (senderMatches). Nobody can register
 * a node in another service's name, or announce another node gone.
 *
 * Calls and events are always addressed to one node: the broker's own
 * balancer picks it (the transporter refuses `disableBalancer`).
 */

/** Packets sent to one node carrying the sender in the subject. */
export const TARGETED_DISCOVERY = ["DISCOVER", "INFO", "PING", "PONG"] as const;
/** Packets sent to every node (`<CMD>B`), carrying the sender in the subject. */
export const BROADCAST_DISCOVERY = ["DISCOVER", "INFO", "HEARTBEAT", "DISCONNECT", "PING"] as const;

export interface OutgoingPacket {
	type: string;
	target?: string | null;
	sender: string;
	/** REQ: the action's full name. */
	action?: string;
	/** EVENT: the event's name. */
	event?: string;
}

/** A node name as one subject token: what NATS would split or treat as a wildcard becomes `-`. */
export function subjectToken(name: string): string {
	const token = name.replace(/[^A-Za-z0-9_-]/g, "-");
	return token === "" ? "-" : token;
}

/** The node id of a node logged in as `user`: `<user>.<name>`. */
export function busNodeId(user: string, name: string): string {
	return `${subjectToken(user)}.${subjectToken(name)}`;
}

/** Whether `nodeId` is a node id of `user` as the permissions expect it (exactly `<user>.<one token>`). */
export function isBusNodeIdOf(user: string, nodeId: string): boolean {
	return nodeId.startsWith(`${user}.`) && /^[A-Za-z0-9_-]+$/.test(nodeId.slice(user.length + 1));
}

function isTargetedDiscovery(type: string): boolean {
	return (TARGETED_DISCOVERY as readonly string[]).includes(type);
}

function isBroadcastDiscovery(type: string): boolean {
	return (BROADCAST_DISCOVERY as readonly string[]).includes(type);
}

/** The subject a packet is published on. Throws for a packet the layout has no place for (a bug, not input). */
export function packetSubject(prefix: string, p: OutgoingPacket): string {
	const target = p.target ?? undefined;
	switch (p.type) {
		case "REQ":
			if (!target || !p.action) throw new Error("A request needs a target node and an action (the broker's balancer picks the node)");
			return `${prefix}.REQ.${target}.${p.action}`;
		case "EVENT":
			if (!target || !p.event) throw new Error("An event needs a target node and a name (the broker's balancer picks the nodes)");
			return `${prefix}.EVENT.${target}.${p.event}`;
		case "RES":
			if (!target) throw new Error("An answer needs a target node");
			return `${prefix}.RES.${target}`;
	}
	if (target && isTargetedDiscovery(p.type)) return `${prefix}.${p.type}.${target}.${p.sender}`;
	if (!target && isBroadcastDiscovery(p.type)) return `${prefix}.${p.type}B.${p.sender}`;
	throw new Error(`No subject for a ${p.type} packet ${target ? "to one node" : "to all nodes"}`);
}

/** What a node subscribes to for one of Moleculer's subscriptions (`cmd`, and its own id when addressed to it). */
export function subscriptionSubject(prefix: string, cmd: string, nodeId?: string): string {
	if (nodeId === undefined) {
		if (!isBroadcastDiscovery(cmd)) throw new Error(`No broadcast subject for ${cmd}`);
		return `${prefix}.${cmd}B.>`;
	}
	if (cmd === "RES") return `${prefix}.RES.${nodeId}`;
	return `${prefix}.${cmd}.${nodeId}.>`;
}

/**
 * For a discovery packet received on `subject`: whether the sender named in
 * the subject is the one its body claims. Other packets carry no sender in
 * their subject and pass.
 */
export function senderMatches(prefix: string, cmd: string, ownNodeId: string, subject: string, claimedSender: unknown): boolean {
	let rest: string | undefined;
	const broadcast = `${prefix}.${cmd}B.`;
	const targeted = `${prefix}.${cmd}.${ownNodeId}.`;
	if (isBroadcastDiscovery(cmd) && subject.startsWith(broadcast)) rest = subject.slice(broadcast.length);
	else if (isTargetedDiscovery(cmd) && subject.startsWith(targeted)) rest = subject.slice(targeted.length);
	else return !(isBroadcastDiscovery(cmd) || isTargetedDiscovery(cmd));
	return typeof claimedSender === "string" && claimedSender === rest;
}
