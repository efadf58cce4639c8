import { ServiceBroker, type ServiceSchema } from "moleculer";
import { AccessMiddleware, visibilityFor } from "../../../middlewares/access.middleware";

/** The access rule sets the action's visibility: schemas declare `access` only. */
describe("visibility from access", () => {
	it("publishes partner and driver actions, keeps internal ones off the gateway", () => {
		expect(visibilityFor("a.b", "partner", undefined)).toBe("published");
		expect(visibilityFor("a.b", "driver", undefined)).toBe("published");
		expect(visibilityFor("a.b", "internal", undefined)).toBe("public");
	});

	it("keeps a narrower declared visibility and refuses a wider one", () => {
		expect(visibilityFor("a.b", "internal", "private")).toBe("private");
		expect(visibilityFor("a.b", "internal", "public")).toBe("public");
		expect(() => visibilityFor("a.b", "internal", "published")).toThrow(/a\.b.*wider visibility "published"/);
		expect(() => visibilityFor("a.b", "internal", "everywhere")).toThrow(/unknown visibility/);
	});

	it("sets it before the actions are registered", async () => {
		const broker = new ServiceBroker({ logger: false, middlewares: [AccessMiddleware] });
		broker.createService({
			name: "svc",
			actions: {
				pub: { access: "partner", handler: () => 1 },
				drv: { access: "driver", handler: () => 1 },
				int: { access: "internal", handler: () => 1 },
				priv: { access: "internal", visibility: "private", handler: () => 1 },
			},
		} as ServiceSchema);
		await broker.start();
		try {
			const list = broker.registry.getActionList({ onlyLocal: true, skipInternal: true }) as Array<{ name: string; action: { visibility?: string } }>;
			const visibility = Object.fromEntries(list.map((a) => [a.name, a.action.visibility]));
			expect(visibility).toEqual({ "svc.pub": "published", "svc.drv": "published", "svc.int": "public" });
			await expect(broker.call("svc.int")).resolves.toBe(1);
		} finally {
			await broker.stop();
		}
	});
});
