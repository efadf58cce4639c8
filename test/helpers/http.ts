import { createServer } from "node:net";

/**
 * HTTP for the tests: one JSON client (every suite calls the partner API, the
 * health endpoints and /metrics the same way) and free ports for the servers
 * a test starts.
 */

/** A port nothing listens on right now, for a server (gateway, metrics, health) the test is about to start. */
export async function freePort(): Promise<number> {
	return new Promise((resolve, reject) => {
		const srv = createServer();
		srv.once("error", reject);
		srv.listen(0, "127.0.0.1", () => {
			const port = (srv.address() as { port: number }).port;
			srv.close(() => resolve(port));
		});
	});
}

export interface HttpAnswer<T = Record<string, unknown>> {
	status: number;
	headers: Headers;
	/** The parsed JSON, or the text when the answer is not JSON (/metrics, an HTML page). */
	body: T;
	text: string;
}

export interface HttpRequest {
	/** POST when there is a body, GET otherwise. */
	method?: string;
	headers?: Record<string, string>;
	/** An object is sent as JSON; a string is sent as it is (to send malformed JSON). */
	body?: unknown;
}

export async function httpRequest<T = Record<string, unknown>>(url: string, init: HttpRequest = {}): Promise<HttpAnswer<T>> {
	const json = init.body !== undefined && typeof init.body !== "string";
	const res = await fetch(url, {
		method: init.method ?? (init.body === undefined ? "GET" : "POST"),
		headers: { ...(json ? { "Content-Type": "application/json" } : {}), ...init.headers },
		body: json ? JSON.stringify(init.body) : (init.body as string | undefined),
	});
	const text = await res.text();
	let body: unknown = text;
	try {
		body = JSON.parse(text);
	} catch {
		/* not JSON: the text is the body */
	}
	return { status: res.status, headers: res.headers, body: body as T, text };
}

/** The partner API over real HTTP, as one partner (its API key on every POST). */
export class PartnerApi {
	constructor(
		readonly baseUrl: string,
		private readonly apiKey: string,
	) {}

	post<T = Record<string, unknown>>(path: string, body: unknown, headers: Record<string, string> = {}): Promise<HttpAnswer<T>> {
		return httpRequest<T>(`${this.baseUrl}${path}`, { method: "POST", headers: { Authorization: `Bearer ${this.apiKey}`, ...headers }, body });
	}

	/** Unauthenticated GET (/health/*, /openapi.json, /docs). */
	get<T = Record<string, unknown>>(path: string): Promise<HttpAnswer<T>> {
		return httpRequest<T>(`${this.baseUrl}${path}`);
	}

	/** Every event of a ride from POST /ride/events, following `nextCursor` page by page; a non-200 answer throws. */
	async allEvents<E = Record<string, any>>(orderId: string): Promise<E[]> {
		const events: E[] = [];
		let cursor: string | null = null;
		do {
			const page: HttpAnswer<{ events: E[]; nextCursor: string | null }> = await this.post(
				"/ride/events",
				cursor ? { orderId, cursor, limit: 1000 } : { orderId, limit: 1000 },
			);
			if (page.status !== 200) throw new Error(`/ride/events answered ${page.status}: ${JSON.stringify(page.body)}`);
			events.push(...page.body.events);
			cursor = page.body.nextCursor;
		} while (cursor);
		return events;
	}
}
