import type { IncomingMessage, ServerResponse } from "node:http";
import { Errors, type Context } from "moleculer";
import { DRIVER_BASE_PATH, DRIVER_ROUTES, type DriverCallMeta } from "../../contracts/gateway";
import type { AuthenticateDriverParams, AuthenticatedDriver } from "../../contracts/driver";
import type { AuthFailureThrottle } from "./auth-throttle";
import { clientAddress } from "./client-address";
import { WrappedError } from "./errors";
import { ApiError } from "../../lib/errors";
import { hashApiKey } from "../../lib/secrets";
import { enforceRateLimit, type PartnerLimiter } from "./rate-limiter";
import { readJsonBody, requireBearer } from "./request";

/**
 * The driver API's route, `/driver/*`: the same pipeline as `/ride/*` with
 * a driver token instead of an API key.
 *
 *   route known? (else 404) → address throttled for failed authentications? (429)
 *   → `Authorization: Bearer <driver token>` → dispatch.authenticateDriver (401)
 *   → per-driver rate limit (429) → JSON body (415/413/400) → the action
 *   (`access: "driver"`, params strict: 400).
 *
 * The action finds the driver in `ctx.meta.driverId`; the body never names
 * one (a `driverId` in it is dropped). Errors leave through the gateway's one
 * renderer as the contract's envelope.
 */

export interface DriverRequest extends IncomingMessage {
	$ctx: Context<unknown, DriverCallMeta>;
	parsedUrl: string;
	body?: unknown;
	$params?: Record<string, unknown>;
	$driverId?: string;
	$driverPipeline?: boolean;
}

export interface DriverGatewayParts {
	settings: { trustProxyHops: number; bodyLimitBytes: number };
	limiter: PartnerLimiter;
	authThrottle: AuthFailureThrottle;
	resolveAlias(url: string, method?: string): unknown;
}

/** The long-poll of `/driver/offers` may wait up to 25 s: the call's own timeout is above it. */
export const DRIVER_CALL_TIMEOUT_MS = 28_000;

export function driverAliases(): Record<string, string> {
	const aliases: Record<string, string> = {};
	for (const r of DRIVER_ROUTES) aliases[`${r.method} ${r.path}`] = r.action;
	return aliases;
}

const unauthorized = (message: string) => new ApiError("UNAUTHORIZED", message);

export async function prepareDriverRequest(this: DriverGatewayParts, req: DriverRequest, res: ServerResponse): Promise<void> {
	if (!this.resolveAlias(req.parsedUrl, req.method)) return;
	req.$ctx.meta.requestId = req.$ctx.requestID ?? undefined;
	const token = requireBearer(req.headers.authorization, "token", "driver token");
	const address = clientAddress(req.socket?.remoteAddress, req.headers["x-forwarded-for"], this.settings.trustProxyHops);
	const gate = await this.authThrottle.check(address, token);
	if (!gate.allowed) {
		throw new ApiError("RATE_LIMITED", `Too many failed authentications from this address; retry in ${gate.retryAfterSeconds} s`, {
			retryAfter: gate.retryAfterSeconds,
		});
	}
	const driver = await req.$ctx.call<AuthenticatedDriver | null, AuthenticateDriverParams>("dispatch.authenticateDriver", {
		tokenHash: hashApiKey(token),
	});
	if (!driver) {
		await this.authThrottle.failed(address, token);
		throw unauthorized("Invalid, expired or revoked driver token");
	}
	this.authThrottle.succeeded(token);
	req.$driverId = driver.driverId;

	await enforceRateLimit(this.limiter, `driver:${driver.driverId}`, res);
	req.body = await readJsonBody(req, this.settings.bodyLimitBytes);
	req.$driverPipeline = true;
}

/** moleculer-web route options of `/driver`; `pipeline` is prepareDriverRequest bound by the gateway. */
export function driverRoute(pipeline: (req: DriverRequest, res: ServerResponse) => Promise<void>) {
	return {
		name: "driver",
		path: DRIVER_BASE_PATH,
		mappingPolicy: "restrict",
		autoAliases: false,
		aliases: driverAliases(),
		bodyParsers: false,
		authentication: true,
		use: [
			function driverPipeline(this: unknown, req: DriverRequest, res: ServerResponse, next: (err?: unknown) => void): void {
				pipeline.call(this, req, res).then(
					() => next(),
					(err: unknown) => next(err instanceof Errors.MoleculerError ? err : new WrappedError(err)),
				);
			},
		],
		callOptions: { retries: 0, timeout: DRIVER_CALL_TIMEOUT_MS },
		onBeforeCall(ctx: Context<unknown, { requestId?: string }>, _route: unknown, req: DriverRequest) {
			ctx.meta.requestId = ctx.requestID ?? undefined;
			// Params are the JSON body only, and never carry an identity.
			const body: Record<string, unknown> =
				typeof req.body === "object" && req.body !== null && !Array.isArray(req.body) ? { ...(req.body as Record<string, unknown>) } : {};
			delete body.driverId;
			delete body.partnerId;
			req.$params = body;
		},
	};
}

/** moleculer-web's authentication hook for `/driver`: only what the driver pipeline authenticated gets through, as `meta.driverId`. */
export function authenticateDriverRequest(ctx: Context<unknown, { driverId?: string }>, req: DriverRequest): void {
	if (!req.$driverPipeline || !req.$driverId) throw unauthorized("Missing driver token: send Authorization: Bearer <token>");
	ctx.meta.driverId = req.$driverId;
}
