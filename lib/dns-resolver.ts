import type { LookupAddress } from "node:dns";
import { Resolver } from "node:dns/promises";
import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { LRUCache } from "lru-cache";
import { envInt, envString, SettingError, type Env } from "./settings";

/**
 * Webhook host names resolved without `dns.lookup`. `dns.lookup` runs
 * getaddrinfo on libuv's thread pool (4 threads, shared with file access,
 * crypto and zlib) and cannot be cancelled: a few partner hosts whose DNS
 * never answers hold every thread, and everything else on the pool waits.
 * Here the queries go over c-ares (`dns/promises` Resolver: asynchronous
 * sockets, no thread) with a per-try timeout and a bounded number of tries, and
 * answers are kept in a small LRU cache (size-bounded, each entry at most its
 * DNS TTL and at most `maxTtlMs`; failures for `negativeTtlMs`). Concurrent
 * lookups of one name share one query.
 *
 * `localhost` (and `*.localhost`) answer loopback without a query (RFC 6761),
 * and names in the hosts file (/etc/hosts) answer from it, as getaddrinfo
 * would. IP literals never get here (lib/ssrf.ts handles them).
 *
 * Failures carry getaddrinfo-style codes (ENOTFOUND, EAI_AGAIN for a
 * timeout, EAI_FAIL) so callers classify them as DNS errors.
 */

/** Same shape as lib/ssrf.ts `ResolveAll` (family 0 = both). */
export type DnsResolveAll = (hostname: string, family: number) => Promise<LookupAddress[]>;

export interface DnsResolverOptions {
	/** DNS servers ("1.1.1.1", "127.0.0.1:5353", "[::1]:53"); default: the system's (resolv.conf). */
	servers?: string[];
	/** Per-try timeout (c-ares). */
	timeoutMs?: number;
	tries?: number;
	/** Names kept in the cache. */
	cacheSize?: number;
	/** Upper bound on how long an answer is kept (its own TTL may be shorter). */
	maxTtlMs?: number;
	/** How long a failure is remembered (a stalled name is not asked again on every delivery). */
	negativeTtlMs?: number;
	/** Hosts file; "" = none. */
	hostsFile?: string;
}

export interface DnsSettings {
	servers: string[] | undefined;
	timeoutMs: number;
	tries: number;
}

const HOSTS_TTL_MS = 30_000;

type Entry = { ok: true; answers: LookupAddress[] } | { ok: false; error: NodeJS.ErrnoException };

function dnsError(host: string, cause: NodeJS.ErrnoException | undefined): NodeJS.ErrnoException {
	const raw = cause?.code ?? "EAI_FAIL";
	// getaddrinfo's codes, which webhook-client classifies as DNS.
	const code =
		raw === "ENOTFOUND" || raw === "ENODATA" || raw === "ENONAME" ? "ENOTFOUND" : raw === "ETIMEOUT" || raw === "ECANCELLED" ? "EAI_AGAIN" : "EAI_FAIL";
	return Object.assign(new Error(`DNS lookup of ${host} failed (${raw})`), { code, dnsCode: raw, hostname: host });
}

function parseHosts(text: string): Map<string, LookupAddress[]> {
	const map = new Map<string, LookupAddress[]>();
	for (const line of text.split("\n")) {
		const fields = line.replace(/#.*/, "").trim().split(/\s+/).filter(Boolean);
		if (fields.length < 2) continue;
		const family = isIP(fields[0]);
		if (family === 0) continue;
		for (const name of fields.slice(1)) {
			const key = name.toLowerCase();
			const list = map.get(key) ?? [];
			if (!list.some((a) => a.address === fields[0])) list.push({ address: fields[0], family });
			map.set(key, list);
		}
	}
	return map;
}

export function createDnsResolveAll(opts: DnsResolverOptions = {}): DnsResolveAll {
	const timeoutMs = opts.timeoutMs ?? 2_000;
	const tries = opts.tries ?? 2;
	const resolver = new Resolver({ timeout: timeoutMs, tries });
	if (opts.servers && opts.servers.length > 0) resolver.setServers(opts.servers);
	const maxTtlMs = opts.maxTtlMs ?? 60_000;
	const negativeTtlMs = opts.negativeTtlMs ?? 5_000;
	const cache = new LRUCache<string, Entry>({ max: opts.cacheSize ?? 1_000, ttl: maxTtlMs });
	const inFlight = new Map<string, Promise<Entry>>();
	// c-ares' own retries back off; this is the outer bound on one lookup whatever happens.
	const deadlineMs = timeoutMs * (2 ** tries - 1) + 1_000;

	const hostsFile = opts.hostsFile ?? "/etc/hosts";
	let hosts: { at: number; map: Promise<Map<string, LookupAddress[]>> } | undefined;
	const hostsMap = () => {
		if (!hostsFile) return Promise.resolve(new Map<string, LookupAddress[]>());
		if (!hosts || Date.now() - hosts.at > HOSTS_TTL_MS) {
			hosts = { at: Date.now(), map: readFile(hostsFile, "utf8").then(parseHosts, () => new Map()) };
		}
		return hosts.map;
	};

	const query = async (host: string, family: number): Promise<Entry> => {
		const ask = (fn: () => Promise<{ address: string; ttl: number }[]>, fam: 4 | 6) =>
			fn().then((records) => records.map((r) => ({ address: r.address, family: fam, ttl: r.ttl })));
		const wanted: Promise<{ address: string; family: 4 | 6; ttl: number }[]>[] = [];
		if (family !== 6) wanted.push(ask(() => resolver.resolve4(host, { ttl: true }), 4));
		if (family !== 4) wanted.push(ask(() => resolver.resolve6(host, { ttl: true }), 6));
		let timer: NodeJS.Timeout | undefined;
		const deadline = new Promise<never>((_, reject) => {
			timer = setTimeout(() => reject(Object.assign(new Error("deadline"), { code: "ETIMEOUT" })), deadlineMs);
		});
		try {
			const settled = await Promise.race([Promise.allSettled(wanted), deadline]);
			const answers = settled.flatMap((s) => (s.status === "fulfilled" ? s.value : []));
			if (answers.length === 0) {
				const errors = settled.map((s) => (s.status === "rejected" ? (s.reason as NodeJS.ErrnoException) : undefined)).filter(Boolean);
				// A timeout on one family decides over "no such record" on the other.
				const worst = errors.find((e) => e?.code === "ETIMEOUT") ?? errors.find((e) => e?.code !== "ENODATA") ?? errors[0];
				return { ok: false, error: dnsError(host, worst ?? Object.assign(new Error("no address"), { code: "ENODATA" })) };
			}
			const ttlMs = Math.min(maxTtlMs, Math.max(1_000, Math.min(...answers.map((a) => a.ttl)) * 1_000));
			const entry: Entry = { ok: true, answers: answers.map(({ address, family: f }) => ({ address, family: f })) };
			cache.set(`${family}:${host}`, entry, { ttl: ttlMs });
			return entry;
		} catch (err) {
			return { ok: false, error: dnsError(host, err as NodeJS.ErrnoException) };
		} finally {
			clearTimeout(timer);
		}
	};

	return async function resolveAll(hostname, family) {
		const host = hostname.toLowerCase().replace(/\.+$/, "");
		const fam = family === 4 || family === 6 ? family : 0;
		if (host === "localhost" || host.endsWith(".localhost")) {
			const loopback: LookupAddress[] = [
				{ address: "127.0.0.1", family: 4 },
				{ address: "::1", family: 6 },
			];
			return loopback.filter((a) => fam === 0 || a.family === fam);
		}
		const fromHosts = (await hostsMap()).get(host)?.filter((a) => fam === 0 || a.family === fam);
		if (fromHosts && fromHosts.length > 0) return fromHosts;

		const key = `${fam}:${host}`;
		let entry = cache.get(key);
		if (!entry) {
			let pending = inFlight.get(key);
			if (!pending) {
				pending = query(host, fam).finally(() => inFlight.delete(key));
				inFlight.set(key, pending);
			}
			entry = await pending;
			if (!entry.ok) cache.set(key, entry, { ttl: negativeTtlMs });
		}
		if (!entry.ok) throw entry.error;
		return entry.answers;
	};
}

/** WEBHOOK_DNS_SERVERS (comma list of ip or ip:port; unset = the system's) and WEBHOOK_DNS_TIMEOUT_MS (per try, 2 tries). */
export function readDnsSettings(env: Env): DnsSettings {
	const raw = envString(env, "WEBHOOK_DNS_SERVERS");
	let servers: string[] | undefined;
	if (raw !== undefined) {
		servers = raw
			.split(",")
			.map((s) => s.trim())
			.filter(Boolean);
		const valid = (s: string) => isIP(s) !== 0 || /^(\d{1,3}(\.\d{1,3}){3}):\d{1,5}$/.test(s) || /^\[[0-9a-f:.]+\]:\d{1,5}$/i.test(s);
		const bad = servers.find((s) => !valid(s));
		if (servers.length === 0 || bad !== undefined)
			throw new SettingError("WEBHOOK_DNS_SERVERS", "a comma list of IP addresses, optionally with :port", raw);
		try {
			new Resolver().setServers(servers);
		} catch {
			throw new SettingError("WEBHOOK_DNS_SERVERS", "a comma list of IP addresses, optionally with :port", raw);
		}
	}
	return { servers, timeoutMs: envInt(env, "WEBHOOK_DNS_TIMEOUT_MS", 2_000, 1), tries: 2 };
}

const shared = new Map<string, DnsResolveAll>();

/**
 * The webhook resolver for these settings, one per process and configuration
 * (orders' create-order check and notifications' connect-time check share its cache).
 */
export function webhookDnsResolver(env: Env): DnsResolveAll {
	const s = readDnsSettings(env);
	const key = JSON.stringify(s);
	let resolveAll = shared.get(key);
	if (!resolveAll) {
		resolveAll = createDnsResolveAll(s);
		shared.set(key, resolveAll);
	}
	return resolveAll;
}
