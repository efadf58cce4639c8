/**
 * The floors of the `fleet` path's location pings: a bare moleculer-web with
 * one route POST /driver/location → bench.ping, a fastest-validator action
 * validating the same body as the platform's (contracts/driver.ts
 * driverLocationsParams: 1-100 fixes, strict) and answering a small JSON.
 * No token lookup: the bearer token is taken as the driver id as it is.
 *
 * PING_FLOOR=validate (default): nothing else, no database.
 * PING_FLOOR=update: plus one `UPDATE drivers SET lat, lng, location_at =
 * now() WHERE id = $1` per ping through Sequelize (the pool the platform
 * uses, DB_POOL_MAX connections) on DATABASE_URL, the platform's own
 * `drivers` table (the run's throw-away database).
 *
 * Prints "listening <port>".
 */
import { ServiceBroker, type ActionParams, type Context } from "moleculer";
import ApiGateway from "moleculer-web";
import type { IncomingMessage } from "node:http";
import { QueryTypes, Sequelize } from "sequelize";
import { driverLocationsParams, type DriverLocationsParams } from "../../contracts/driver";
import { listeningPort } from "./bare-api";

const update = process.env.PING_FLOOR === "update";
const sequelize = update
	? new Sequelize(process.env.DATABASE_URL!, {
			dialect: "postgres",
			logging: false,
			pool: { max: Number(process.env.DB_POOL_MAX || 10), min: 0, idle: 10_000, acquire: 30_000 },
		})
	: undefined;

const broker = new ServiceBroker({ nodeID: `bench-ping-${process.pid}`, logger: false });
broker.createService({
	name: "bench",
	actions: {
		ping: {
			params: driverLocationsParams as unknown as ActionParams,
			async handler(ctx: Context<DriverLocationsParams, { driverId: string }>) {
				const fix = ctx.params.locations[ctx.params.locations.length - 1];
				if (sequelize) {
					await sequelize.query("UPDATE drivers SET lat = $2, lng = $3, location_at = now() WHERE id = $1", {
						bind: [ctx.meta.driverId, fix.lat, fix.lng],
						type: QueryTypes.UPDATE,
					});
				}
				return { driverId: ctx.meta.driverId, location: { lat: fix.lat, lng: fix.lng } };
			},
		},
	},
});
broker.createService({
	name: "api",
	mixins: [ApiGateway as unknown as Record<string, unknown>],
	settings: {
		port: 0,
		ip: "127.0.0.1",
		logRequest: null,
		logResponse: null,
		routes: [
			{
				path: "/driver",
				bodyParsers: { json: true },
				mappingPolicy: "restrict",
				authentication: true,
				aliases: { "POST location": "bench.ping" },
			},
		],
	},
	methods: {
		authenticate(ctx: Context<unknown, { driverId?: string }>, _route: unknown, req: IncomingMessage) {
			const m = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ""));
			if (!m) return Promise.reject(new Error("no token"));
			ctx.meta.driverId = m[1];
			return Promise.resolve({ driverId: m[1] });
		},
	},
});

void broker.start().then(() => console.log(`listening ${listeningPort(broker)}`));
process.on(
	"SIGTERM",
	() =>
		void broker
			.stop()
			.then(() => sequelize?.close())
			.then(() => process.exit(0)),
);
