/**
 * The one answer to "does this error mean the peer that should answer is
 * not there (now)?": the broker found no endpoint, the call timed out, was
 * rejected or skipped, the queue was full, or this node lost the bus. The
 * call may succeed later; the peer never said no. Judged by the error's
 * name (kept when Moleculer recreates an error from NATS) or its type.
 * A service's own answer, even a 503, is not a peer being unavailable.
 */
const PEER_UNAVAILABLE_NAMES = new Set([
	"ServiceNotFoundError",
	"ServiceNotAvailableError",
	"ServiceUnavailableError", // moleculer-web: an alias whose action has no endpoint
	"RequestTimeoutError",
	"RequestRejectedError",
	"RequestSkippedError",
	"QueueIsFullError",
	"BrokerDisconnectedError",
]);

/** The types of those same Moleculer errors. */
const PEER_UNAVAILABLE_TYPES = new Set([
	"SERVICE_NOT_FOUND",
	"SERVICE_NOT_AVAILABLE",
	"REQUEST_TIMEOUT",
	"REQUEST_REJECTED",
	"REQUEST_SKIPPED",
	"QUEUE_FULL",
	"BAD_GATEWAY",
]);

export function isPeerUnavailable(err: unknown): boolean {
	if (typeof err !== "object" || err === null) return false;
	const { name, type } = err as { name?: unknown; type?: unknown };
	return (typeof name === "string" && PEER_UNAVAILABLE_NAMES.has(name)) || (typeof type === "string" && PEER_UNAVAILABLE_TYPES.has(type));
}
