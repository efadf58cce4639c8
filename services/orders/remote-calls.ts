import type { Context, Service } from "moleculer";
import { ORDERS_RETRY_AFTER_SECONDS } from "../../contracts/orders";
import { ApiError } from "../../lib/errors";

type Logger = Service["logger"];

/** Failures that mean "the other service is not there right now", answered as 503 (retryable). */
const UNAVAILABLE_ERRORS = new Set([
	"ServiceNotFoundError",
	"ServiceNotAvailableError",
	"RequestTimeoutError",
	"RequestRejectedError",
	"RequestSkippedError",
	"BrokerDisconnectedError",
	"QueueIsFullError",
]);

/** Calls another service; its absence becomes `503 SERVICE_UNAVAILABLE`, its own errors pass through. */
export async function callService<R>(ctx: Context, logger: Logger, action: string, params: unknown): Promise<R> {
	try {
		return await ctx.call<R, unknown>(action, params);
	} catch (err) {
		if (UNAVAILABLE_ERRORS.has((err as Error)?.name)) {
			logger.warn(`${action} is unavailable: ${(err as Error).name}`);
			throw new ApiError("SERVICE_UNAVAILABLE", "A required service is temporarily unavailable", { retryAfter: ORDERS_RETRY_AFTER_SECONDS });
		}
		throw err;
	}
}
