import os from "node:os";
import type { BrokerOptions, Tracer } from "moleculer";
import { createValidator } from "./lib/validator";
import { readBusUser, readNatsOptions } from "./lib/nats-settings";
import { busNodeId, subjectToken } from "./lib/bus-subjects";
import { ALL_BUS_USERS } from "./contracts/bus";
import { permissionsFor } from "./lib/bus-permissions";
import { readSettings, type Env, type RuntimeSettings } from "./lib/settings";
import { createTraceRedactor } from "./lib/trace-redaction";
import { AccessMiddleware } from "./middlewares/access.middleware";
import { DataErrorsMiddleware } from "./middlewares/data-errors.middleware";
import { ObservabilityMiddleware, jsonLogFormatter } from "./middlewares/observability.middleware";
import { readShutdownSettings } from "./lib/shutdown-settings";
import { CoalescingNatsTransporter } from "./lib/coalescing-nats-transporter";

/**
 * Trace exporters by name (`TRACING_EXPORTER`, comma list, checked by
 * lib/settings): Console prints spans, Event emits them as `$tracing.spans`
 * broker events for a collector service, Zipkin posts them to `ZIPKIN_URL`
 * (Jaeger and Tempo accept it too).
 */
function traceExporters(s: RuntimeSettings): Tracer.TracingExporter[] {
	return s.tracingExporters.map((name): Tracer.TracingExporter => {
		switch (name) {
			case "Console":
				return { type: "Console", options: { colors: false, width: 100 } };
			case "Event":
				return { type: "Event", options: { eventName: "$tracing.spans", interval: 5, broadcast: false } };
			case "Zipkin":
				return { type: "Zipkin", options: { baseURL: s.zipkinUrl, interval: 5 } };
		}
	});
}

/**
 * What a span says about a call (lib/trace-redaction.ts): params with every
 * value redacted but the allow-listed ids and enumerations, meta reduced to
 * allow-listed keys, never the response. Global for actions and events; an
 * action's own `tracing.tags` would replace it, so none declares one.
 */
function traceTags(s: RuntimeSettings): Tracer.TracerOptions["tags"] {
	const redactor = createTraceRedactor(s.tracingTagsAllow);
	// Moleculer calls it with (ctx) when the span starts and (ctx, response) when it ends.
	const tags = (ctx: { params?: unknown; meta?: unknown }, ...response: unknown[]) =>
		response.length > 0 ? {} : { params: redactor.params(ctx.params), meta: redactor.meta(ctx.meta) };
	return { action: tags, event: tags } as unknown as Tracer.TracerOptions["tags"];
}

/**
 * A node's id on the bus: `<user>.<name>` when it logs in as a bus user
 * (NATS_USER), so the NATS permissions let it speak only in its own name
 * (lib/bus-subjects.ts); otherwise the name as one subject token.
 */
export function busNodeIdFor(env: Env, name: string): string {
	const user = readBusUser(env);
	return user === undefined ? subjectToken(name) : busNodeId(user, name);
}

/**
 * Broker options from the operations contract. `buildBrokerConfig(env)` is
 * what the runner, the REPL and the tests use; the default export serves
 * `moleculer-runner` users.
 */
export function buildBrokerConfig(env: Env = process.env): BrokerOptions {
	const s = readSettings(env);
	const service = (s.services ?? ["all"]).join("+");
	const jsonLogs = s.logFormat === "json";
	// Bound for a graceful stop: running calls and event handlers get this long to finish.
	const shutdownTimeout = readShutdownSettings(env).brokerStopMs;
	return {
		namespace: s.namespace,
		nodeID: busNodeIdFor(env, s.nodeId ?? `${os.hostname()}-${service}-${process.pid}`),
		// NATS login and TLS from the environment or mounted secret files (lib/nats-settings.ts);
		// Moleculer's NATS transporter, sending a loop turn's packets in one socket write (lib/coalescing-nats-transporter.ts).
		// Subjects that name the action and event, so NATS permissions can scope each bus user
		// (contracts/bus.ts); a known user's forbidden publish fails at once (BUS_PERMISSION_DENIED).
		// A new instance per broker config: each broker owns its transporter.
		transporter: s.transporter ? new CoalescingNatsTransporter({ url: s.transporter, ...readNatsOptions(env) }, busIdentity(env)) : null,
		logger: {
			type: "Console",
			options: {
				level: s.logLevel,
				// JSON lines in production (one object per line, easy to ship) with the
				// request id and order id of the handler that logged; readable otherwise.
				formatter: jsonLogs ? jsonLogFormatter : "short",
				colors: !jsonLogs && process.stdout.isTTY,
				moduleColors: false,
			},
		},
		// A call whose peer is silent fails after this (REQUEST_TIMEOUT_MS); a bus outage fails calls at once (the transporter).
		requestTimeout: s.requestTimeoutMs,
		retryPolicy: { enabled: false },
		// Calls that cannot reach a node fail fast; the gateway turns them into 503.
		circuitBreaker: { enabled: false },
		// stopDelay: after announcing "no services here" on stop, keep serving
		// calls already on their way long enough for every peer to hear it.
		registry: { strategy: "RoundRobin", preferLocal: true, stopDelay: s.transporter ? 1000 : 100 },
		// Graceful stop (runtime/shutdown.ts): the broker waits for running calls
		// and event handlers before it stops the services.
		tracking: { enabled: true, shutdownTimeout },
		// Signals are handled by bin/server.ts (drain first, then stop), not by the broker.
		skipProcessEventRegistration: true,
		heartbeatInterval: 5,
		heartbeatTimeout: 15,
		serializer: "JSON",
		// Partner-readable messages that name the field, no U+0000/unpaired surrogates, strict objects' unknown keys listed (lib/validator.ts).
		validator: createValidator(),
		metrics: {
			enabled: s.metricsPort > 0,
			// Process and OS figures (memory, CPU) in every environment: Moleculer leaves them out under NODE_ENV=test.
			collectProcessMetrics: true,
			reporter: s.metricsPort > 0 ? [{ type: "Prometheus", options: { port: s.metricsPort, path: "/metrics" } }] : [],
		},
		// TRACING=true: spans for every call and event, across nodes (the trace
		// id travels with the request over NATS); exporters from TRACING_EXPORTER.
		tracing: {
			enabled: s.tracing,
			exporter: s.tracing ? traceExporters(s) : [],
			events: true,
			sampling: { rate: s.tracingSampleRate },
			// Secrets and personal data stay in the process: redacted params and meta, and errors
			// without `data` (a validation error's data carries the refused value).
			tags: traceTags(s),
			errorFields: ["name", "message", "code", "type", "retryable"],
		},
		middlewares: [DataErrorsMiddleware, AccessMiddleware, ObservabilityMiddleware],
	};
}

/** The bus user and, for one of contracts/bus.ts, the subjects it may publish to. */
function busIdentity(env: Env): { user?: string; allowPublish?: readonly string[] } {
	const user = readBusUser(env);
	if (user === undefined) return {};
	return ALL_BUS_USERS.includes(user) ? { user, allowPublish: permissionsFor(user).publish } : { user };
}

/**
 * `moleculer-runner` calls a default export that is a function: the config
 * (and its transporter) is built when the runner asks, not whenever a module
 * imports this file for `buildBrokerConfig`.
 */
export default function runnerConfig(): BrokerOptions {
	return buildBrokerConfig(process.env);
}
