import type { ActionHandler, ActionSchema, Context, Middleware, ServiceBroker } from "moleculer";
import { dataExceptionState, UNSTORABLE_VALUE_MESSAGE } from "../lib/data-exception";
import { ApiError } from "../lib/errors";

/**
 * Backstop for input validation, on every node: an action whose query
 * PostgreSQL refused as data (SQLSTATE class 22: bad characters, numbers or
 * dates out of range) fails with 400 VALIDATION_ERROR instead of an internal
 * error. Only the SQLSTATE is logged (the database's message may quote the
 * value), and nothing of the database reaches the caller. Converted here
 * because Moleculer carries only name/message/code/type/data across NATS,
 * not the driver's SQLSTATE.
 */
export function toDataValidationError(err: unknown): unknown {
	const state = dataExceptionState(err);
	if (state === undefined) return err;
	return new ApiError("VALIDATION_ERROR", UNSTORABLE_VALUE_MESSAGE, {
		details: [{ field: "body", message: UNSTORABLE_VALUE_MESSAGE }],
	});
}

export const DataErrorsMiddleware: Middleware = {
	name: "DataErrors",
	localAction(this: ServiceBroker, next: ActionHandler, action: ActionSchema): ActionHandler {
		const name = String(action.name ?? "");
		// One closure per action, not per call: a call that succeeds costs one `then`.
		const convert = (err: unknown): never => {
			const converted = toDataValidationError(err);
			if (converted !== err)
				this.getLogger("data-errors").warn(`A database data exception (SQLSTATE ${dataExceptionState(err)}) in ${name} answered 400`);
			throw converted;
		};
		return function convertDataErrors(this: unknown, ctx: Context) {
			let result: unknown;
			try {
				result = next.call(this as never, ctx);
			} catch (err) {
				// A synchronous throw becomes a rejection too, so it is converted like any other.
				return Promise.resolve().then(() => convert(err));
			}
			return Promise.resolve(result).then(undefined, convert);
		};
	},
};
