/**
 * The platform as the bench runs it, in its two shapes:
 *
 * - `one`: every service in one process (`npm run start:prod`), pinned to the
 *   server core;
 * - `topology`: the services in separate processes over NATS as k8s deploys
 *   them (k8s/*.yaml: gateway+partners, pricing, dispatch, orders, riders,
 *   notifications), all pinned to the server core, so both shapes have the
 *   same one core.
 *
 * Both as production runs them: live fleet mode, rate limits on and shared
 * in Redis, webhook host names resolved through a DNS server (here a local
 * one the bench starts, bench/lib/method.ts). A prepared database (migrated,
 * with many partner keys) is cloned per start (`CREATE DATABASE … TEMPLATE`),
 * so every round starts from the same rows and no round inherits the rides
 * an earlier one left waiting.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { Client } from "pg";
import { SERVER_DATABASE_URL, TEST_NATS_URL } from "../../test/helpers/db";
import { freePort } from "../../test/helpers/http";
import { startTestNode, uniqueNamespace } from "../../test/helpers/node";
import { processCpuSeconds, sleep, startPlatformProcess, stopAll } from "./common";
import { pin, SERVER_CORE, startDnsServer, type PoolRequest } from "./method";
import type { ServiceProcess } from "../../test/helpers/processes";

export const DNS_ZONE = "partners.bench.test";
/** Bengaluru, roughly: pickups and drops spread over it. */
const CITY = { lat: [12.86, 13.08], lng: [77.5, 77.72] };

const withDatabase = (name: string): string => {
	const u = new URL(SERVER_DATABASE_URL);
	u.pathname = `/${name}`;
	return u.toString();
};

async function admin<T>(f: (c: Client) => Promise<T>): Promise<T> {
	const c = new Client({ connectionString: SERVER_DATABASE_URL });
	await c.connect();
	try {
		return await f(c);
	} finally {
		await c.end();
	}
}

export interface Prepared {
	/** The template database (migrated, with the partners). */
	template: string;
	keys: string[];
	/** A throw-away copy of the template: its URL and name, and drop(). */
	clone(): Promise<{ url: string; name: string; drop: () => Promise<void> }>;
	drop(): Promise<void>;
}

/**
 * A migrated database with `partners` partners (one test key each, made by
 * partners.create in this process), kept as a template for clones.
 */
const preparedByCount = new Map<number, Promise<Prepared>>();

/**
 * The prepared database with `partners` partners, made once per bench run
 * and shared by the paths that ask for the same count (each works on clones);
 * `dropPreparedDatabases` at the end of the run.
 */
export function preparedDatabase(partners: number): Promise<Prepared> {
	let p = preparedByCount.get(partners);
	if (!p) {
		p = prepareDatabase("shared", partners);
		preparedByCount.set(partners, p);
	}
	return p;
}

export async function dropPreparedDatabases(): Promise<void> {
	for (const p of preparedByCount.values()) await (await p.catch(() => undefined))?.drop();
	preparedByCount.clear();
}

export async function prepareDatabase(label: string, partners: number): Promise<Prepared> {
	const t0 = Date.now();
	const template = `ride_bench_${label}_${randomBytes(4).toString("hex")}`;
	await admin((c) => c.query(`CREATE DATABASE "${template}"`));
	const keys: string[] = new Array(partners);
	const node = await startTestNode({ databaseUrl: withDatabase(template), env: { LOGLEVEL: "error" } });
	try {
		let next = 0;
		const worker = async () => {
			while (next < partners) {
				const i = next++;
				const p = await node.broker.call<{ apiKey: string }, { name: string }>("partners.create", { name: `Bench partner ${i}` });
				keys[i] = p.apiKey;
			}
		};
		await Promise.all(Array.from({ length: 8 }, worker));
	} finally {
		await node.stop();
	}
	console.log(`  · database prepared: ${partners} partners (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
	const dropDb = (name: string) => admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined);
	return {
		template,
		keys,
		async clone() {
			const name = `${template}_${randomBytes(3).toString("hex")}`;
			await admin((c) => c.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`));
			return { url: withDatabase(name), name, drop: () => dropDb(name) };
		},
		drop: () => dropDb(template),
	};
}

/** A point spread over the city (deterministic per index). */
export function cityPoint(i: number, salt = 0): { lat: number; lng: number } {
	const f = (k: number) => {
		const x = Math.sin((i + 1) * 12.9898 + k * 78.233 + salt * 37.719) * 43758.5453;
		return x - Math.floor(x);
	};
	return {
		lat: Math.round((CITY.lat[0] + f(1) * (CITY.lat[1] - CITY.lat[0])) * 1e5) / 1e5,
		lng: Math.round((CITY.lng[0] + f(2) * (CITY.lng[1] - CITY.lng[0])) * 1e5) / 1e5,
	};
}

export const SINGLE_TRIP = { pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } };

/** fare-estimate requests: `trips` trips spread over the city, key i mod keys (spread), or one key and one trip. */
export function farePool(keys: string[], trips: number, spreadOut: boolean): PoolRequest[] {
	if (!spreadOut) return [{ path: "/ride/fare-estimate", headers: { Authorization: `Bearer ${keys[0]}` }, body: JSON.stringify(SINGLE_TRIP) }];
	return Array.from({ length: trips }, (_, i) => ({
		path: "/ride/fare-estimate",
		headers: { Authorization: `Bearer ${keys[i % keys.length]}` },
		body: JSON.stringify({ pickup: cityPoint(i), drop: cityPoint(i, 1) }),
	}));
}

/** The platform's webhooks land here (answered 200 at once); the bench counts them. */
export async function startHookReceiver(): Promise<{ port: number; count: () => number; close: () => Promise<void> }> {
	let n = 0;
	const server: Server = createServer((req, res) => {
		req.resume();
		req.on("end", () => {
			n++;
			res.writeHead(200).end();
		});
	});
	await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
	return {
		port: (server.address() as AddressInfo).port,
		count: () => n,
		close: () =>
			new Promise<void>((r) => {
				server.closeAllConnections();
				server.close(() => r());
			}),
	};
}

/**
 * create-order requests as a production partner sends them: key i mod keys, a
 * quoteId from that key's own fare-estimate of the trip, a fresh
 * Idempotency-Key and rider phone per request ({{n}}), and a webhook URL
 * whose host name (one per partner) resolves through the bench's DNS server.
 */
export async function orderPool(baseUrl: string, keys: string[], hookPort: number, size: number): Promise<PoolRequest[]> {
	const pool: PoolRequest[] = new Array(size);
	let next = 0;
	const worker = async () => {
		while (next < size) {
			const i = next++;
			const key = keys[i % keys.length];
			const trip = { pickup: cityPoint(i), drop: cityPoint(i, 1) };
			const r = await fetch(`${baseUrl}/ride/fare-estimate`, {
				method: "POST",
				headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
				body: JSON.stringify({ ...trip, serviceType: "cab" }),
			});
			const text = await r.text();
			if (r.status !== 200) throw new Error(`fare-estimate for the order pool answered ${r.status}: ${text.slice(0, 200)}`);
			const quote = (JSON.parse(text) as { quotes: Array<{ quoteId: string; serviceType: string }> }).quotes.find((q) => q.serviceType === "cab");
			pool[i] = {
				path: "/ride/create-order",
				headers: { Authorization: `Bearer ${key}`, "Idempotency-Key": `bench-{{n}}` },
				body: JSON.stringify({
					user: { name: "Bench Rider", phone: "+919{{n}}" },
					serviceType: "cab",
					pickup: { ...trip.pickup, address: "Bench pickup" },
					drop: trip.drop,
					quoteId: quote?.quoteId,
					webhookURL: `http://p${i % keys.length}.${DNS_ZONE}:${hookPort}/hooks`,
					metadata: { partnerRef: "bench-{{n}}" },
				}),
			};
		}
	};
	await Promise.all(Array.from({ length: 8 }, worker));
	return pool;
}

export interface RunningPlatform {
	baseUrl: string;
	procs: ServiceProcess[];
	/** CPU seconds of all its processes so far. */
	cpuSeconds(): number;
	/** Queries sent so far by all its processes (the probe). */
	queries(): number;
	stop(): Promise<void>;
}

/** The k8s Deployments' SERVICES (k8s/*.yaml); the first one serves HTTP. */
export const TOPOLOGY = ["gateway,partners", "pricing", "dispatch", "orders", "riders", "notifications"];

/**
 * Starts the platform on `databaseUrl` in one shape, pinned to the server
 * core, and waits until a fare-estimate with `key` answers 200.
 */
export async function startPlatform(
	shape: "one" | "topology",
	databaseUrl: string,
	key: string,
	dnsServer: string,
	extraEnv: Record<string, string> = {},
): Promise<RunningPlatform> {
	const port = await freePort();
	const env: Record<string, string> = {
		DATABASE_URL: databaseUrl,
		FLEET_MODE: "live",
		REDIS_URL: process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379",
		// On, and far above the load: every request pays the limiter's Redis round trip, none is refused.
		RATE_LIMIT_PER_MINUTE: "100000000",
		WEBHOOK_DNS_SERVERS: dnsServer,
		...extraEnv,
	};
	const started: Array<{ proc: ServiceProcess; probe: () => { queries: number } }> = [];
	const stop = () => stopAll(...started.map((s) => s.proc));
	try {
		if (shape === "one") {
			started.push(await startPlatformProcess("platform", { ...env, PORT: String(port) }));
		} else {
			const ns = { TRANSPORTER: TEST_NATS_URL, NAMESPACE: uniqueNamespace("bench") };
			started.push(await startPlatformProcess("gateway", { ...env, ...ns, SERVICES: TOPOLOGY[0], PORT: String(port) }));
			started.push(
				...(await Promise.all(
					TOPOLOGY.slice(1).map((services) => startPlatformProcess(services, { ...env, ...ns, SERVICES: services, PORT: "0", HEALTH_PORT: "" })),
				)),
			);
		}
		for (const s of started) pin(s.proc.child.pid, SERVER_CORE);
		const baseUrl = `http://127.0.0.1:${port}`;
		for (let i = 0; ; i++) {
			const r = await fetch(`${baseUrl}/ride/fare-estimate`, {
				method: "POST",
				headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
				body: JSON.stringify(SINGLE_TRIP),
			}).catch(() => undefined);
			await r?.text();
			if (r?.status === 200) break;
			if (i > 100) throw new Error(`the platform (${shape}) never answered a fare-estimate: ${r?.status}`);
			await sleep(200);
		}
		return {
			baseUrl,
			procs: started.map((s) => s.proc),
			cpuSeconds: () => started.reduce((a, s) => a + processCpuSeconds(s.proc.child.pid), 0),
			queries: () => started.reduce((a, s) => a + s.probe().queries, 0),
			stop,
		};
	} catch (err) {
		await stop();
		throw err;
	}
}

export { startDnsServer };
