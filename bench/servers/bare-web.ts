/**
 * The moleculer-web floor: a bare ApiGateway with one route
 * POST /ride/fare-estimate → bench.estimate, a fastest-validator schema like
 * pricing's (pickup, drop, optional serviceType), answering the body in
 * BENCH_BODY_FILE (a real fare-estimate answer, parsed once).
 *
 * BENCH_ROLE=both (default): gateway and action in this process;
 * gateway / action: one half, over TRANSPORTER (NATS) in NAMESPACE, with
 * Moleculer's stock NATS transporter, or with the platform's own
 * (lib/coalescing-nats-transporter.ts) when BENCH_TRANSPORTER=coalescing:
 * the like-for-like floor of the platform over NATS.
 * Prints "listening <port>" (gateway) or "ready" (action).
 */
import { readFileSync } from "node:fs";
import { ServiceBroker } from "moleculer";
import { CoalescingNatsTransporter } from "../../lib/coalescing-nats-transporter";
import { bareApiService, FLOOR_ESTIMATE_PARAMS, listeningPort } from "./bare-api";

const role = process.env.BENCH_ROLE || "both";
const answer = JSON.parse(readFileSync(process.env.BENCH_BODY_FILE!, "utf8")) as unknown;

const broker = new ServiceBroker({
	nodeID: `bench-${role}-${process.pid}`,
	namespace: process.env.NAMESPACE || "",
	transporter: !process.env.TRANSPORTER
		? null
		: process.env.BENCH_TRANSPORTER === "coalescing"
			? new CoalescingNatsTransporter({ url: process.env.TRANSPORTER })
			: (process.env.TRANSPORTER as unknown as "NATS"),
	logger: false,
});

if (role !== "gateway") {
	broker.createService({
		name: "bench",
		actions: {
			estimate: {
				params: FLOOR_ESTIMATE_PARAMS,
				handler: () => answer,
			},
		},
	});
}
if (role !== "action") {
	broker.createService(bareApiService({ "POST fare-estimate": "bench.estimate" }));
}

void broker.start().then(async () => {
	if (role === "action") {
		console.log("ready");
		return;
	}
	await broker.waitForServices(["bench"]);
	console.log(`listening ${listeningPort(broker)}`);
});
process.on("SIGTERM", () => void broker.stop().then(() => process.exit(0)));
