import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { Errors, type Context, type Service, type ServiceSchema, type ServiceSettingSchema } from "moleculer";
import ApiGateway from "moleculer-web";
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from "../../contracts/constants";
import { readGatewaySettings, type GatewaySettings } from "./gateway.settings";
import { describeForLog, toErrorResponse, WrappedError } from "./errors";
import { ApiError } from "../../lib/errors";
import { buildOpenApiDocument, type OpenApiDocument } from "./openapi";
import { renderDocsPage } from "./docs-page";
import type Redis from "ioredis";
import { enforceRateLimit, openLimitRedis, partnerLimiter, partnerLimitKey, windowLimiter, type LimitStoreOptions, type PartnerLimiter } from "./rate-limiter";
import { AuthFailureThrottle, keyHash, throttled } from "./auth-throttle";
import { clientAddress } from "./client-address";
import { clientRequestIdFrom, idempotencyKeyFrom, newRequestId, readJsonBody, requireBearer } from "./request";
import { RIDE_BASE_PATH, type PartnerCallMeta } from "../../contracts/gateway";
import { GATEWAY_AUTH_CACHE_MS, PARTNER_EVENTS, type AuthenticatedPartner, type AuthenticateParams } from "../../contracts/partners";
import { AuthCache } from "../../lib/auth-cache";
import { sendJson, serviceResponseHeaders, setRequestIdHeaders, successStatus } from "./http-answers";
import { checkReadiness, ReadinessProbe, type Readiness } from "./readiness";
import { rideAliases } from "./routes";
import { readSettings, serviceEnv, useServiceSettings } from "../../lib/settings";
import { authenticateDriverRequest, driverRoute, prepareDriverRequest, type DriverRequest } from "./driver-route";
import { API_VERSION_HEADER, type ApiVersionTable, type JsonObject } from "../../contracts/versions";
import { answerFromCore, apiVersionsOf, requestToCore, servedVersion } from "../../lib/api-versions";

/**
 * The public door: moleculer-web with explicit aliases only. Every `/ride/*`
 * request goes through one pipeline before any service is called:
 *
 *   route known? (else 404) → client address throttled for failed
 *   authentications? (then only a valid key passes, 429 otherwise) → API key (401; this gateway caches what
 *   partners.authenticate answered for GATEWAY_AUTH_CACHE_MS, cleared on
 *   partners.changed) → API version (`Ride-Version`, else the partner's pin;
 *   unknown: 400) → per-partner rate limit (429)
 *   → JSON body ≤ BODY_LIMIT (415/413/400) → target service present? (503)
 *   → the action's own validation (400) → the action.
 *
 * The body is translated from the request's API version into the services'
 * (core) shape before the action sees it, and the answer back into the
 * request's version (lib/api-versions.ts); every answer from then on carries
 * `Ride-Version`.
 *
 * Every error, whoever raised it, leaves through `renderError` as the
 * contract's envelope. Health, `/openapi.json` and `/docs` live on a second,
 * unauthenticated route.
 *
 * Files: gateway.settings.ts (environment); routes.ts (aliases from the
 * route table in contracts/gateway.ts); the rules request.ts, rate-limiter.ts
 * (limits in memory or shared through REDIS_URL), auth-throttle.ts,
 * client-address.ts, errors.ts, http-answers.ts, readiness.ts; the documents openapi/ and
 * docs-page.ts. No repo: the gateway owns no tables (API keys live in the
 * partners service, which it calls).
 */

interface GatewayMeta extends PartnerCallMeta {
	/** Always null: the partner travels as partnerId/mode (see authenticate). */
	user?: null;
}

interface GatewayRequest extends IncomingMessage {
	$ctx: Context<unknown, GatewayMeta>;
	parsedUrl: string;
	originalUrl: string;
	body?: unknown;
	$params?: Record<string, unknown>;
	$partner?: AuthenticatedPartner;
	$idempotencyKey?: string;
	/** Set once the request matched a `/ride` alias and went through the pipeline. */
	$ridePipeline?: boolean;
	/** The API version the request is served in (set by the pipeline). */
	$apiVersion?: string;
}

/** moleculer-web's settings, as the schema declares them. */
interface WebSettings extends ServiceSettingSchema {
	port: number;
	[key: string]: unknown;
}

/** moleculer-web's settings with the gateway's own (gateway.settings.ts) merged in flat beside them in `created` (lib/settings.ts, useServiceSettings). */
type GatewayServiceSettings = WebSettings & GatewaySettings;

interface GatewayMethods {
	prepareRideRequest(req: GatewayRequest, res: ServerResponse): Promise<void>;
	authenticate(ctx: Context<unknown, GatewayMeta>, route: unknown, req: GatewayRequest): null;
	partnerOfKey(ctx: Context<unknown, GatewayMeta>, apiKey: string, hash: string, onlyKnown: boolean): Promise<AuthenticatedPartner | null>;
	renderError(req: GatewayRequest, res: ServerResponse, err: unknown): void;
	errorHandler(req: GatewayRequest, res: ServerResponse, err: unknown): void;
	send404(req: GatewayRequest, res: ServerResponse): void;
	sendResponse(req: GatewayRequest, res: ServerResponse, data: unknown): void;
	sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void;
	readiness(): Promise<Readiness>;
	startDraining(): void;
	/** moleculer-web's own alias lookup. */
	resolveAlias(url: string, method?: string): unknown;
}

interface GatewayLocal {
	limiter: PartnerLimiter;
	authThrottle: AuthFailureThrottle;
	/** Keys partners.authenticate resolved (or refused), by SHA-256; cleared on partners.changed. */
	authCache: AuthCache<AuthenticatedPartner>;
	/** The Redis the limits are shared through (REDIS_URL), if any. */
	redis?: Redis;
	readinessProbe: ReadinessProbe;
	/** Stacks of unexpected errors in the log: never with NODE_ENV=production. */
	logStacks: boolean;
	/** True once shutdown began: /health/ready answers 503 so load balancers stop sending traffic. */
	draining: boolean;
	openapi: OpenApiDocument;
	docsHtml: string;
	/** The API versions this gateway serves (contracts/versions.ts; a test may inject its own). */
	apiVersions: ApiVersionTable;
	server: Server;
	/** moleculer-web's routes (made by its `created`, which runs before ours). */
	routes: Array<{ logging: boolean }>;
}

type GatewayThis = Service<GatewayServiceSettings> & GatewayMethods & GatewayLocal;

function unauthorized(message: string): ApiError {
	return new ApiError("UNAUTHORIZED", message);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
	return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The route path below `/ride` of a request URL (`/ride/create-order` → `/create-order`): the version table's key. */
function ridePathOf(url: string | undefined): string {
	const path = String(url ?? "").slice(RIDE_BASE_PATH.length);
	return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

/** connect-style middleware of the `/ride` route: runs the pipeline, then hands over to moleculer-web. */
function ridePipeline(this: GatewayThis, req: GatewayRequest, res: ServerResponse, next: (err?: unknown) => void): void {
	this.prepareRideRequest(req, res).then(
		() => next(),
		// moleculer-web rebuilds non-Moleculer errors and loses their name: wrap them whole.
		(err: unknown) => next(err instanceof Errors.MoleculerError ? err : new WrappedError(err)),
	);
}

function opsHandler(fn: (this: GatewayThis, req: GatewayRequest, res: ServerResponse) => void | Promise<void>) {
	return function handle(this: GatewayThis, req: GatewayRequest, res: ServerResponse): void {
		Promise.resolve()
			.then(() => fn.call(this, req, res))
			.catch((err: unknown) => this.renderError(req, res, err));
	};
}

const GatewayService: ServiceSchema<GatewayServiceSettings, GatewayMethods, GatewayLocal> = {
	name: "gateway",
	mixins: [ApiGateway as unknown as Partial<ServiceSchema>],

	// moleculer-web's; the gateway's own knobs (GatewaySettings) are merged in by `created`.
	settings: {
		// Replaced from PORT when the service is created (PORT=0 picks a free port).
		port: 3000,
		server: true,
		// Slow clients cannot hold a request open for minutes.
		requestTimeout: 30_000,
		// Request logs at debug: bodies and headers (API keys, phone numbers) are never logged.
		logRequest: "debug",
		logResponse: "debug",
		logRequestParams: null,
		logResponseData: null,
		log4XXResponses: false,
		logRouteRegistration: "debug",
		/**
		 * Our own UUID is every request's id (the trace id, `requestId` in
		 * logs, `Ride-Request-Id` on the answer). A caller's sane
		 * `X-Request-Id` travels beside it as `meta.clientRequestId`: logged,
		 * echoed in `X-Request-Id`, never the trace id.
		 */
		rootCallOptions(options: { requestID?: string; meta?: Record<string, unknown> }, req: IncomingMessage) {
			options.requestID = newRequestId();
			const clientRequestId = clientRequestIdFrom(req.headers["x-request-id"]);
			options.meta = clientRequestId === undefined ? {} : { clientRequestId };
		},
		/** The one error renderer: unrouted requests, the pipeline, the broker and the services all end here. */
		onError(this: GatewayThis, req: GatewayRequest, res: ServerResponse, err: unknown) {
			this.renderError(req, res, err);
		},
		routes: [
			// The driver API (driver apps, driver tokens): driver-route.ts.
			driverRoute(prepareDriverRequest),
			{
				name: "ride",
				path: RIDE_BASE_PATH,
				mappingPolicy: "restrict",
				autoAliases: false,
				aliases: rideAliases(),
				// Our own body reader runs after authentication (see ridePipeline), not moleculer-web's.
				bodyParsers: false,
				// Fails closed: `authenticate` refuses any request the pipeline did not authenticate.
				authentication: true,
				use: [ridePipeline],
				callOptions: { retries: 0 },
				onBeforeCall(this: GatewayThis, ctx: Context<unknown, GatewayMeta>, _route: unknown, req: GatewayRequest) {
					ctx.meta.requestId = ctx.requestID ?? undefined;
					if (req.$idempotencyKey !== undefined) ctx.meta.idempotencyKey = req.$idempotencyKey;
					// Params are the JSON body only (no query string), and never carry the partner's identity.
					const body: Record<string, unknown> = isPlainObject(req.body) ? { ...req.body } : {};
					delete body.partnerId;
					const version = req.$apiVersion;
					if (version !== undefined) ctx.meta.apiVersion = version;
					// The services read the core version's shape; the version table translates the rest (nothing for the core).
					req.$params = version === undefined ? body : requestToCore(this.apiVersions, version, ridePathOf(req.parsedUrl), body as JsonObject);
				},
			},
			{
				name: "ops",
				path: "/",
				mappingPolicy: "restrict",
				autoAliases: false,
				bodyParsers: false,
				aliases: {
					"GET /health/live": opsHandler(function live(req, res) {
						this.sendJson(res, 200, { status: "live" });
					}),
					"GET /health/ready": opsHandler(async function ready(req, res) {
						const r = await this.readiness();
						this.sendJson(
							res,
							r.ready ? 200 : 503,
							{ status: r.status, checks: r.checks },
							r.ready ? {} : { "Retry-After": String(UNAVAILABLE_RETRY_AFTER_SECONDS) },
						);
					}),
					"GET /openapi.json": opsHandler(function openapi(req, res) {
						this.sendJson(res, 200, this.openapi, { "Cache-Control": "no-cache" });
					}),
					"GET /docs": opsHandler(function docs(req, res) {
						const html = this.docsHtml;
						res.statusCode = 200;
						setRequestIdHeaders(res);
						res.setHeader("Content-Type", "text/html; charset=utf-8");
						res.setHeader("Content-Length", Buffer.byteLength(html));
						res.setHeader("Cache-Control", "no-cache");
						res.setHeader("X-Content-Type-Options", "nosniff");
						// Self-contained page: nothing may load from anywhere.
						res.setHeader("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'");
						res.end(html);
					}),
				},
			},
		],
	} as WebSettings as GatewayServiceSettings,

	actions: {
		// moleculer-web's request entry point (private); declared for the access middleware.
		rest: { access: "internal" },
		// Not needed and not wanted on a public gateway.
		listAliases: false,
		addRoute: false,
		removeRoute: false,

		/**
		 * Starts (or, with `draining: false`, ends) draining: `/health/ready`
		 * answers 503 so load balancers stop routing here while in-flight
		 * requests finish. Called on SIGTERM before the broker stops.
		 */
		drain: {
			access: "internal",
			params: { draining: { type: "boolean", optional: true } },
			handler(this: GatewayThis, ctx: Context<{ draining?: boolean }>) {
				if (ctx.params.draining === false) this.draining = false;
				else this.startDraining();
				return { draining: this.draining };
			},
		},

		/** The readiness answer as data (REPL: `call gateway.readiness`). */
		readiness: {
			access: "internal",
			handler(this: GatewayThis): Promise<Readiness> {
				return this.readiness();
			},
		},
	},

	methods: {
		async prepareRideRequest(this: GatewayThis, req: GatewayRequest, res: ServerResponse): Promise<void> {
			// Unknown route or method: no pipeline, moleculer-web answers 404 (routes are public knowledge).
			if (!this.resolveAlias(req.parsedUrl, req.method)) return;
			// Tags the authentication call's logs too, not only the action's.
			req.$ctx.meta.requestId = req.$ctx.requestID ?? undefined;

			const apiKey = requireBearer(req.headers.authorization, "apiKey", "API key");
			// An address that keeps sending unknown keys stops costing partners a lookup per key.
			const address = clientAddress(req.socket?.remoteAddress, req.headers["x-forwarded-for"], this.settings.trustProxyHops);
			// One digest of the key for the cache and the throttle's three uses.
			const hash = keyHash(apiKey);
			const gate = await this.authThrottle.check(address, apiKey, hash);
			// Throttled: partners answers keys no live key could be without a lookup; a valid key is still served.
			const partner = await this.partnerOfKey(req.$ctx, apiKey, hash, !gate.allowed);
			if (!partner) {
				if (!gate.allowed) throw throttled(gate.retryAfterSeconds);
				await this.authThrottle.failed(address, apiKey, hash);
				throw unauthorized("Invalid API key");
			}
			this.authThrottle.succeeded(apiKey, hash);
			req.$partner = partner;

			// An unknown version is refused before anything is counted or done; from here every answer names the version.
			const version = servedVersion(this.apiVersions, req.headers["ride-version"], partner.apiVersion);
			req.$apiVersion = version;
			res.setHeader(API_VERSION_HEADER, version);

			await enforceRateLimit(this.limiter, partnerLimitKey(partner.partnerId, partner.mode), res);

			// Everything about the request is checked before the target service is looked up (503).
			req.$idempotencyKey = idempotencyKeyFrom(req.headers["idempotency-key"]);
			req.body = await readJsonBody(req, this.settings.bodyLimitBytes);
			req.$ridePipeline = true;
		},

		/**
		 * The key's partner: from this gateway's cache, else partners.authenticate
		 * (one broker call per key per GATEWAY_AUTH_CACHE_MS, not per request).
		 * A lookup that began before a partners.changed does not put back what it read.
		 * `onlyKnown` (a throttled address): an unknown answer may not have been
		 * looked up, so it is not remembered.
		 */
		async partnerOfKey(
			this: GatewayThis,
			ctx: Context<unknown, GatewayMeta>,
			apiKey: string,
			hash: string,
			onlyKnown: boolean,
		): Promise<AuthenticatedPartner | null> {
			const cached = this.authCache.get(hash);
			if (cached) return cached.value;
			const generation = this.authCache.generation;
			const found = await ctx.call<AuthenticatedPartner | null, AuthenticateParams>(
				"partners.authenticate",
				onlyKnown ? { apiKey, onlyKnown } : { apiKey },
			);
			if (!found && onlyKnown) return null;
			// Shared by every request of this key until it expires: nobody may change it.
			const partner = found ? Object.freeze({ ...found }) : null;
			this.authCache.set(hash, partner, generation);
			return partner;
		},

		/**
		 * moleculer-web's authentication hook: only what the pipeline
		 * authenticated gets through. The caller's identity travels as
		 * `meta.partnerId`/`meta.mode` (or `meta.driverId`), which is all any
		 * service reads; the hook answers null so moleculer-web's
		 * `meta.user` stays empty instead of carrying the partner object over
		 * NATS and back with every call.
		 */
		authenticate(this: GatewayThis, ctx: Context<unknown, GatewayMeta>, _route: unknown, req: GatewayRequest): null {
			if ((req as unknown as DriverRequest).$driverPipeline) {
				authenticateDriverRequest(ctx as never, req as unknown as DriverRequest);
				return null;
			}
			const partner = req.$partner;
			if (!req.$ridePipeline || !partner) throw unauthorized("Missing API key: send Authorization: Bearer <apiKey>");
			ctx.meta.partnerId = partner.partnerId;
			ctx.meta.mode = partner.mode;
			return null;
		},

		renderError(this: GatewayThis, req: GatewayRequest, res: ServerResponse, err: unknown): void {
			const mapped = toErrorResponse(err, { unavailableRetryAfterSeconds: this.settings.unavailableRetryAfterSeconds });
			const where = {
				requestId: req.$ctx?.requestID ?? undefined,
				clientRequestId: req.$ctx?.meta?.clientRequestId,
				method: req.method,
				path: req.parsedUrl ?? req.url?.split("?")[0],
				status: mapped.status,
				code: mapped.body.code,
			};
			if (mapped.logLevel === "error") this.logger.error("Request failed", { ...where, error: describeForLog(err, this.logStacks) });
			else if (mapped.logLevel === "warn") this.logger.warn("Request answered 503", { ...where, error: describeForLog(err).name });
			else this.logger.debug("Request refused", where);
			if (res.headersSent) {
				// Too late for an envelope: cut the response so the client sees a failure, not a truncated success.
				res.destroy();
				return;
			}
			this.sendJson(res, mapped.status, mapped.body, mapped.headers);
		},

		/** Replaces moleculer-web's handler, which logs stacks and data; renderError logs what is safe. */
		errorHandler(this: GatewayThis, req: GatewayRequest, res: ServerResponse, err: unknown): void {
			this.renderError(req, res, err);
		},

		send404(this: GatewayThis, req: GatewayRequest, res: ServerResponse): void {
			const path = String(req.parsedUrl ?? req.url ?? "").slice(0, 200);
			this.renderError(req, res, new ApiError("NOT_FOUND", `No route for ${req.method} ${path}`));
		},

		/** Successful answers are JSON; a service may pick a 2xx status with `ctx.meta.$statusCode` (orders: 201). */
		sendResponse(this: GatewayThis, req: GatewayRequest, res: ServerResponse, data: unknown): void {
			const meta = req.$ctx.meta;
			const version = req.$apiVersion;
			const answer = version === undefined ? data : answerFromCore(this.apiVersions, version, ridePathOf(req.parsedUrl), data);
			sendJson(res, successStatus(meta.$statusCode), answer ?? null, serviceResponseHeaders(meta.$responseHeaders));
		},

		sendJson(this: GatewayThis, res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
			sendJson(res, status, body, headers);
		},

		readiness(this: GatewayThis): Promise<Readiness> {
			return this.readinessProbe.read();
		},

		startDraining(this: GatewayThis): void {
			if (!this.draining) this.logger.info("Draining: /health/ready now answers 503");
			this.draining = true;
		},
	},

	events: {
		/** A key, secret, partner or API version pin changed somewhere: the next request of every key asks partners again. */
		[PARTNER_EVENTS.changed](this: GatewayThis) {
			this.authCache.clear();
		},
	},

	created(this: GatewayThis) {
		const env = serviceEnv(this);
		// PORT lands on moleculer-web's own `port` (PORT=0 picks a free port).
		const cfg = useServiceSettings(this, readGatewaySettings);
		// moleculer-web builds its per-request log lines (colours, timings,
		// the alias) before the logger drops them: only when they are kept.
		const runtime = readSettings(env);
		const requestLogs = ["debug", "trace"].includes(runtime.logLevel);
		this.logStacks = !runtime.production;
		for (const route of this.routes) route.logging = requestLogs;
		this.authCache = new AuthCache<AuthenticatedPartner>(GATEWAY_AUTH_CACHE_MS);
		this.apiVersions = apiVersionsOf(this);
		if (cfg.redisUrl) {
			this.redis = openLimitRedis(cfg.redisUrl, cfg.redisTimeoutMs, (state, err) => {
				if (state === "ready") this.logger.info("Limits shared through Redis");
				else this.logger.warn("Redis unreachable: limits counted in this gateway's memory until it is back", { error: err?.message });
			});
		}
		const store: LimitStoreOptions = { redis: this.redis, keyPrefix: cfg.redisKeyPrefix };
		const onStoreError = (err: unknown) => this.logger.warn("Limit store failed: request let through", { error: (err as Error)?.name });
		this.limiter = partnerLimiter({ perMinute: cfg.rateLimitPerMinute, burst: cfg.rateLimitBurst }, store, onStoreError);
		this.authThrottle = new AuthFailureThrottle(
			cfg.authFailureLimitPerMinute > 0 ? windowLimiter(store, "authfail", cfg.authFailureLimitPerMinute, 60) : undefined,
			cfg.authFailureLimitPerMinute,
			onStoreError,
		);
		this.draining = false;
		this.readinessProbe = new ReadinessProbe(
			() => checkReadiness(this.broker, cfg.readyCheckTimeoutMs, () => false),
			cfg.readyCacheMs,
			() => this.draining,
		);
		this.openapi = buildOpenApiDocument(this.settings);
		this.docsHtml = renderDocsPage(this.openapi);
	},

	async stopped(this: GatewayThis) {
		// quit() would wait for a Redis that is away; the counts live in Redis anyway.
		this.redis?.disconnect();
	},
};

export default GatewayService;
