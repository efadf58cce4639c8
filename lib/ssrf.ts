import type { LookupAddress } from "node:dns";
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import { webhookDnsResolver } from "./dns-resolver";

/**
 * The SSRF policy for partner webhook URLs, shared by its two checkpoints:
 * create-order (`assertWebhookUrlAllowed` in lib/webhook-url.ts) and connect
 * time (the `lookup`/`createConnection` guard the notifications HTTP agents
 * use, so the address actually connected to is the one checked; that is what
 * defeats DNS rebinding).
 *
 * Allow-list thinking: an IPv4 address is fine only when it is ordinary
 * public unicast; an IPv6 address only when it is global unicast (2000::/3)
 * and not one of the special blocks inside it. Forms that embed an IPv4
 * address (IPv4-mapped, NAT64, 6to4, IPv4-compatible) are judged by the IPv4
 * address they carry. Cloud metadata endpoints are refused even when private
 * targets are allowed (dev, tests): nothing legitimate lives there.
 */

export interface AddressPolicy {
	/** WEBHOOK_ALLOW_PRIVATE: allow private/loopback targets (dev, tests). */
	allowPrivate: boolean;
}

export type AddressVerdict = { allowed: true; address: string } | { allowed: false; address: string; reason: string };

/** Cloud instance metadata services (AWS, GCP, Azure, Alibaba, Oracle, AWS ECS, AWS IPv6). */
const METADATA_ADDRESSES = new Set(["169.254.169.254", "169.254.170.2", "169.254.169.123", "100.100.100.200", "168.63.129.16", "192.0.0.192", "fd00:ec2::254"]);

/** Names that reach metadata services or the local machine without any DNS answer being involved. */
const METADATA_HOSTNAMES = new Set([
	"metadata",
	"metadata.google.internal",
	"metadata.goog",
	"metadata.azure.internal",
	"instance-data",
	"instance-data.ec2.internal",
]);

const LOCAL_SUFFIXES = [".localhost", ".local", ".internal", ".localdomain", ".home.arpa"];

const GLOBAL_UNICAST_V6: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse("2000::"), 3];
const IPV4_COMPATIBLE_V6: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse("::"), 96];

/** Hostname without IPv6 brackets, zone id, trailing dot; lower case. */
export function normalizeHost(hostname: string): string {
	let host = hostname.trim().toLowerCase();
	if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
	const zone = host.indexOf("%");
	if (zone >= 0) host = host.slice(0, zone);
	while (host.endsWith(".")) host = host.slice(0, -1);
	return host;
}

/**
 * Parses an IP literal in any form a resolver or URL parser might accept:
 * dotted quad, IPv6, and the legacy IPv4 shorthands (`2130706433`,
 * `0177.0.0.1`, `0x7f.1`, `127.1`) that inet_aton still honours.
 */
export function parseIpLiteral(host: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
	const h = normalizeHost(host);
	if (isIP(h)) return ipaddr.parse(h);
	if (/^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}$/i.test(h)) {
		try {
			return ipaddr.IPv4.parse(h);
		} catch {
			return legacyIpv4(h);
		}
	}
	return undefined;
}

/** inet_aton rules: 1 to 4 parts, each decimal, octal (leading 0) or hex (0x); the last part fills the remaining bytes. */
function legacyIpv4(h: string): ipaddr.IPv4 | undefined {
	const parts = h.split(".").map((p) => {
		if (/^0x/i.test(p)) return p.length === 2 ? 0 : parseInt(p.slice(2), 16);
		if (p.length > 1 && p.startsWith("0")) return /^[0-7]+$/.test(p) ? parseInt(p, 8) : NaN;
		return parseInt(p, 10);
	});
	if (parts.some((n) => !Number.isFinite(n) || n < 0)) return undefined;
	const last = parts[parts.length - 1];
	const head = parts.slice(0, -1);
	if (head.some((n) => n > 255)) return undefined;
	const tailBytes = 4 - head.length;
	if (last >= 2 ** (8 * tailBytes)) return undefined;
	const bytes = [...head];
	for (let i = tailBytes - 1; i >= 0; i--) bytes.push(Math.floor(last / 2 ** (8 * i)) % 256);
	return new ipaddr.IPv4(bytes);
}

function classifyV4(ip: ipaddr.IPv4, policy: AddressPolicy): string | undefined {
	const text = ip.toString();
	if (METADATA_ADDRESSES.has(text)) return "cloud metadata address";
	const range = ip.range();
	if (range === "unicast") return undefined;
	if (policy.allowPrivate && (range === "loopback" || range === "private" || range === "carrierGradeNat" || range === "linkLocal")) {
		return undefined;
	}
	return `${range} address`;
}

function classifyV6(ip: ipaddr.IPv6, policy: AddressPolicy): string | undefined {
	const text = ip.toNormalizedString();
	if (METADATA_ADDRESSES.has(ip.toString()) || METADATA_ADDRESSES.has(text)) return "cloud metadata address";
	const range = ip.range();
	// Forms that carry an IPv4 address: the packet really goes to that IPv4 address.
	// (toIPv4Address() only takes ::ffff:a.b.c.d and throws on the SIIT form ::ffff:0:a.b.c.d, so read the last four bytes.)
	if (range === "ipv4Mapped" || range === "rfc6145") return classifyV4(new ipaddr.IPv4(ip.toByteArray().slice(12)), policy);
	if (range === "rfc6052" && ip.match(ipaddr.IPv6.parse("64:ff9b::"), 96)) {
		return classifyV4(new ipaddr.IPv4(ip.toByteArray().slice(12)), policy);
	}
	if (range === "6to4") return classifyV4(new ipaddr.IPv4(ip.toByteArray().slice(2, 6)), policy);
	if (range === "unspecified") return "unspecified address";
	if (range === "unicast" && ip.match(IPV4_COMPATIBLE_V6)) {
		// Deprecated IPv4-compatible form (::a.b.c.d).
		return classifyV4(new ipaddr.IPv4(ip.toByteArray().slice(12)), policy) ?? "IPv4-compatible IPv6 address";
	}
	if (range === "unicast" && ip.match(GLOBAL_UNICAST_V6)) return undefined;
	if (policy.allowPrivate && (range === "loopback" || range === "uniqueLocal" || range === "linkLocal")) return undefined;
	return range === "unicast" ? "non-global IPv6 address" : `${range} address`;
}

/** Decides whether a webhook may connect to this IP address. */
export function classifyAddress(address: string, policy: AddressPolicy): AddressVerdict {
	const ip = parseIpLiteral(address);
	if (!ip) return { allowed: false, address, reason: "not an IP address" };
	let reason: string | undefined;
	try {
		reason = ip.kind() === "ipv4" ? classifyV4(ip as ipaddr.IPv4, policy) : classifyV6(ip as ipaddr.IPv6, policy);
	} catch {
		// A form the rules above cannot read is refused, never an internal error (create-order answers 400).
		reason = "unreadable address";
	}
	return reason === undefined ? { allowed: true, address } : { allowed: false, address, reason };
}

/**
 * Refusals that need no DNS: metadata names always; `localhost` and
 * local-only suffixes unless private targets are allowed.
 */
export function classifyHostname(hostname: string, policy: AddressPolicy): string | undefined {
	const host = normalizeHost(hostname);
	if (host === "") return "empty host";
	if (METADATA_HOSTNAMES.has(host)) return "cloud metadata host";
	if (policy.allowPrivate) return undefined;
	if (host === "localhost" || LOCAL_SUFFIXES.some((s) => host.endsWith(s))) return "local host name";
	return undefined;
}

/** Raised when a webhook would connect to a refused address; recorded as BLOCKED_ADDRESS. */
export class BlockedAddressError extends Error {
	readonly code = "EBLOCKEDADDRESS";
	constructor(
		readonly host: string,
		readonly reason: string,
	) {
		super(`Webhook target ${host} refused by the SSRF policy: ${reason}`);
		this.name = "BlockedAddressError";
	}
}

export function isBlockedAddressError(err: unknown): boolean {
	for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
		if (e instanceof BlockedAddressError || e.code === "EBLOCKEDADDRESS") return true;
	}
	return false;
}

/** A resolver in the shape of `dns.lookup(host, { all: true })`, injectable for tests. */
export type ResolveAll = (hostname: string, family: number) => Promise<LookupAddress[]>;

/**
 * The default resolver: asynchronous DNS (c-ares) with timeouts and a small
 * cache (lib/dns-resolver.ts), the system's servers; never `dns.lookup`, whose
 * uncancellable getaddrinfo calls would hold libuv's thread pool while a
 * partner's DNS does not answer. Services pass `webhookDnsResolver(env)` to
 * honour WEBHOOK_DNS_SERVERS / WEBHOOK_DNS_TIMEOUT_MS.
 */
export const systemResolveAll: ResolveAll = (hostname, family) => webhookDnsResolver({})(hostname, family);

/**
 * Resolves a host name and refuses it if ANY answer is refused (an attacker
 * controlling DNS could otherwise mix a public and a private answer and let
 * the connection pick). Returns the allowed answers.
 */
export async function resolveAllowed(hostname: string, policy: AddressPolicy, resolveAll: ResolveAll = systemResolveAll, family = 0): Promise<LookupAddress[]> {
	const host = normalizeHost(hostname);
	const byName = classifyHostname(host, policy);
	if (byName) throw new BlockedAddressError(host, byName);
	const literal = parseIpLiteral(host);
	if (literal) {
		const verdict = classifyAddress(literal.toString(), policy);
		if (!verdict.allowed) throw new BlockedAddressError(host, verdict.reason);
		return [{ address: literal.toString(), family: literal.kind() === "ipv4" ? 4 : 6 }];
	}
	const answers = await resolveAll(host, family);
	if (answers.length === 0) throw Object.assign(new Error(`${host} has no address`), { code: "ENOTFOUND" });
	for (const a of answers) {
		const verdict = classifyAddress(a.address, policy);
		if (!verdict.allowed) throw new BlockedAddressError(host, `resolves to ${verdict.reason}`);
	}
	return answers;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
type LookupOptions = { family?: number | string; all?: boolean };

/**
 * A `lookup` for `net.connect`/http agents that applies the policy to the
 * answers the socket will actually connect to (connect-time checkpoint).
 * Supports both callback shapes Node uses (`all: true` for Happy Eyeballs).
 */
export function guardedLookup(policy: AddressPolicy, resolveAll: ResolveAll = systemResolveAll) {
	return function lookup(hostname: string, options: LookupOptions | number | LookupCallback, callback?: LookupCallback): void {
		const cb = (typeof options === "function" ? options : callback) as LookupCallback;
		const opts: LookupOptions = typeof options === "object" && options !== null ? options : typeof options === "number" ? { family: options } : {};
		const family = opts.family === "IPv4" ? 4 : opts.family === "IPv6" ? 6 : Number(opts.family ?? 0) || 0;
		resolveAllowed(hostname, policy, resolveAll, family).then(
			(answers) => {
				if (opts.all) cb(null, answers);
				else cb(null, answers[0].address, answers[0].family);
			},
			(err: NodeJS.ErrnoException) => cb(err, opts.all ? [] : "", 0),
		);
	};
}

/**
 * The literal-IP half of the connect-time checkpoint: Node skips `lookup`
 * when the host is already an IP address, so the agent checks it here.
 */
export function assertConnectHostAllowed(host: string, policy: AddressPolicy): void {
	const h = normalizeHost(host);
	const byName = classifyHostname(h, policy);
	if (byName) throw new BlockedAddressError(h, byName);
	if (isIP(h)) {
		const verdict = classifyAddress(h, policy);
		if (!verdict.allowed) throw new BlockedAddressError(h, verdict.reason);
	}
}
