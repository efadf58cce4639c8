/**
 * The moleculer-web floor: a bare ApiGateway with one route
 * POST /ride/fare-estimate → bench.estimate, a fastest-validator schema like
 * pricing's (pickup, drop, optional serviceType), answering the body in
 * BENCH_BODY_FILE (a real fare-estimate answer, parsed once).
 *
 * BENCH_ROLE=both (default): gateway and action in this process;
 * gateway / action: one half, over TRANSPORTER (NATS) in NAMESPACE.
 * Prints "listening <port>" (gateway) or "ready" (action).
 */
import { readFileSync } from "node:fs";
import { ServiceBroker } from "moleculer";
import { bareApiService, listeningPort } from "./bare-api";

const role = process.env.BENCH_ROLE || "both";
const answer = JSON.parse(readFileSync(process.env.BENCH_BODY_FILE!, "utf8")) as unknown;
const point = { type: "object", strict: "remove", props: { lat: { type: "number", min: -90, max: 90 }, lng: { type: "number", min: -180, max: 180 } } };

const broker = new ServiceBroker({
	nodeID: `bench-${role}-${process.pid}`,
	namespace: process.env.NAMESPACE || "",
	transporter: (process.env.TRANSPORTER || null) as unknown as "NATS" | null,
	logger: false,
});

if (role !== "gateway") {
	broker.createService({
		name: "bench",
		actions: {
			estimate: {
				params: { pickup: point, drop: point, serviceType: { type: "enum", values: ["scooty", "cab"], optional: true } },
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
