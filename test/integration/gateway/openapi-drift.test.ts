import { readFileSync } from "node:fs";
import type { Service } from "moleculer";
import { RIDE_ROUTES } from "../../../contracts/gateway";
import { buildOpenApiDocument } from "../../../services/gateway/openapi";
import { constraintsOf, paramsToJsonSchema } from "../../../services/gateway/openapi/json-schema";
import { CONVERT, requestSchemaName } from "../../../services/gateway/openapi/requests";
import { readGatewaySettings } from "../../../services/gateway/gateway.settings";
import { OPENAPI_PATH } from "../../../scripts/generate-openapi";
import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { startTestNode, type TestNode } from "../../helpers/node";

/**
 * Drift between the document and the running code fails here: every
 * documented request body must be the conversion of the params the running
 * action validates with, and the gateway must serve the committed document.
 */

let db: TestDatabase;
let node: TestNode;

beforeAll(async () => {
	db = await createTestDatabase("openapi");
	node = await startTestNode({ databaseUrl: db.url, services: ["partners", "gateway", "pricing", "riders", "orders"] });
});

afterAll(async () => {
	await node?.stop();
	await db?.drop();
});

/** The params of `service.action` as the running service declares them. */
function runningParams(qualified: string): Record<string, unknown> {
	const [serviceName, actionName] = qualified.split(".");
	const service = node.broker.getLocalService(serviceName) as Service | undefined;
	const action = service?.schema.actions?.[actionName] as { params?: Record<string, unknown> } | undefined;
	if (!action?.params) throw new Error(`${qualified} declares no params`);
	return action.params;
}

describe("the OpenAPI document against the running services", () => {
	const doc = buildOpenApiDocument(readGatewaySettings({}));

	it.each(RIDE_ROUTES.map((r) => [r.path, r] as const))("%s: the documented body is the running action's params", (_path, route) => {
		const documented = doc.components.schemas[requestSchemaName(route)];
		expect(constraintsOf(documented)).toEqual(constraintsOf(paramsToJsonSchema(runningParams(route.action), CONVERT)));
	});

	it("the gateway serves the committed document", async () => {
		const res = await fetch(`${node.baseUrl}/openapi.json`);
		expect(res.status).toBe(200);
		expect(await res.json()).toEqual(JSON.parse(readFileSync(OPENAPI_PATH, "utf8")));
	});
});
