/**
 * Paths 1 and 2: POST /ride/fare-estimate, 50 connections, against its floors
 * measured back to back in the same run with the same ~1.4 KB answer:
 *   1. the platform in one process vs a bare moleculer-web + one validated
 *      action, and vs raw node:http; and vs the contract's ceiling: that bare
 *      moleculer-web doing only what the contract asks of every estimate (the
 *      key looked up by its SHA-256, each quote id an HMAC), in
 *      bench/servers/ladder-web.ts (LADDER=contract), so the table says how
 *      far the 0.9 goal is from what any fare-estimate on this stack and
 *      machine can reach;
 *   2. the platform as four processes over NATS (gateway+partners / pricing /
 *      dispatch+fleet / the rest), live fleet mode as k8s and compose deploy
 *      it, vs bare moleculer-web with its action in a second process over the
 *      same NATS.
 */
import { uniqueNamespace } from "../../test/helpers/node";
import { freePort } from "../../test/helpers/http";
import { createTestDatabase, TEST_NATS_URL } from "../../test/helpers/db";
import { apiKey, fareAnswerFile, fmt, startHelper, startPlatformProcess, stopAll, warmAndLoad, type BenchOptions, type Row } from "../lib/common";

const BODY = JSON.stringify({ pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } });
const CONNECTIONS = 50;

function ratioRow(path: string, figure: number, floorName: string, floor: number, goal: number, extra = ""): Row {
	const ratio = figure / floor;
	return {
		path,
		figure: `${fmt(figure)} req/s${extra}`,
		floor: `${floorName} ${fmt(floor)} req/s`,
		ratio: fmt(ratio, 2),
		goal: `≥ ${goal}`,
		met: ratio >= goal,
	};
}

export async function fareEstimate(opts: BenchOptions): Promise<Row[]> {
	const rows: Row[] = [];
	const db = await createTestDatabase("benchfare");
	const key = apiKey();
	const headers = { authorization: `Bearer ${key}` };
	const seconds = opts.seconds;
	let platform, web, raw, contract;
	try {
		// 1. one process
		const port = await freePort();
		platform = await startPlatformProcess("platform", { DATABASE_URL: db.url, PORT: String(port), BOOTSTRAP_PARTNER_KEY: key, FLEET_MODE: "simulated" });
		const url = `http://127.0.0.1:${port}/ride/fare-estimate`;
		const { file: bodyFile, text } = await fareAnswerFile(url, headers, BODY);
		web = await startHelper("bare-web.ts", { BENCH_BODY_FILE: bodyFile });
		raw = await startHelper("raw-http.ts", { BENCH_BODY_FILE: bodyFile });
		contract = await startHelper("ladder-web.ts", { BENCH_BODY_FILE: bodyFile, LADDER: "contract", BOOTSTRAP_PARTNER_KEY: key });
		const ours = await warmAndLoad({ url, connections: CONNECTIONS, seconds, headers, body: BODY }, opts);
		const bare = await warmAndLoad({ url: `http://127.0.0.1:${web.port}/ride/fare-estimate`, connections: CONNECTIONS, seconds, body: BODY }, opts);
		const node = await warmAndLoad({ url: `http://127.0.0.1:${raw.port}/ride/fare-estimate`, connections: CONNECTIONS, seconds, body: BODY }, opts);
		const ceiling = await warmAndLoad(
			{ url: `http://127.0.0.1:${contract.port}/ride/fare-estimate`, connections: CONNECTIONS, seconds, headers, body: BODY },
			opts,
		);
		if (ceiling.non2xx + ceiling.errors > 0) throw new Error(`the contract's ceiling answered ${ceiling.non2xx} non-2xx, ${ceiling.errors} errors`);
		const bad = ours.non2xx + ours.errors;
		const note = `${text.length} B body${bad ? `, ${bad} non-2xx/errors` : ""}, p99 ${ours.p99} ms`;
		rows.push({ ...ratioRow("fare-estimate, 1 process vs bare moleculer-web", ours.rps, "moleculer-web", bare.rps, 0.9), note });
		rows.push({
			...ratioRow("fare-estimate, 1 process vs raw node:http", ours.rps, "node:http", node.rps, 0.5),
			note: `${note}; bare moleculer-web itself is ${fmt(bare.rps / node.rps, 2)} × node:http`,
		});
		rows.push({
			path: "fare-estimate vs the contract's ceiling",
			figure: `${fmt(ours.rps)} req/s`,
			floor: `moleculer-web + key check + signed quotes ${fmt(ceiling.rps)} req/s`,
			ratio: fmt(ours.rps / ceiling.rps, 2),
			goal: "–",
			note: `the ceiling itself is ${fmt(ceiling.rps / bare.rps, 2)} × bare moleculer-web: no fare-estimate on this stack and machine can pass that ratio`,
		});
		await stopAll(platform.proc, web.proc, raw.proc, contract.proc);
		platform = web = raw = contract = undefined;

		// 2. over NATS
		rows.push(...(await overNats(db.url, opts, bodyFile)));
	} finally {
		await stopAll(platform?.proc, web?.proc, raw?.proc, contract?.proc);
		await db.drop();
	}
	return rows;
}

async function overNats(databaseUrl: string, opts: BenchOptions, bodyFile: string): Promise<Row[]> {
	const key = apiKey();
	const headers = { authorization: `Bearer ${key}` };
	const ns = uniqueNamespace("bench");
	// The production topology as k8s and compose run it: live fleet mode (no simulator moving drivers in the dispatch process).
	const common = { DATABASE_URL: databaseUrl, TRANSPORTER: TEST_NATS_URL, NAMESPACE: ns, FLEET_MODE: "live" };
	const port = await freePort();
	const procs = [];
	try {
		procs.push((await startPlatformProcess("gateway", { ...common, SERVICES: "gateway,partners", PORT: String(port), BOOTSTRAP_PARTNER_KEY: key })).proc);
		const rest = await Promise.all([
			startPlatformProcess("pricing", { ...common, SERVICES: "pricing", PORT: "0" }),
			startPlatformProcess("dispatch", { ...common, SERVICES: "dispatch,fleet", PORT: "0" }),
			startPlatformProcess("rest", { ...common, SERVICES: "riders,orders,notifications", PORT: "0" }),
		]);
		procs.push(...rest.map((r) => r.proc));
		const url = `http://127.0.0.1:${port}/ride/fare-estimate`;
		for (let i = 0; i < 100; i++) {
			const r = await fetch(url, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: BODY });
			await r.text();
			if (r.status === 200) break;
			await new Promise((res) => setTimeout(res, 300));
		}
		const bareNs = uniqueNamespace("benchbare");
		const action = await startHelper("bare-web.ts", { BENCH_BODY_FILE: bodyFile, BENCH_ROLE: "action", TRANSPORTER: TEST_NATS_URL, NAMESPACE: bareNs });
		procs.push(action.proc);
		const gw = await startHelper("bare-web.ts", { BENCH_BODY_FILE: bodyFile, BENCH_ROLE: "gateway", TRANSPORTER: TEST_NATS_URL, NAMESPACE: bareNs });
		procs.push(gw.proc);
		const ours = await warmAndLoad({ url, connections: CONNECTIONS, seconds: opts.seconds, headers, body: BODY }, opts);
		const bare = await warmAndLoad(
			{ url: `http://127.0.0.1:${gw.port}/ride/fare-estimate`, connections: CONNECTIONS, seconds: opts.seconds, body: BODY },
			opts,
		);
		const bad = ours.non2xx + ours.errors;
		return [
			{
				...ratioRow("fare-estimate, 4 processes over NATS", ours.rps, "moleculer-web over NATS", bare.rps, 0.9),
				note: `p99 ${ours.p99} ms${bad ? `, ${bad} non-2xx/errors` : ""}`,
			},
		];
	} finally {
		await stopAll(...procs);
	}
}
