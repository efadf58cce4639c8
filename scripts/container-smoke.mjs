#!/usr/bin/env node
// The HTTP side of scripts/container-check.sh: talks to a running platform
// (containers) from the host, on 127.0.0.1 only. No dependencies.
//
//   node scripts/container-smoke.mjs ready <url> [seconds=90]   # until <url> answers 200
//   node scripts/container-smoke.mjs fare <api> <key>            # a fare estimate for both service types
//   node scripts/container-smoke.mjs ride <api> <key> <whsec> <hookPort> [seconds=120]
//       # books a sandbox "fast" cab with its webhookURL on this host, then waits
//       # for a webhook with status "dropped" whose Standard Webhooks signature
//       # verifies with <whsec>
//   node scripts/container-smoke.mjs book <api> <key> <webhookURL> # create-order answers 201
//
// Prints one line; exit 0 when the check holds, 1 otherwise.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const [command, ...args] = process.argv.slice(2);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function post(api, key, path, body, headers = {}) {
	const res = await fetch(`${api}${path}`, {
		method: "POST",
		headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
		body: JSON.stringify(body),
		signal: AbortSignal.timeout(10_000),
	});
	const text = await res.text();
	let json;
	try {
		json = JSON.parse(text);
	} catch {
		json = undefined;
	}
	return { status: res.status, json, text };
}

async function ready(url, seconds = "90") {
	const until = Date.now() + Number(seconds) * 1000;
	const started = Date.now();
	let last = "no answer";
	while (Date.now() < until) {
		try {
			const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
			if (res.status === 200) return `ready in ${((Date.now() - started) / 1000).toFixed(1)} s`;
			last = `HTTP ${res.status}`;
		} catch (err) {
			last = err.cause?.code ?? err.message;
		}
		await sleep(250);
	}
	throw new Error(`${url} not ready after ${seconds} s (${last})`);
}

const TRIP = { pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } };

async function fare(api, key) {
	const r = await post(api, key, "/ride/fare-estimate", TRIP);
	if (r.status !== 200) throw new Error(`fare-estimate answered ${r.status}: ${r.text.slice(0, 300)}`);
	const types = JSON.stringify(r.json).match(/"(scooty|cab)"/g) ?? [];
	if (!types.some((t) => t.includes("scooty")) || !types.some((t) => t.includes("cab")))
		throw new Error(`fare-estimate without both service types: ${r.text.slice(0, 300)}`);
	return "fare estimate 200 with scooty and cab";
}

/** Standard Webhooks: v1 signatures are base64 HMAC-SHA256 of `id.timestamp.body` keyed by the secret's bytes. */
function signatureValid(secret, headers, body) {
	const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
	const expected = createHmac("sha256", key).update(`${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${body}`).digest();
	return String(headers["webhook-signature"] ?? "")
		.split(" ")
		.some((s) => {
			const [version, sig] = s.split(",");
			const given = Buffer.from(sig ?? "", "base64");
			return version === "v1" && given.length === expected.length && timingSafeEqual(given, expected);
		});
}

function createOrder(api, key, webhookURL) {
	return post(
		api,
		key,
		"/ride/create-order",
		{
			user: { name: "Container Check", phone: "+919812345678" },
			serviceType: "cab",
			...TRIP,
			webhookURL,
			metadata: { sandbox: "fast", partnerRef: "container-check" },
		},
		{ "idempotency-key": `container-check-${process.pid}-${Date.now()}` },
	);
}

async function book(api, key, webhookURL) {
	const order = await createOrder(api, key, webhookURL);
	if (order.status !== 201) throw new Error(`create-order answered ${order.status}: ${order.text.slice(0, 300)}`);
	return `booked: ${order.json?.orderId ?? "201"}`;
}

async function ride(api, key, secret, hookPort, seconds = "120") {
	const received = [];
	let badSignatures = 0;
	let dropped;
	const server = createServer((req, res) => {
		let body = "";
		req.on("data", (c) => (body += c));
		req.on("end", () => {
			res.writeHead(204).end();
			if (!signatureValid(secret, req.headers, body)) {
				badSignatures += 1;
				return;
			}
			const status = JSON.stringify(JSON.parse(body)).match(/"status":"(\w+)"/)?.[1];
			received.push(status);
			if (status === "dropped") dropped = true;
		});
	});
	await new Promise((r) => server.listen(Number(hookPort), "127.0.0.1", r));
	try {
		const order = await createOrder(api, key, `http://127.0.0.1:${hookPort}/hooks/rides`);
		if (order.status !== 201) throw new Error(`create-order answered ${order.status}: ${order.text.slice(0, 300)}`);
		const until = Date.now() + Number(seconds) * 1000;
		while (!dropped && Date.now() < until) await sleep(200);
		if (!dropped)
			throw new Error(`no signed "dropped" webhook within ${seconds} s; received [${received.join(", ")}], ${badSignatures} with a bad signature`);
		if (badSignatures > 0) throw new Error(`${badSignatures} webhook(s) with a bad signature`);
		return `ride booked (201) and driven to dropped; signed webhooks received: ${received.join(", ")}`;
	} finally {
		server.close();
	}
}

const commands = { ready, fare, book, ride };
if (!commands[command]) {
	console.error(`usage: container-smoke.mjs ready|fare|book|ride ...`);
	process.exit(2);
}
commands[command](...args).then(
	(line) => {
		console.log(line);
		process.exit(0);
	},
	(err) => {
		console.log(`FAILED: ${err.message}`);
		process.exit(1);
	},
);
