import { ApiError } from "./errors";
import { BlockedAddressError, classifyAddress, classifyHostname, parseIpLiteral, normalizeHost, systemResolveAll, type ResolveAll } from "./ssrf";

export interface WebhookUrlPolicy {
	/** WEBHOOK_ALLOW_PRIVATE: allow private/loopback targets (dev, tests). */
	allowPrivate: boolean;
	/** WEBHOOK_PORTS: the ports a webhook URL may use; undefined = any (lib/settings.ts). */
	ports?: readonly number[];
	/** DNS resolver (tests inject one); defaults to the system resolver. */
	resolveAll?: ResolveAll;
	/** Upper bound on the DNS check at create-order, so a slow resolver cannot stall the request. */
	dnsTimeoutMs?: number;
}

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * The create-order checkpoint for `webhookURL`: an absolute http(s) URL
 * without credentials, and (unless private targets are allowed) neither an IP
 * literal in any form (`http://2130706433/`, `http://0x7f.1/`, `[::ffff:…]`)
 * nor a host name that resolves to a private, loopback, link-local, CGNAT,
 * multicast, unspecified, reserved or cloud-metadata address (lib/ssrf.ts).
 * Its port (explicit, or 80/443 by scheme) must be in `WEBHOOK_PORTS` when
 * that list is set (always in production): a partner cannot aim our
 * requests at another service on a public address (a database, an admin
 * port). Throws 400 INVALID_WEBHOOK_URL.
 *
 * This is early, friendly feedback. The real guard is the connect-time check
 * in notifications' HTTP agents, which judges the address each connection
 * actually uses: DNS answers may change between now and then (rebinding). So
 * a name that does not resolve right now (typo, DNS outage) is accepted here:
 * refusing it would turn a transient DNS failure into a partner-facing 400,
 * and the connect-time guard still refuses it later if it resolves badly.
 */
export async function assertWebhookUrlAllowed(raw: string, policy: WebhookUrlPolicy): Promise<URL> {
	if (typeof raw !== "string" || raw.length === 0 || raw.length > MAX_WEBHOOK_URL_LENGTH) {
		throw invalid(`webhookURL must be an absolute http or https URL of at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
	}
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		throw invalid("webhookURL must be an absolute http or https URL");
	}
	if (url.protocol !== "http:" && url.protocol !== "https:") throw invalid("webhookURL must use http or https");
	if (url.username || url.password) throw invalid("webhookURL must not carry credentials");
	if (!webhookPortAllowed(url, policy.ports)) throw invalid(`webhookURL must use one of the ports ${policy.ports!.join(", ")}`);
	const host = normalizeHost(url.hostname);
	if (!host) throw invalid("webhookURL must name a host");

	const byName = classifyHostname(host, policy);
	if (byName) throw refused();
	const literal = parseIpLiteral(host);
	if (literal) {
		if (!classifyAddress(literal.toString(), policy).allowed) throw refused();
		return url;
	}
	// Private targets allowed: no DNS needed beyond the metadata rules above.
	if (policy.allowPrivate) return url;

	const answers = await withTimeout((policy.resolveAll ?? systemResolveAll)(host, 0), policy.dnsTimeoutMs ?? 2_000).catch((err: unknown) => {
		if (err instanceof BlockedAddressError) throw refused();
		return undefined; // unresolvable now: the connect-time guard decides later
	});
	if (answers?.some((a) => !classifyAddress(a.address, policy).allowed)) throw refused();
	return url;
}

/** The URL's port: explicit, or the scheme's default (80 for http, 443 for https). */
export function webhookPort(url: URL): number {
	if (url.port) return Number(url.port);
	return url.protocol === "https:" ? 443 : 80;
}

/** Whether `url` is on an allowed port (`ports` undefined: any port). Create-order and every delivery try check it. */
export function webhookPortAllowed(url: URL, ports: readonly number[] | undefined): boolean {
	return ports === undefined || ports.includes(webhookPort(url));
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
	return new Promise<T>((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error("DNS lookup timed out")), ms);
		promise.then(
			(v) => {
				clearTimeout(timer);
				resolve(v);
			},
			(e: unknown) => {
				clearTimeout(timer);
				reject(e);
			},
		);
	});
}

/** Never says what the host resolved to: the answer is the same for every refused target. */
function refused(): ApiError {
	return invalid("webhookURL points to an address that is not allowed (private, loopback, link-local or metadata)");
}

function invalid(message: string): ApiError {
	return new ApiError("INVALID_WEBHOOK_URL", message, { details: [{ field: "webhookURL", message }] });
}
