import { lookup, type LookupAddress } from "node:dns";
import { createSocket, type Socket } from "node:dgram";
import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "pg";
import { createDnsResolveAll, readDnsSettings } from "../../../lib/dns-resolver";
import { resolveAllowed, systemResolveAll } from "../../../lib/ssrf";
import { assertWebhookUrlAllowed } from "../../../lib/webhook-url";
import { classifyError, createWebhookClient } from "../../../services/notifications/webhook-client";
import { connect, createTestDatabase, type TestDatabase } from "../../helpers/db";

/**
 * Webhook host names resolve over asynchronous DNS (lib/dns-resolver.ts), not
 * dns.lookup: a local UDP DNS server (node:dgram) answers some names and
 * never answers others. Stalled names fail as DNS errors once their tries run
 * out, while other names and database queries go on; the SSRF policy still
 * judges the resolved addresses at both checkpoints.
 */

interface Query {
	name: string;
	type: number;
}

const A = 1;
/** name → [A answers, TTL]; names starting with "stall" get no answer at all. */
const ZONE: Record<string, [string[], number]> = {
	"good.test": [["93.184.216.34"], 300],
	"other.test": [["93.184.216.35"], 300],
	"private.test": [["10.1.2.3"], 300],
	"webhook.test": [["127.0.0.1"], 300],
};

let server: Socket;
let dnsServer: string;
const queries: Query[] = [];
let db: TestDatabase;
let pg: Client;
let dir: string;

function parseQuery(msg: Buffer): Query & { end: number } {
	let at = 12;
	const labels: string[] = [];
	while (msg[at] !== 0) {
		labels.push(msg.subarray(at + 1, at + 1 + msg[at]).toString());
		at += msg[at] + 1;
	}
	at += 1;
	return { name: labels.join(".").toLowerCase(), type: msg.readUInt16BE(at), end: at + 4 };
}

function answer(msg: Buffer): Buffer | undefined {
	const q = parseQuery(msg);
	queries.push({ name: q.name, type: q.type });
	if (q.name.startsWith("stall")) return undefined;
	const zone = ZONE[q.name];
	const records = zone && q.type === A ? zone[0] : [];
	const header = Buffer.alloc(12);
	msg.copy(header, 0, 0, 2);
	header.writeUInt16BE(zone ? 0x8180 : 0x8183, 2); // response, recursion available; NXDOMAIN for unknown names
	header.writeUInt16BE(1, 4);
	header.writeUInt16BE(records.length, 6);
	const rrs = records.map((ip) => {
		const rr = Buffer.alloc(16);
		rr.writeUInt16BE(0xc00c, 0);
		rr.writeUInt16BE(A, 2);
		rr.writeUInt16BE(1, 4);
		rr.writeUInt32BE(zone[1], 6);
		rr.writeUInt16BE(4, 10);
		ip.split(".").forEach((b, i) => rr.writeUInt8(Number(b), 12 + i));
		return rr;
	});
	return Buffer.concat([header, msg.subarray(12, q.end), ...rrs]);
}

beforeAll(async () => {
	server = createSocket("udp4");
	server.on("message", (msg, rinfo) => {
		const reply = answer(msg);
		if (reply) server.send(reply, rinfo.port, rinfo.address);
	});
	await new Promise<void>((resolve) => server.bind(0, "127.0.0.1", resolve));
	dnsServer = `127.0.0.1:${server.address().port}`;
	db = await createTestDatabase("dns");
	pg = await connect(db.url);
	dir = mkdtempSync(join(tmpdir(), "ride-dns-"));
}, 30_000);

afterAll(async () => {
	server?.close();
	await pg?.end();
	await db?.drop();
	rmSync(dir, { recursive: true, force: true });
});

const resolver = () => createDnsResolveAll({ servers: [dnsServer], timeoutMs: 200, tries: 2, hostsFile: "" });

test("names that never answer fail as DNS errors once their tries run out; meanwhile other names resolve and the database answers", async () => {
	const resolveAll = resolver();
	const order: string[] = [];
	const stalled = Array.from({ length: 8 }, (_, i) =>
		resolveAll(`stall${i}.test`, 0).then(
			() => order.push("stall answered"),
			(err: NodeJS.ErrnoException) => {
				order.push("stall failed");
				return err;
			},
		),
	);
	// While eight lookups wait on a server that never answers:
	expect(await resolveAll("good.test", 0)).toEqual([{ address: "93.184.216.34", family: 4 }]);
	order.push("good.test");
	expect((await pg.query("SELECT 1 AS one")).rows[0].one).toBe(1);
	order.push("database");
	const errors = await Promise.all(stalled);
	expect(order.slice(0, 2)).toEqual(["good.test", "database"]);
	expect(order.slice(2)).toEqual(Array(8).fill("stall failed"));
	for (const err of errors as NodeJS.ErrnoException[]) {
		expect(err.code).toBe("EAI_AGAIN");
		expect(classifyError(err, false)).toBe("DNS");
	}
	// Each stalled name was asked a bounded number of times (2 tries × A and AAAA), not forever.
	expect(queries.filter((q) => q.name === "stall0.test").length).toBeLessThanOrEqual(4);
});

test("the old dns.lookup waits behind a full libuv thread pool; the resolver does not use it", async () => {
	// Four thread-pool jobs that never finish stand in for four getaddrinfo calls whose DNS never answers
	// (opening a FIFO blocks its thread until a writer comes, like a stalled getaddrinfo).
	const fifo = join(dir, "stall.fifo");
	execFileSync("mkfifo", [fifo]);
	const blockers = Array.from({ length: 4 }, () => open(fifo, "r"));
	const order: string[] = [];
	const old = new Promise<LookupAddress[]>((resolve, reject) => lookup("localhost", { all: true }, (err, a) => (err ? reject(err) : resolve(a)))).then(
		(a) => {
			order.push("dns.lookup");
			return a;
		},
	);
	const resolveAll = resolver();
	expect(await resolveAll("other.test", 0)).toEqual([{ address: "93.184.216.35", family: 4 }]);
	order.push("resolver");
	expect(await resolveAll("localhost", 4)).toEqual([{ address: "127.0.0.1", family: 4 }]);
	order.push("resolver localhost");
	// The default every webhook check uses (lib/ssrf.ts systemResolveAll, dns.lookup before this change) answers too.
	expect(await systemResolveAll("localhost", 4)).toEqual([{ address: "127.0.0.1", family: 4 }]);
	order.push("default");
	// dns.lookup is still waiting for a thread. Free the pool from outside it (a writer process opens the FIFO).
	await new Promise((r) => setImmediate(r));
	expect(order).toEqual(["resolver", "resolver localhost", "default"]);
	await new Promise<void>((resolve, reject) => execFile("sh", ["-c", `echo x > '${fifo}'`], (err) => (err ? reject(err) : resolve())));
	for (const b of await Promise.all(blockers)) await b.close();
	await old;
	expect(order).toEqual(["resolver", "resolver localhost", "default", "dns.lookup"]);
});

test("answers are cached (size and TTL bounded), failures briefly, and concurrent lookups share one query", async () => {
	const resolveAll = resolver();
	const before = queries.filter((q) => q.name === "good.test" && q.type === A).length;
	await Promise.all([resolveAll("good.test", 0), resolveAll("good.test", 0), resolveAll("good.test", 0)]);
	await resolveAll("good.test", 0);
	expect(queries.filter((q) => q.name === "good.test" && q.type === A).length - before).toBe(1);
	await expect(resolveAll("missing.test", 0)).rejects.toMatchObject({ code: "ENOTFOUND" });
	await expect(resolveAll("missing.test", 0)).rejects.toMatchObject({ code: "ENOTFOUND" });
	expect(queries.filter((q) => q.name === "missing.test" && q.type === A)).toHaveLength(1);
});

test("the SSRF policy judges what the resolver answers, at create-order and at connect time", async () => {
	const resolveAll = resolver();
	const strict = { allowPrivate: false };
	await expect(resolveAllowed("private.test", strict, resolveAll)).rejects.toMatchObject({ code: "EBLOCKEDADDRESS" });
	await expect(assertWebhookUrlAllowed("https://private.test/hooks", { ...strict, resolveAll })).rejects.toMatchObject({
		code: 400,
		type: "INVALID_WEBHOOK_URL",
	});
	await expect(assertWebhookUrlAllowed("https://good.test/hooks", { ...strict, resolveAll })).resolves.toBeInstanceOf(URL);

	const client = createWebhookClient({ allowPrivate: false, timeoutMs: 5_000, resolveAll });
	try {
		expect((await client.send("http://webhook.test:9/hooks", {}, Buffer.from("{}"))).outcome).toBe("BLOCKED_ADDRESS");
		const stalled = await client.send("http://stall-client.test/hooks", {}, Buffer.from("{}"));
		expect(stalled.outcome).toBe("DNS");
		expect(stalled.snippet).toMatch(/DNS lookup of stall-client\.test failed/);
	} finally {
		client.close();
	}
});

test("WEBHOOK_DNS_SERVERS and WEBHOOK_DNS_TIMEOUT_MS follow the settings policy", () => {
	expect(readDnsSettings({})).toEqual({ servers: undefined, timeoutMs: 2000, tries: 2 });
	expect(readDnsSettings({ WEBHOOK_DNS_SERVERS: "1.1.1.1, 127.0.0.1:5353,[::1]:53", WEBHOOK_DNS_TIMEOUT_MS: "500" })).toEqual({
		servers: ["1.1.1.1", "127.0.0.1:5353", "[::1]:53"],
		timeoutMs: 500,
		tries: 2,
	});
	expect(() => readDnsSettings({ WEBHOOK_DNS_SERVERS: "dns.google" })).toThrow(/^WEBHOOK_DNS_SERVERS must be a comma list of IP addresses/);
	expect(() => readDnsSettings({ WEBHOOK_DNS_TIMEOUT_MS: "0" })).toThrow(/^WEBHOOK_DNS_TIMEOUT_MS must be/);
});
