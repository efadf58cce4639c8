import { isIP, isIPv4 } from "node:net";

/**
 * Who is calling, for the failed-authentication throttle. Pure.
 *
 * The client is the socket's peer, unless `trustedHops` proxies we run sit in
 * front of the gateway: each appends the address it saw to X-Forwarded-For,
 * so the client is the address `trustedHops` entries from the right end. The
 * entries further left were written by the client and are never believed.
 *
 * The answer is a throttling key, not an address to show anyone: IPv4-mapped
 * IPv6 becomes IPv4, and IPv6 is cut to its /64 (one subscriber's network),
 * so an attacker cannot mint a fresh key per request from a /64.
 */
export function clientAddress(socketAddress: string | undefined, forwardedFor: string | string[] | undefined, trustedHops: number): string {
	let client = socketAddress ?? "";
	if (trustedHops > 0 && forwardedFor !== undefined) {
		const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor)
			.split(",")
			.map((h) => stripPort(h.trim()))
			.filter((h) => h !== "");
		// Walk back from the proxy nearest to us; stop at anything that is not an address.
		for (let i = 0; i < trustedHops && hops.length > 0; i++) {
			const hop = hops.pop()!;
			if (isIP(hop) === 0) break;
			client = hop;
		}
	}
	return throttleKey(client);
}

/** "1.2.3.4:5678" → "1.2.3.4", "[2001:db8::1]:443" → "2001:db8::1"; anything else unchanged. */
function stripPort(hop: string): string {
	const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(hop);
	if (bracketed) return bracketed[1];
	const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(hop);
	return v4 ? v4[1] : hop;
}

/** The throttling key of an address: IPv4 as it is, IPv6 as its /64 prefix. */
export function throttleKey(address: string): string {
	const a = address.replace(/%.*$/, "").toLowerCase();
	const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(a);
	if (mapped) return mapped[1];
	if (isIPv4(a)) return a;
	// A closed socket has no address; nothing else should get here.
	if (isIP(a) !== 6) return "unknown";
	return `${expandIPv6(a).slice(0, 4).join(":")}::/64`;
}

/** Eight 16-bit groups, each without leading zeros. */
function expandIPv6(a: string): string[] {
	let text = a;
	// A trailing dotted IPv4 (::1.2.3.4) becomes two groups.
	const v4 = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
	if (v4) {
		const [b0, b1, b2, b3] = v4.slice(1).map(Number);
		text = `${text.slice(0, v4.index)}${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
	}
	const [head, tail] = text.split("::");
	const left = head ? head.split(":") : [];
	const right = tail !== undefined && tail !== "" ? tail.split(":") : [];
	const zeros = tail === undefined ? [] : Array(8 - left.length - right.length).fill("0");
	return [...left, ...zeros, ...right].map((g) => parseInt(g, 16).toString(16));
}
