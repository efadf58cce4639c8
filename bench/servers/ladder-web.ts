/**
 * One rung of the fare-estimate ladder (bench/fare-ladder.ts): how much of
 * the gap between the bare moleculer-web floor and the platform each layer
 * adds. Every rung answers POST /ride/fare-estimate with the same body.
 *
 *   LADDER=contract bare moleculer-web (the floor's broker and route) plus
 *                   the work the contract asks of any fare-estimate: the
 *                   Bearer key looked up by its SHA-256 (in the route's
 *                   onBeforeCall, the cheapest place; CONTRACT_AUTH=authenticate
 *                   puts it in moleculer-web's authenticate hook, =none leaves
 *                   it out), and each quote's id an HMAC-SHA256 over the
 *                   partner, the trip and the price (node's createHmac with
 *                   a KeyObject made once, as pricing signs). The ceiling of
 *                   the 0.9 goal: what an implementation with nothing else to
 *                   do would reach.
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
import { createHmac, createSecretKey, hash, randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { readFileSync } from "node:fs";
import { ServiceBroker, type Context, type ServiceSchema } from "moleculer";
import ApiGateway from "moleculer-web";
import { bareApiService, FLOOR_ESTIMATE_PARAMS, listeningPort } from "./bare-api";
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
	const answer = JSON.parse(readFileSync(process.env.BENCH_BODY_FILE!, "utf8")) as { quotes: Array<Record<string, unknown>> };
	if (rung === "contract") return startContractCeiling(answer);
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
		broker.createService({
			name: "partners",
			actions: { authenticate: { access: "internal", handler: () => ({ partnerId: "ptn_ladder", mode: "test" }) } },
		} as ServiceSchema);
		broker.createService(withEnv(loadServiceSchema("gateway"), env));
	}
	await broker.start();
	process.on("SIGTERM", () => void broker.stop().then(() => process.exit(0)));
	return listeningPort(broker, server);
}

/** LADDER=contract: see the header. */
async function startContractCeiling(answer: { quotes: Array<Record<string, unknown>> }): Promise<number> {
	const broker = new ServiceBroker({ nodeID: `ladder-contract-${process.pid}`, logger: false });
	const partnerOfKeyHash = new Map([[hash("sha256", env.BOOTSTRAP_PARTNER_KEY ?? "", "base64url"), "ptn_ladder"]]);
	const signingKey = createSecretKey(randomBytes(32));
	type Trip = { pickup: { lat: number; lng: number }; drop: { lat: number; lng: number } };
	broker.createService({
		name: "contract",
		actions: {
			estimate: {
				params: FLOOR_ESTIMATE_PARAMS,
				handler(ctx: Context<Trip, { partnerId: string }>) {
					const { pickup, drop } = ctx.params;
					const trip = `${ctx.meta.partnerId}|${pickup.lat},${pickup.lng}|${drop.lat},${drop.lng}`;
					const quotes = answer.quotes.map((q) => ({
						...q,
						quoteId: `qt_${createHmac("sha256", signingKey)
							.update(`${trip}|${String(q.serviceType)}|${String(q.totalAmount)}|${String(q.expiresAt)}`)
							.digest("base64url")}`,
					}));
					return { ...answer, quotes };
				},
			},
		},
	});
	const authenticate = (ctx: Context<unknown, { partnerId?: string }>, _route: unknown, req: IncomingMessage) => {
		const m = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "");
		const partnerId = m ? partnerOfKeyHash.get(hash("sha256", m[1], "base64url")) : undefined;
		if (!partnerId) throw new ApiGateway.Errors.UnAuthorizedError(ApiGateway.Errors.ERR_INVALID_TOKEN, null);
		ctx.meta.partnerId = partnerId;
		return null;
	};
	const variant = process.env.CONTRACT_AUTH || "hook";
	const api =
		variant === "authenticate"
			? bareApiService({ "POST fare-estimate": "contract.estimate" }, { authentication: true }, { methods: { authenticate } })
			: variant === "hook"
				? bareApiService({ "POST fare-estimate": "contract.estimate" }, { onBeforeCall: authenticate })
				: bareApiService(
						{ "POST fare-estimate": "contract.estimate" },
						{
							onBeforeCall: (ctx: Context<unknown, { partnerId?: string }>) => {
								ctx.meta.partnerId = "ptn_ladder";
							},
						},
					);
	broker.createService(api);
	await broker.start();
	process.on("SIGTERM", () => void broker.stop().then(() => process.exit(0)));
	return listeningPort(broker);
}

void start().then(
	(port) => console.log(`listening ${port}`),
	(err: unknown) => {
		console.error(err);
		process.exit(1);
	},
);
