import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ALL_BUS_USERS, BUS_USERS, OPERATOR_USER } from "../../../contracts/bus";
import { allowedBy, NATS_CONF_FILES, permissionsFor, subjectMatches } from "../../../lib/bus-permissions";
import { busNodeId, isBusNodeIdOf, packetSubject, senderMatches, subscriptionSubject } from "../../../lib/bus-subjects";

/**
 * The bus boundary on paper: the subject layout, the permissions each user
 * gets from contracts/bus.ts, and the committed nats-server configurations
 * being exactly what `npm run nats-conf` writes (the real server with these
 * permissions: test/integration/platform/nats-permissions.test.ts).
 */

const P = "MOL-ride";

describe("subjects (lib/bus-subjects.ts)", () => {
	test("calls and events name their action or event; discovery names its sender; answers go to the caller", () => {
		expect(packetSubject(P, { type: "REQ", target: "orders.pod-1", sender: "dispatch.pod-2", action: "orders.transition" })).toBe(
			"MOL-ride.REQ.orders.pod-1.orders.transition",
		);
		expect(packetSubject(P, { type: "EVENT", target: "dispatch.pod-2", sender: "orders.pod-1", event: "orders.created" })).toBe(
			"MOL-ride.EVENT.dispatch.pod-2.orders.created",
		);
		expect(packetSubject(P, { type: "RES", target: "dispatch.pod-2", sender: "orders.pod-1" })).toBe("MOL-ride.RES.dispatch.pod-2");
		expect(packetSubject(P, { type: "INFO", sender: "orders.pod-1" })).toBe("MOL-ride.INFOB.orders.pod-1");
		expect(packetSubject(P, { type: "INFO", target: "gateway.pod-3", sender: "orders.pod-1" })).toBe("MOL-ride.INFO.gateway.pod-3.orders.pod-1");
		expect(packetSubject(P, { type: "HEARTBEAT", sender: "orders.pod-1" })).toBe("MOL-ride.HEARTBEATB.orders.pod-1");
		// A call or event without a chosen node has no subject: the broker's balancer always picks one.
		expect(() => packetSubject(P, { type: "REQ", sender: "a.b", action: "orders.get" })).toThrow(/target node/);
	});

	test("a node subscribes to what is addressed to it and to broadcasts", () => {
		expect(subscriptionSubject(P, "REQ", "orders.pod-1")).toBe("MOL-ride.REQ.orders.pod-1.>");
		expect(subscriptionSubject(P, "RES", "orders.pod-1")).toBe("MOL-ride.RES.orders.pod-1");
		expect(subscriptionSubject(P, "INFO")).toBe("MOL-ride.INFOB.>");
	});

	test("a discovery packet must name the sender its subject names", () => {
		expect(senderMatches(P, "INFO", "gateway.pod-3", "MOL-ride.INFOB.orders.pod-1", "orders.pod-1")).toBe(true);
		expect(senderMatches(P, "INFO", "gateway.pod-3", "MOL-ride.INFOB.gateway.rogue", "orders.pod-1")).toBe(false);
		expect(senderMatches(P, "PONG", "gateway.pod-3", "MOL-ride.PONG.gateway.pod-3.gateway.x", "orders.pod-1")).toBe(false);
		expect(senderMatches(P, "DISCONNECT", "gateway.pod-3", "MOL-ride.DISCONNECTB.gateway.x", "gateway.x")).toBe(true);
		expect(senderMatches(P, "HEARTBEAT", "gateway.pod-3", "MOL-ride.HEARTBEATB.gateway.x", undefined)).toBe(false);
	});

	test("node ids are <user>.<one token>", () => {
		expect(busNodeId("gateway", "ride-gateway-7d9c.host.local")).toBe("gateway.ride-gateway-7d9c-host-local");
		expect(isBusNodeIdOf("gateway", "gateway.pod-1")).toBe(true);
		expect(isBusNodeIdOf("gateway", "orders.pod-1")).toBe(false);
		expect(isBusNodeIdOf("gateway", "gateway.pod.1")).toBe(false);
	});
});

describe("permissions (lib/bus-permissions.ts)", () => {
	const req = (target: string, action: string) => packetSubject(P, { type: "REQ", target, sender: "x.y", action });
	const may = (user: string, subject: string) => allowedBy(permissionsFor(user).publish, subject);

	test("NATS wildcard matching", () => {
		expect(subjectMatches("*.REQ.orders.*.orders.get", "MOL-ride.REQ.orders.pod-1.orders.get")).toBe(true);
		expect(subjectMatches("*.REQ.orders.*.orders.get", "MOL-ride.REQ.orders.pod-1.orders.getX")).toBe(false);
		expect(subjectMatches("*.REQ.*.*.>", "MOL.REQ.a.b.c")).toBe(true);
		expect(subjectMatches("*.REQ.*.*.>", "MOL.REQ.a.b")).toBe(false);
	});

	test("each user calls exactly its row's actions, and only on the nodes that run them", () => {
		expect(may("dispatch", req("orders.pod-1", "orders.transition"))).toBe(true);
		expect(may("notifications", req("orders.pod-1", "orders.transition"))).toBe(false);
		expect(may("gateway", req("gateway.pod-1", "partners.signingSecret"))).toBe(false);
		expect(may("gateway", req("gateway.pod-1", "partners.createKey"))).toBe(false);
		expect(may("gateway", req("dispatch.pod-1", "dispatch.createDriverToken"))).toBe(false);
		expect(may("notifications", req("gateway.pod-1", "partners.signingSecret"))).toBe(true);
		// The action's service decides the target user: partners.signingSecret sent to an orders node is refused.
		expect(may("notifications", req("orders.pod-1", "partners.signingSecret"))).toBe(false);
		for (const [user, row] of Object.entries(BUS_USERS)) {
			for (const action of row.calls)
				expect([user, action, permissionsFor(user).publish.some((p) => p.endsWith(`.${action}`))]).toEqual([user, action, true]);
		}
		// The operator calls anything, built-in actions included.
		expect(may(OPERATOR_USER, req("gateway.pod-1", "partners.createKey"))).toBe(true);
		expect(may(OPERATOR_USER, req("orders.pod-1", "$node.health"))).toBe(true);
	});

	test("events only from their emitters; discovery only in one's own name", () => {
		const event = (e: string) => packetSubject(P, { type: "EVENT", target: "dispatch.pod-1", sender: "x.y", event: e });
		expect(may("orders", event("orders.created"))).toBe(true);
		expect(may("notifications", event("orders.created"))).toBe(false);
		expect(may("gateway", event("dispatch.driverTokensChanged"))).toBe(false);
		expect(may(OPERATOR_USER, event("orders.created"))).toBe(false);
		expect(may("gateway", packetSubject(P, { type: "INFO", sender: "gateway.pod-1" }))).toBe(true);
		expect(may("gateway", packetSubject(P, { type: "INFO", sender: "orders.pod-1" }))).toBe(false);
		expect(may("gateway", packetSubject(P, { type: "DISCONNECT", sender: "orders.pod-1" }))).toBe(false);
		expect(may("gateway", packetSubject(P, { type: "INFO", target: "orders.pod-1", sender: "orders.pod-2" }))).toBe(false);
		for (const user of ALL_BUS_USERS) {
			const sub = permissionsFor(user).subscribe;
			expect(allowedBy(sub, subscriptionSubject(P, "REQ", `${user}.pod-1`))).toBe(true);
			expect(allowedBy(sub, subscriptionSubject(P, "REQ", `${user === "orders" ? "dispatch" : "orders"}.pod-1`))).toBe(false);
		}
	});

	test("every called action's service is run by some user", () => {
		for (const user of ALL_BUS_USERS) expect(() => permissionsFor(user)).not.toThrow();
	});
});

describe("the committed nats-server configurations", () => {
	test.each(Object.keys(NATS_CONF_FILES))("%s is what `npm run nats-conf` writes", (path) => {
		const committed = readFileSync(join(__dirname, "../../..", path), "utf8");
		// On a difference: run `npm run nats-conf` and commit the result.
		expect(committed).toBe(NATS_CONF_FILES[path]());
	});

	test("the shipped one turns TLS on and reads every user's password from the environment", () => {
		const conf = NATS_CONF_FILES["k8s/infra/nats-server.conf"]();
		expect(conf).toMatch(/^tls \{\n {2}cert_file: "\/etc\/nats-tls\/tls.crt"\n {2}key_file: "\/etc\/nats-tls\/tls.key"/m);
		for (const user of ALL_BUS_USERS) expect(conf).toContain(`user: ${user}\n      password: $NATS_PASSWORD_${user.toUpperCase()}\n`);
		expect(conf).not.toMatch(/user: ride\b/);
	});
});
