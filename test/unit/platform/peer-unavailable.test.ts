import { Errors } from "moleculer";
import { ApiError } from "../../../lib/errors";
import { isPeerUnavailable } from "../../../lib/peer-unavailable";

describe("isPeerUnavailable", () => {
	it("is true for the broker's 'no one answered' errors, local or recreated from NATS", () => {
		expect(isPeerUnavailable(new Errors.ServiceNotFoundError({ action: "orders.get" }))).toBe(true);
		expect(isPeerUnavailable(new Errors.ServiceNotAvailableError({ action: "orders.get" }))).toBe(true);
		expect(isPeerUnavailable(new Errors.RequestTimeoutError({ action: "orders.get", nodeID: "n1" }))).toBe(true);
		expect(isPeerUnavailable(new (Errors.BrokerDisconnectedError as unknown as new () => Error)())).toBe(true);
		expect(isPeerUnavailable({ name: "MoleculerError", type: "REQUEST_REJECTED" })).toBe(true);
	});

	it("is false for a service's own answers, even a 503, and for non-errors", () => {
		expect(isPeerUnavailable(new ApiError("SERVICE_UNAVAILABLE", "Pricing is starting"))).toBe(false);
		expect(isPeerUnavailable(new ApiError("CONFLICT", "no"))).toBe(false);
		expect(isPeerUnavailable(new Error("boom"))).toBe(false);
		expect(isPeerUnavailable(undefined)).toBe(false);
		expect(isPeerUnavailable("ServiceNotFoundError")).toBe(false);
	});
});
