import http from "node:http";
import https from "node:https";
import type { Duplex } from "node:stream";
import type { Readable } from "node:stream";
import axios, { type AxiosInstance } from "axios";
import { assertConnectHostAllowed, guardedLookup, isBlockedAddressError, type AddressPolicy, type ResolveAll, systemResolveAll } from "../../lib/ssrf";
import { webhookPortAllowed } from "../../lib/webhook-url";
import { parseRetryAfter } from "./retry-schedule";

/**
 * The HTTP side of a webhook try: axios with keep-alive agents whose
 * connections pass the SSRF guard at connect time, no redirects, no proxy,
 * a hard deadline, and a capped read of the answer.
 */

export type ErrorClass = "TIMEOUT" | "CONNECTION" | "DNS" | "BLOCKED_ADDRESS" | "HTTP_3XX" | "HTTP_4XX" | "HTTP_5XX";
export type AttemptOutcome = "delivered" | ErrorClass;

export interface AttemptResult {
	outcome: AttemptOutcome;
	status: number | null;
	durationMs: number;
	/** First bytes of the answer (or of the error message), for operators. */
	snippet: string;
	/** For 429/503 with a readable `Retry-After`. */
	retryAfterMs?: number;
}

export interface WebhookClientOptions extends AddressPolicy {
	timeoutMs: number;
	/** Answer bytes kept for the attempt record. */
	keepBytes?: number;
	/** Answer bytes read at most (the rest is dropped with the connection). */
	maxReadBytes?: number;
	maxSockets?: number;
	/** Host name resolution (default: lib/dns-resolver.ts with the system's servers; never dns.lookup). */
	resolveAll?: ResolveAll;
	userAgent?: string;
	/** WEBHOOK_PORTS: a URL on another port is refused before any connection (BLOCKED_ADDRESS); undefined = any port. */
	ports?: readonly number[];
}

type CreateConnection = (options: Record<string, unknown>, cb: (err: Error | null, socket?: Duplex) => void) => Duplex | undefined;

/**
 * Wraps an agent's `createConnection`: Node skips `lookup` for IP-literal
 * hosts, so those are judged here; names go through the guarded `lookup`.
 */
function guardAgent<A extends http.Agent>(agent: A, policy: AddressPolicy): A {
	const original = (agent as unknown as { createConnection: CreateConnection }).createConnection.bind(agent);
	(agent as unknown as { createConnection: CreateConnection }).createConnection = (options, cb) => {
		try {
			assertConnectHostAllowed(String(options.host ?? options.hostname ?? ""), policy);
		} catch (err) {
			process.nextTick(() => cb(err as Error));
			return undefined;
		}
		return original(options, cb);
	};
	return agent;
}

export interface WebhookClient {
	/** One try; `signal` cuts it short (service stop). */
	send(url: string, headers: Record<string, string>, body: Buffer, signal?: AbortSignal): Promise<AttemptResult>;
	/** Drops idle keep-alive sockets (service stop). */
	close(): void;
}

function portAllowedUrl(raw: string, ports: readonly number[] | undefined): boolean {
	if (ports === undefined) return true;
	try {
		return webhookPortAllowed(new URL(raw), ports);
	} catch {
		return false;
	}
}

export function createWebhookClient(opts: WebhookClientOptions): WebhookClient {
	const policy: AddressPolicy = { allowPrivate: opts.allowPrivate };
	const lookup = guardedLookup(policy, opts.resolveAll ?? systemResolveAll);
	const maxSockets = opts.maxSockets ?? 64;
	// Every socket may stay idle for the next try: with fewer free ones, a busy host gets a new connection (and
	// its TCP set-up and close) for most tries (profile: connect + close ~3% of a loaded instance).
	const agentOptions = { keepAlive: true, keepAliveMsecs: 15_000, maxSockets, maxFreeSockets: maxSockets, lookup };
	const httpAgent = guardAgent(new http.Agent(agentOptions as http.AgentOptions), policy);
	const httpsAgent = guardAgent(new https.Agent(agentOptions as https.AgentOptions), policy);
	const keepBytes = opts.keepBytes ?? 1024;
	const maxReadBytes = opts.maxReadBytes ?? 64 * 1024;

	const client: AxiosInstance = axios.create({
		httpAgent,
		httpsAgent,
		proxy: false, // a proxy would connect on our behalf, around the guard
		maxRedirects: 0,
		timeout: opts.timeoutMs,
		decompress: false,
		responseType: "stream",
		validateStatus: () => true,
		transformRequest: [(data: unknown) => data],
	});

	return {
		async send(url, headers, body, signal) {
			const started = Date.now();
			// The same port rule as create-order, for rides booked before WEBHOOK_PORTS was narrowed.
			if (!portAllowedUrl(url, opts.ports)) {
				return { outcome: "BLOCKED_ADDRESS", status: null, durationMs: 0, snippet: "webhook URL port not in WEBHOOK_PORTS" };
			}
			const controller = new AbortController();
			const onStop = () => controller.abort();
			signal?.addEventListener("abort", onStop, { once: true });
			let timedOut = false;
			const deadline = setTimeout(() => {
				timedOut = true;
				controller.abort();
			}, opts.timeoutMs);
			try {
				const res = await client.post<Readable>(url, body, {
					signal: controller.signal,
					headers: {
						"Content-Type": "application/json",
						"User-Agent": opts.userAgent ?? "ride-platform-webhooks/1",
						"Accept-Encoding": "identity",
						...headers,
					},
				});
				// The status line arrived within the deadline, so it decides the try (any 2xx in time is
				// delivered; a 429/503 keeps its Retry-After). A body still coming at the deadline is cut
				// short by the abort and only shortens the snippet we keep.
				const snippet = await readCapped(res.data, keepBytes, maxReadBytes, controller.signal);
				const status = res.status;
				const outcome: AttemptOutcome =
					status >= 200 && status < 300 ? "delivered" : status >= 500 ? "HTTP_5XX" : status >= 400 ? "HTTP_4XX" : "HTTP_3XX";
				const retryAfterMs = parseRetryAfter(status, res.headers["retry-after"] as string | undefined, Date.now());
				return { outcome, status, durationMs: Date.now() - started, snippet, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
			} catch (err) {
				return { outcome: classifyError(err, timedOut), status: null, durationMs: Date.now() - started, snippet: errorText(err).slice(0, keepBytes) };
			} finally {
				clearTimeout(deadline);
				signal?.removeEventListener("abort", onStop);
			}
		},
		close() {
			httpAgent.destroy();
			httpsAgent.destroy();
		},
	};
}

/** Keeps the first `keepBytes` of the answer; reads at most `maxReadBytes`, then drops the connection. */
async function readCapped(stream: Readable, keepBytes: number, maxReadBytes: number, signal: AbortSignal): Promise<string> {
	const kept: Buffer[] = [];
	let keptLength = 0;
	let read = 0;
	const onAbort = () => stream.destroy(new Error("aborted"));
	signal.addEventListener("abort", onAbort, { once: true });
	try {
		for await (const chunk of stream) {
			const buf = chunk as Buffer;
			read += buf.length;
			if (keptLength < keepBytes) {
				const part = buf.subarray(0, keepBytes - keptLength);
				kept.push(part);
				keptLength += part.length;
			}
			if (read >= maxReadBytes) {
				stream.destroy();
				break;
			}
		}
	} catch {
		// A broken or aborted answer body does not change the status we got.
	} finally {
		signal.removeEventListener("abort", onAbort);
	}
	return Buffer.concat(kept).toString("utf8");
}

// getaddrinfo's codes and c-ares' (lib/dns-resolver.ts maps its own to the former).
const DNS_CODES = new Set(["ENOTFOUND", "EAI_AGAIN", "ENODATA", "EAI_FAIL", "EAI_NONAME", "ESERVFAIL", "ETIMEOUT"]);
const TIMEOUT_CODES = new Set(["ECONNABORTED", "ETIMEDOUT", "ESOCKETTIMEDOUT", "ERR_CANCELED", "ABORT_ERR"]);

function codesOf(err: unknown): string[] {
	const codes: string[] = [];
	for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
		if (typeof e.code === "string") codes.push(e.code);
	}
	return codes;
}

export function classifyError(err: unknown, timedOut: boolean): ErrorClass {
	if (isBlockedAddressError(err)) return "BLOCKED_ADDRESS";
	if (timedOut) return "TIMEOUT";
	const codes = codesOf(err);
	if (codes.some((c) => DNS_CODES.has(c))) return "DNS";
	if (codes.some((c) => TIMEOUT_CODES.has(c))) return "TIMEOUT";
	return "CONNECTION";
}

function errorText(err: unknown): string {
	const codes = codesOf(err);
	const message = err instanceof Error ? err.message : String(err);
	return codes.length > 0 && !message.includes(codes[0]) ? `${codes[0]}: ${message}` : message;
}
