/**
 * Read paths: `/ride/status` and `/ride/events` (first page) with a million
 * orders and ten million events in the tables vs the same calls on a
 * database holding only a few rides, in alternating rounds, the platform in
 * one process on core 0, wrk on core 1.
 *
 * Both databases start from the same few real rides booked through the API.
 * The full one is a clone of it, then filled with set-based SQL: N copies of
 * one real order (ids `ord_` + 20 digits, status `dropped`, the same
 * partner) and ten events per copy, copied from a real event; then VACUUM
 * ANALYZE. The loads ask for the real rides and (full) for copies spread over
 * the whole range. BENCH_READS_ORDERS (1,000,000; smoke 10,000).
 */
import { Client } from "pg";
import { SERVER_DATABASE_URL } from "../../test/helpers/db";
import { fmt, sleep, type BenchOptions, type Row } from "../lib/common";
import { alternate, ratios, roundsFor, showSpread, spread, wrk, type PoolRequest } from "../lib/method";
import { DNS_ZONE, orderPool, preparedDatabase, startDnsServer, startHookReceiver, startPlatform } from "../lib/platform";

const CONNECTIONS = 32;
const EVENTS_PER_ORDER = 10;

/** INSERT … SELECT of every column of `table`, some replaced by expressions. */
async function copyRows(pg: Client, table: string, replace: Record<string, string>, from: string): Promise<number> {
	const cols = (
		await pg.query<{ column_name: string }>(
			"SELECT column_name FROM information_schema.columns WHERE table_name = $1 AND table_schema = current_schema() AND is_generated = 'NEVER' ORDER BY ordinal_position",
			[table],
		)
	).rows.map((r) => r.column_name);
	const select = cols.map((c) => replace[c] ?? `s."${c}"`).join(", ");
	const r = await pg.query(`INSERT INTO ${table} (${cols.map((c) => `"${c}"`).join(", ")}) SELECT ${select} FROM ${from}`);
	return r.rowCount ?? 0;
}

async function fill(url: string, orders: number): Promise<{ seconds: number; orders: number; events: number }> {
	const t0 = Date.now();
	const pg = new Client({ connectionString: url });
	await pg.connect();
	try {
		// An order with events (the cancelled one at least): its row and its first event are copied.
		const seedRow = (await pg.query<{ id: string }>("SELECT order_id AS id FROM ride_events ORDER BY occurred_at LIMIT 1")).rows[0];
		if (!seedRow) throw new Error("reads: no ride event to copy");
		const seed = seedRow.id;
		await pg.query("SET synchronous_commit = off");
		const id = "'ord_' || lpad(g::text, 20, '0')";
		const ordersWritten = await copyRows(pg, "orders", { id, status: "'dropped'" }, `orders s, generate_series(1, ${orders}) g WHERE s.id = '${seed}'`);
		const eventsWritten = await copyRows(
			pg,
			"ride_events",
			{
				id: "'evt_' || lpad(g::text, 20, '0')",
				order_id: `'ord_' || lpad(((g - 1) / ${EVENTS_PER_ORDER} + 1)::text, 20, '0')`,
				sequence: `((g - 1) % ${EVENTS_PER_ORDER}) + 1`,
			},
			`(SELECT * FROM ride_events WHERE order_id = '${seed}' ORDER BY sequence LIMIT 1) s, generate_series(1, ${orders * EVENTS_PER_ORDER}) g`,
		);
		if (ordersWritten !== orders || eventsWritten !== orders * EVENTS_PER_ORDER)
			throw new Error(`reads: the fill wrote ${ordersWritten} orders and ${eventsWritten} events, not ${orders} and ${orders * EVENTS_PER_ORDER}`);
		await pg.query("VACUUM ANALYZE orders");
		await pg.query("VACUUM ANALYZE ride_events");
		return { seconds: (Date.now() - t0) / 1000, orders: ordersWritten, events: eventsWritten };
	} finally {
		await pg.end();
	}
}

export async function reads(opts: BenchOptions): Promise<Row[]> {
	const orders = Number(process.env.BENCH_READS_ORDERS || (opts.smoke ? 10_000 : 1_000_000));
	const rounds = roundsFor(opts.smoke);
	const prepared = await preparedDatabase(Number(process.env.BENCH_KEYS || (opts.smoke ? 20 : 1000)));
	const key = prepared.keys[0];
	const dns = await startDnsServer(DNS_ZONE);
	const hooks = await startHookReceiver();
	let empty: Awaited<ReturnType<typeof prepared.clone>> | undefined;
	let full: Awaited<ReturnType<typeof prepared.clone>> | undefined;
	try {
		// A few real rides, booked through the API, in the template.
		const realIds: string[] = [];
		{
			const db = await prepared.clone();
			const p = await startPlatform("one", db.url, key, dns.server);
			try {
				const pool = await orderPool(p.baseUrl, [key], hooks.port, 20);
				for (const [i, r] of pool.entries()) {
					const n = String(900_000_000 + i);
					const res = await fetch(`${p.baseUrl}${r.path}`, {
						method: "POST",
						headers: {
							...Object.fromEntries(Object.entries(r.headers).map(([h, v]) => [h, v.replaceAll("{{n}}", n)])),
							"content-type": "application/json",
						},
						body: r.body.replaceAll("{{n}}", n),
					});
					const body = (await res.json()) as { orderId?: string };
					if (res.status !== 201 || !body.orderId) throw new Error(`create-order answered ${res.status}`);
					realIds.push(body.orderId);
				}
				// One of them cancelled, so at least one ride has events to copy.
				const cancel = await fetch(`${p.baseUrl}/ride/cancel`, {
					method: "POST",
					headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
					body: JSON.stringify({ orderId: realIds[0] }),
				});
				await cancel.text();
				if (cancel.status !== 200) throw new Error(`cancel answered ${cancel.status}`);
				await sleep(1000); // the events written
			} finally {
				await p.stop();
			}
			// The rides' database becomes both sides' start.
			empty = db;
			full = await cloneOf(db.name);
		}
		const filled = await fill(full.url, orders);
		const ids = (big: boolean): string[] =>
			big
				? [...realIds, ...Array.from({ length: 980 }, (_, i) => `ord_${String(1 + Math.floor(((i + 0.5) * orders) / 980)).padStart(20, "0")}`)]
				: realIds;
		const pool = (path: string, big: boolean): PoolRequest[] =>
			ids(big).map((orderId) => ({ path, headers: { Authorization: `Bearer ${key}` }, body: JSON.stringify({ orderId }) }));
		const extra = { emptyEvents: [] as number[], fullEvents: [] as number[], emptyP99: [] as number[], fullP99: [] as number[] };
		const side = (db: { url: string }, big: boolean) => async () => {
			const p = await startPlatform("one", db.url, key, dns.server);
			try {
				const status = pool("/ride/status", big);
				await wrk(p.baseUrl, status, CONNECTIONS, opts.smoke ? 1 : 2);
				const s = await wrk(p.baseUrl, status, CONNECTIONS, opts.seconds);
				const e = await wrk(p.baseUrl, pool("/ride/events", big), CONNECTIONS, opts.seconds);
				if (s.non2xx + e.non2xx > 0) throw new Error(`reads: ${s.non2xx} status and ${e.non2xx} events answers not 2xx`);
				(big ? extra.fullEvents : extra.emptyEvents).push(e.okPerS);
				(big ? extra.fullP99 : extra.emptyP99).push(s.p99);
				return s.okPerS;
			} finally {
				await p.stop();
			}
		};
		const figures = await alternate(rounds, { empty: side(empty, false), full: side(full, true) });
		const status = ratios(figures.full, figures.empty);
		const events = ratios(extra.fullEvents, extra.emptyEvents);
		const med = (xs: number[], d = 0) => fmt(spread(xs).median, d);
		const how = `${rounds} alternating round${rounds > 1 ? "s" : ""}, median (min–max); ${fmt(orders)} orders and ${fmt(orders * EVENTS_PER_ORDER)} events generated in ${fmt(filled.seconds)} s`;
		return [
			{
				path: `/ride/status, ${fmt(orders)} orders vs a few`,
				figure: `${med(figures.full)} req/s`,
				floor: `${realIds.length} orders ${med(figures.empty)} req/s`,
				ratio: showSpread(status),
				goal: "≥ 0.8",
				met: status.median >= 0.8,
				note: `${how}; p99 ${med(extra.fullP99, 1)} ms full, ${med(extra.emptyP99, 1)} ms empty`,
			},
			{
				path: `/ride/events, ${fmt(orders * EVENTS_PER_ORDER)} events vs a few`,
				figure: `${med(extra.fullEvents)} req/s`,
				floor: `${med(extra.emptyEvents)} req/s`,
				ratio: showSpread(events),
				goal: "–",
			},
		];
	} finally {
		dns.close();
		await hooks.close();
		await empty?.drop();
		await full?.drop();
	}
}

/** A clone of a database by name (no connection to it may be open). */
async function cloneOf(name: string): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
	const target = `${name}_full`;
	const admin = new Client({ connectionString: SERVER_DATABASE_URL });
	await admin.connect();
	try {
		await admin.query(`CREATE DATABASE "${target}" TEMPLATE "${name}"`);
	} finally {
		await admin.end();
	}
	const u = new URL(SERVER_DATABASE_URL);
	u.pathname = `/${target}`;
	return {
		url: u.toString(),
		name: target,
		drop: async () => {
			const c = new Client({ connectionString: SERVER_DATABASE_URL });
			await c.connect();
			await c.query(`DROP DATABASE IF EXISTS "${target}" WITH (FORCE)`).finally(() => c.end());
		},
	};
}
