import { ServiceBroker } from "moleculer";
import { loadServiceSchema } from "../../../services";
import { withEnv } from "../../../runtime/node";

/**
 * moleculer-web formats a log line per request (colours, timings, the alias)
 * before the logger drops it; the gateway turns that off unless the lines
 * are kept (LOGLEVEL debug or trace).
 */
function gatewayRoutes(logLevel: string): Array<{ logging: boolean }> {
	const broker = new ServiceBroker({ logger: false });
	const env = { PORT: "0", LOGLEVEL: logLevel };
	const svc = broker.createService(withEnv(loadServiceSchema("gateway"), env)) as unknown as {
		routes: Array<{ logging: boolean }>;
		server: { close(): void };
	};
	svc.server.close();
	return svc.routes;
}

describe("gateway request logs", () => {
	it("are not formatted at info and above", () => {
		for (const level of ["info", "warn", "error"]) {
			const routes = gatewayRoutes(level);
			expect(routes.length).toBeGreaterThanOrEqual(3);
			expect(routes.map((r) => r.logging)).toEqual(routes.map(() => false));
		}
	});

	it("are kept at debug and trace", () => {
		for (const level of ["debug", "trace"]) {
			const routes = gatewayRoutes(level);
			expect(routes.map((r) => r.logging)).toEqual(routes.map(() => true));
		}
	});
});
