/**
 * One rung of the fare-estimate ladder (bench/fare-ladder.ts): how much of
 * the gap between the bare moleculer-web floor and the platform each layer
 * adds. Every rung answers POST /ride/fare-estimate with the same body.
 *
 *   LADDER=config   bare moleculer-web route + a validated action answering
 *                   BENCH_BODY_FILE, on a broker built from the platform's
 *                   moleculer.config (its middlewares, tracking, timeouts,
 *                   validator, logger)
 *   LADDER=gateway  the platform's gateway service (key, limits, body reader,
 *                   error renderer) on that broker, in front of the same
 *                   canned action as `pricing.estimate` and a
 *                   `partners.authenticate` that knows every key
 *   LADDER=full     every service, started as `npm start` starts them
 *                   (runtime/node.ts), on DATABASE_URL
 *
 * Prints "listening <port>".
 */
import { readFileSync } from "node:fs";
import { ServiceBroker, type ServiceSchema } from "moleculer";
import { bareApiService, listeningPort } from "./bare-api";
import { buildBrokerConfig } from "../../moleculer.config";
import { estimateParams } from "../../contracts/pricing";
import { loadServiceSchema } from "../../services";
import { startNode, withEnv } from "../../runtime/node";

const rung = process.env.LADDER || "config";
const env = { ...process.env };

async function start(): Promise<number> {
	if (rung === "full") {
		const node = await startNode({ env });
		process.on("SIGTERM", () => void node.stop().then(() => process.exit(0)));
		return listeningPort(node.broker, "gateway");
	}
	const answer = JSON.parse(readFileSync(process.env.BENCH_BODY_FILE!, "utf8")) as unknown;
	const broker = new ServiceBroker({ ...buildBrokerConfig(env), nodeID: `ladder-${rung}-${process.pid}` });
	broker.createService({ name: "pricing", actions: { estimate: { access: "partner", params: estimateParams, handler: () => answer } } } as ServiceSchema);
	let server: string;
	if (rung === "config") {
		server = "api";
		broker.createService(
			bareApiService(
				{ "POST fare-estimate": "pricing.estimate" },
				{
					// The access rule needs a partner; the floor has no authentication.
					onBeforeCall(ctx: { meta: Record<string, unknown> }) {
						ctx.meta.partnerId = "ptn_ladder";
					},
				},
				// The access middleware refuses actions without a rule.
				{ actions: { rest: { access: "internal" }, listAliases: false, addRoute: false, removeRoute: false } as ServiceSchema["actions"] },
			),
		);
	} else {
		server = "gateway";
		broker.createService({ name: "partners", actions: { authenticate: { access: "internal", handler: () => ({ partnerId: "ptn_ladder", mode: "test" }) } } } as ServiceSchema);
		broker.createService(withEnv(loadServiceSchema("gateway"), env));
	}
	await broker.start();
	process.on("SIGTERM", () => void broker.stop().then(() => process.exit(0)));
	return listeningPort(broker, server);
}

void start().then(
	(port) => console.log(`listening ${port}`),
	(err: unknown) => {
		console.error(err);
		process.exit(1);
	},
);
