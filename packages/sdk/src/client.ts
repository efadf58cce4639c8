import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import createClient, { type Client } from "openapi-fetch";
import { RideApiError, RideConnectionError, type RideError } from "./errors";
import { DEFAULT_RETRY, failedBeforeSending, retryDelayMs, type RetrySettings } from "./retry";
import { RideSandbox } from "./sandbox";
import type {
	ActiveRideOrder,
	CancelPreview,
	CancelRequest,
	CancelResult,
	CreateOrderRequest,
	EventsRequest,
	FareEstimate,
	FareEstimateRequest,
	FeedbackRequest,
	FeedbackResult,
	Order,
	paths,
	RequestBodyOf,
	ResponseOf,
	RideEventRecord,
	RideEvents,
	RidePath,
	StatusRequest,
} from "./types";

export const SDK_VERSION = "0.1.0";

export interface RideClientOptions {
	/** A partner API key (`ride_test_…` or `ride_live_…`), sent as `Authorization: Bearer`. */
	apiKey: string;
	/** The gateway, e.g. `https://api.example.com` (no trailing `/ride`). */
	baseUrl: string;
	/** Per-attempt timeout; default 30 000 ms. */
	timeoutMs?: number;
	/** Retries after the first try; default 2. */
	maxRetries?: number;
	/** Backoff of retries without `Retry-After`: first step (default 500 ms) and cap (default 30 s; a longer `Retry-After` is not waited for). */
	retryDelay?: { baseMs?: number; maxMs?: number };
	/** Sent as `Ride-Version` on every call; by default none is sent and the partner's pinned version applies. */
	apiVersion?: string;
	/** Extra headers on every call. */
	headers?: Record<string, string>;
	/** A fetch of your own (tests, proxies); default the global fetch. */
	fetch?: (input: Request) => Promise<Response>;
}

export interface CallOptions {
	/** This call's per-attempt timeout (overrides the client's). */
	timeoutMs?: number;
	/** This call's retries after the first try (overrides the client's). */
	maxRetries?: number;
	/** Aborts the call, retries and waits included; an abort is never retried. */
	signal?: AbortSignal;
	/** Sent as `X-Request-Id`: your correlation id, echoed back and logged beside ours. */
	requestId?: string;
	/** Sent as `Ride-Version` for this call (overrides the client's). */
	apiVersion?: string;
}

export interface CreateOrderOptions extends CallOptions {
	/** Default: a new UUID per `createOrder` call, reused on that call's retries. Pass your own to retry across restarts. */
	idempotencyKey?: string;
}

export interface RequestOptions extends CallOptions {
	/**
	 * The call may be repeated when its outcome is unknown (a timeout or a
	 * dropped connection): reads, cancel, and calls carrying an
	 * `Idempotency-Key`. Otherwise only failures before sending and answers
	 * that say `retryable: true` are retried. Default false.
	 */
	repeatable?: boolean;
	idempotencyKey?: string;
}

/** openapi-fetch's POST seen through a route known only at run time (the typing of `request` is ours). */
type LoosePost = (
	path: string,
	init: { body: unknown; headers: Record<string, string>; signal: AbortSignal },
) => Promise<{ data?: unknown; error?: unknown; response: Response }>;

/**
 * The Partner Ride API. Every call authenticates with the API key, retries
 * what can safely be retried (network failures, `429`, answers with
 * `retryable: true`, honouring `Retry-After`), and throws `RideApiError` for
 * error answers and `RideConnectionError` when no answer came.
 *
 * Route groups added later (such as sandbox controls) are namespaces over
 * `request`, which types any `/ride/*` route of the generated document.
 */
export class RideClient {
	/** The generated, typed openapi-fetch client with the API key set: no retries, no error mapping. */
	readonly api: Client<paths>;
	/** Sandbox controls (test keys): move a manual ride step by step. */
	readonly sandbox: RideSandbox = new RideSandbox(this);
	private readonly timeoutMs: number;
	private readonly retry: RetrySettings;
	private readonly apiVersion?: string;

	constructor(options: RideClientOptions) {
		if (!options?.apiKey) throw new TypeError("RideClient: apiKey is required");
		if (!options.baseUrl) throw new TypeError("RideClient: baseUrl is required");
		this.timeoutMs = options.timeoutMs ?? 30_000;
		this.retry = {
			maxRetries: options.maxRetries ?? DEFAULT_RETRY.maxRetries,
			baseDelayMs: options.retryDelay?.baseMs ?? DEFAULT_RETRY.baseDelayMs,
			maxDelayMs: options.retryDelay?.maxMs ?? DEFAULT_RETRY.maxDelayMs,
		};
		this.apiVersion = options.apiVersion;
		this.api = createClient<paths>({
			baseUrl: options.baseUrl.replace(/\/+$/, ""),
			headers: { ...options.headers, Authorization: `Bearer ${options.apiKey}`, "User-Agent": `ride-sdk-node/${SDK_VERSION}` },
			// The API never redirects: a redirect is somebody else answering, and must not get the key.
			redirect: "error",
			...(options.fetch ? { fetch: options.fetch } : {}),
		});
	}

	/** Quotes for a trip; pass a `quoteId` to `createOrder` to get that fare. */
	fareEstimate(body: FareEstimateRequest, options?: CallOptions): Promise<FareEstimate> {
		return this.request("/ride/fare-estimate", body, { ...options, repeatable: true });
	}

	/**
	 * Books a ride. Sends an `Idempotency-Key` (a new UUID unless given) and
	 * reuses it on every retry of this call, so a retry never books twice.
	 * A rider with an active ride gets that ride back with
	 * `code: "USER_HAVE_ACTIVE_RIDE"`.
	 */
	createOrder(body: CreateOrderRequest, options?: CreateOrderOptions): Promise<Order | ActiveRideOrder> {
		const idempotencyKey = options?.idempotencyKey ?? randomUUID();
		return this.request("/ride/create-order", body, { ...options, idempotencyKey, repeatable: true });
	}

	/**
	 * Cancels an active ride; cancelling it again answers the same (safe to
	 * repeat). With `preview: true` it answers the fee a cancel would be
	 * charged now (`CANCEL_PREVIEW`) and changes nothing; `previewCancel`
	 * is that call typed.
	 */
	cancel(body: CancelRequest, options?: CallOptions): Promise<CancelResult | CancelPreview> {
		return this.request("/ride/cancel", body, { ...options, repeatable: true });
	}

	/** The fee a cancel of the ride would be charged now; confirm with `cancel({ orderId, confirmFee, reasonCode })`. */
	async previewCancel(body: Omit<CancelRequest, "preview" | "confirmFee" | "reasonCode">, options?: CallOptions): Promise<CancelPreview> {
		return (await this.request("/ride/cancel", { ...body, preview: true }, { ...options, repeatable: true })) as CancelPreview;
	}

	/** Rates a dropped ride, once. Not repeated after a timeout: a second feedback is refused. */
	feedback(body: FeedbackRequest, options?: CallOptions): Promise<FeedbackResult> {
		return this.request("/ride/feedback", body, { ...options, repeatable: false });
	}

	/** The ride as it is now (the fallback for a missed webhook). */
	status(body: StatusRequest, options?: CallOptions): Promise<Order> {
		return this.request("/ride/status", body, { ...options, repeatable: true });
	}

	/** The ride's event pages from `cursor` (or the start), following `nextCursor` until the last page. */
	async *eventPages(body: EventsRequest, options?: CallOptions): AsyncGenerator<RideEvents, void, undefined> {
		let page = await this.request("/ride/events", body, { ...options, repeatable: true });
		yield page;
		while (page.nextCursor) {
			page = await this.request("/ride/events", { ...body, cursor: page.nextCursor }, { ...options, repeatable: true });
			yield page;
		}
	}

	/**
	 * Every webhook event of the ride with its delivery state, in `sequence`
	 * order, page after page. Ends at the last page there is now; ask again
	 * later for events made since.
	 */
	async *events(body: EventsRequest, options?: CallOptions): AsyncGenerator<RideEventRecord, void, undefined> {
		for await (const page of this.eventPages(body, options)) yield* page.events;
	}

	/** Any `POST /ride/*` route of the document, with authentication, timeouts, retries and typed errors. */
	async request<P extends RidePath>(path: P, body: RequestBodyOf<P>, options: RequestOptions = {}): Promise<ResponseOf<P>> {
		const headers: Record<string, string> = {};
		if (options.idempotencyKey !== undefined) headers["Idempotency-Key"] = options.idempotencyKey;
		if (options.requestId !== undefined) headers["X-Request-Id"] = options.requestId;
		const version = options.apiVersion ?? this.apiVersion;
		if (version !== undefined) headers["Ride-Version"] = version;
		const maxRetries = options.maxRetries ?? this.retry.maxRetries;
		const timeoutMs = options.timeoutMs ?? this.timeoutMs;
		const post = this.api.POST as unknown as LoosePost;

		for (let retry = 0; ; retry++) {
			const timeout = AbortSignal.timeout(timeoutMs);
			const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
			let failure: RideError;
			let retryable: boolean;
			let retryAfterMs: number | null = null;
			try {
				const { data, error, response } = await post(path, { body, headers, signal });
				if (response.ok) return data as ResponseOf<P>;
				const apiError = new RideApiError({ status: response.status, headers: response.headers, body: error });
				[failure, retryable, retryAfterMs] = [apiError, apiError.retryable, apiError.retryAfterMs];
			} catch (err) {
				if (options.signal?.aborted) throw options.signal.reason ?? err;
				const timedOut = timeout.aborted;
				failure = new RideConnectionError(timedOut ? `no answer from ${path} within ${timeoutMs} ms` : `${path}: ${describe(err)}`, {
					cause: err,
					timedOut,
				});
				retryable = options.repeatable === true || (!timedOut && failedBeforeSending(err));
			}
			const delay = retryable && retry < maxRetries ? retryDelayMs(retry, retryAfterMs, this.retry) : null;
			if (delay === null) throw failure;
			await sleep(delay, undefined, options.signal ? { signal: options.signal } : undefined).catch((err: unknown) => {
				throw options.signal?.reason ?? err;
			});
		}
	}
}

function describe(err: unknown): string {
	const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
	const message = err instanceof Error ? err.message : String(err);
	return cause?.code ? `${message} (${cause.code})` : message;
}
