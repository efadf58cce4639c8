import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { startNode, type RunningNode } from "../../runtime/node";
import type { ServiceName } from "../../services";
import { TEST_NATS_URL } from "./db";
import type { ApiVersionTable } from "../../contracts/versions";

export interface TestNodeOptions {
	databaseUrl: string;
	services?: ServiceName[];
	/** Extra environment (FLEET_MODE, SIM_SPEED, WEBHOOK_RETRY_SCHEDULE_MS, …). */
	env?: Record<string, string>;
	/** Join other brokers over the real NATS under this namespace. */
	nats?: { namespace: string };
	/** Another API version table (a synthetic version for a test), handed to every service (runtime/node.ts). */
	apiVersions?: ApiVersionTable;
}

export interface TestNode extends RunningNode {
	/** Base URL of the gateway when this node runs it. */
	baseUrl?: string;
}

/** A namespace no other test run shares, so parallel runs on one NATS never see each other. */
/**
 * Presence rules off for tests whose drivers jump across the city between
 * calls and arrive wherever they are (they test matching, clusters,
 * metrics, not presence; test/integration/dispatch/presence.test.ts does).
 */
export const TELEPORTING_DRIVERS: Record<string, string> = { DRIVER_MAX_SPEED_KMH: "1000000", DRIVER_ARRIVAL_RADIUS_M: "1000000" };

export function uniqueNamespace(label = "t"): string {
	return `${label}-${randomBytes(4).toString("hex")}`;
}

/**
 * Starts services in this process the way production does (runtime/node.ts),
 * on the given test database, with the gateway on a free port and metrics off.
 * The settings are handed to startNode (and from it to each service); this
 * process's environment is never written, so nodes with different settings
 * can run side by side.
 */
export async function startTestNode(opts: TestNodeOptions): Promise<TestNode> {
	const env: Record<string, string> = {
		DATABASE_URL: opts.databaseUrl,
		PORT: "0",
		METRICS_PORT: "0",
		LOGLEVEL: process.env.TEST_LOGLEVEL || "warn",
		FLEET_MODE: "live",
		WEBHOOK_ALLOW_PRIVATE: "true",
		NAMESPACE: opts.nats?.namespace ?? uniqueNamespace(),
		...(opts.nats ? { TRANSPORTER: TEST_NATS_URL } : {}),
		...opts.env,
	};
	const node: TestNode = await startNode({ env: { ...process.env, TRANSPORTER: undefined, ...env }, services: opts.services, apiVersions: opts.apiVersions });
	const gateway = node.broker.getLocalService("gateway") as unknown as { server?: Server } | undefined;
	const address = gateway?.server?.address() as AddressInfo | null | undefined;
	if (address && typeof address === "object") node.baseUrl = `http://127.0.0.1:${address.port}`;
	return node;
}
