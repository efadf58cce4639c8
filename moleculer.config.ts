import os from "node:os";
import type { BrokerOptions } from "moleculer";
import { readSettings, type Env } from "./lib/settings";
import { AccessMiddleware } from "./mixins/access.middleware";

/**
 * Broker options from the operations contract. `buildBrokerConfig(env)` is
 * what the runner, the REPL and the tests use; the default export serves
 * `moleculer-runner` users.
 */
export function buildBrokerConfig(env: Env = process.env): BrokerOptions {
	const s = readSettings(env);
	const service = (s.services ?? ["all"]).join("+");
	return {
		namespace: s.namespace,
		nodeID: env.NODE_ID || `${os.hostname()}-${service}-${process.pid}`,
		transporter: s.transporter ? { type: "NATS", options: { url: s.transporter } } : null,
		logger: {
			type: "Console",
			options: {
				level: s.logLevel,
				// JSON lines in production (one object per line, easy to ship); readable otherwise.
				formatter: s.production || env.LOG_FORMAT === "json" ? "json" : "short",
				colors: !s.production && process.stdout.isTTY,
				moduleColors: false,
			},
		},
		requestTimeout: 15_000,
		retryPolicy: { enabled: false },
		// Calls that cannot reach a node fail fast; the gateway turns them into 503.
		circuitBreaker: { enabled: false },
		registry: { strategy: "RoundRobin", preferLocal: true },
		heartbeatInterval: 5,
		heartbeatTimeout: 15,
		serializer: "JSON",
		validator: true,
		metrics: {
			enabled: s.metricsPort > 0,
			reporter: s.metricsPort > 0 ? [{ type: "Prometheus", options: { port: s.metricsPort, path: "/metrics" } }] : [],
		},
		tracing: {
			enabled: s.tracing,
			exporter: [{ type: "Console", options: { logger: undefined } }],
		},
		middlewares: [AccessMiddleware],
	};
}

export default buildBrokerConfig();
