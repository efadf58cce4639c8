import type { ActionHandler, ActionSchema, Context, ServiceBroker } from "moleculer";
import { DataErrorsMiddleware } from "../../../middlewares/data-errors.middleware";

const warn = jest.fn();
const broker = { getLogger: () => ({ warn }) } as unknown as ServiceBroker;
const wrap = (handler: (ctx: Context) => unknown) =>
	(DataErrorsMiddleware.localAction as (this: ServiceBroker, next: ActionHandler, action: ActionSchema) => ActionHandler).call(
		broker,
		handler as ActionHandler,
		{ name: "x.y" } as ActionSchema,
	) as unknown as (ctx: Context) => Promise<unknown>;
const ctx = {} as Context;
const dataError = () => Object.assign(new Error("invalid byte sequence"), { parent: { code: "22021" } });

describe("DataErrors middleware", () => {
	it("passes answers through as a promise (sync or async)", async () => {
		await expect(wrap(() => 42)(ctx)).resolves.toBe(42);
		await expect(wrap(async () => ({ a: 1 }))(ctx)).resolves.toEqual({ a: 1 });
	});
	it("turns a database data exception into 400 VALIDATION_ERROR, thrown or rejected", async () => {
		for (const handler of [
			() => {
				throw dataError();
			},
			async () => {
				throw dataError();
			},
		]) {
			const p = wrap(handler)(ctx);
			expect(p).toBeInstanceOf(Promise);
			await expect(p).rejects.toMatchObject({ code: 400, type: "VALIDATION_ERROR" });
		}
		expect(warn).toHaveBeenCalledWith(expect.stringContaining("SQLSTATE 22021"));
	});
	it("leaves other errors alone", async () => {
		const other = new Error("boom");
		await expect(
			wrap(() => {
				throw other;
			})(ctx),
		).rejects.toBe(other);
		await expect(wrap(() => Promise.reject(other))(ctx)).rejects.toBe(other);
	});
});
