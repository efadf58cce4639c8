import type { Context, Service } from "moleculer";
import { ORDERS_RETRY_AFTER_SECONDS } from "../../contracts/orders";
import { ApiError } from "../../lib/errors";
import { isPeerUnavailable } from "../../lib/peer-unavailable";

type Logger = Service["logger"];

/** Calls another service; its absence (lib/peer-unavailable) becomes `503 SERVICE_UNAVAILABLE` (retryable), its own errors pass through. */
export async function callService<R>(ctx: Context, logger: Logger, action: string, params: unknown): Promise<R> {
	try {
		return await ctx.call<R, unknown>(action, params);
	} catch (err) {
		if (isPeerUnavailable(err)) {
			logger.warn(`${action} is unavailable: ${(err as Error).name}`);
			throw new ApiError("SERVICE_UNAVAILABLE", "A required service is temporarily unavailable", { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
		}
		throw err;
	}
}
