import { Errors, type CallingOptions, type ServiceBroker } from "moleculer";

/**
 * Action calls for the suites that drive services over a broker: a call whose
 * failure is an answer to compare (status and error type), and the error a
 * call must fail with.
 */

export interface CallAnswer<T = any> {
	/** 200 for a result; else the error's code (400 for parameter validation, as the gateway answers it), 500 when it has none. */
	status: number;
	/** The error's type (CONFLICT, INVALID_OTP, …); absent on success. */
	code?: string;
	/** The result; absent on failure. */
	body: T;
}

export async function callAction<T = any>(broker: ServiceBroker, action: string, params: unknown, opts?: CallingOptions): Promise<CallAnswer<T>> {
	try {
		return { status: 200, body: await broker.call<T, unknown>(action, params, opts) };
	} catch (err) {
		const e = err as { name: string; code: unknown; type: string };
		return { status: e.name === "ValidationError" ? 400 : typeof e.code === "number" ? e.code : 500, code: e.type, body: undefined as T };
	}
}

/** The MoleculerError `call` fails with; the test fails when it succeeds, or fails with another type (or code, when given). */
export async function rejection(call: Promise<unknown>, type: string, code?: number): Promise<Errors.MoleculerError> {
	const err = (await call.then(
		() => {
			throw new Error(`expected ${type}, got success`);
		},
		(e: unknown) => e,
	)) as Errors.MoleculerError;
	expect(err).toBeInstanceOf(Errors.MoleculerError);
	expect(err.type).toBe(type);
	if (code !== undefined) expect(err.code).toBe(code);
	return err;
}
