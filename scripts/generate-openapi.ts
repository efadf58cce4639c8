/**
 * Writes docs/openapi.json: the OpenAPI document the gateway serves, with the
 * default limits (no environment). test/unit/gateway/openapi-drift.test.ts fails when
 * the committed file differs from what this generates. Then regenerates the
 * SDK's types from it (scripts/generate-sdk-types.ts).
 *
 *   npx tsx scripts/generate-openapi.ts
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildOpenApiDocument } from "../services/gateway/openapi";
import { readGatewaySettings } from "../services/gateway/gateway.settings";
import { SDK_TYPES_PATH, writeSdkTypes } from "./generate-sdk-types";

export const OPENAPI_PATH = join(__dirname, "..", "docs", "openapi.json");

/** The committed document's text: the defaults' document, two-space JSON, one trailing newline. */
export function openApiText(): string {
	return `${JSON.stringify(buildOpenApiDocument(readGatewaySettings({})), null, 2)}\n`;
}

if (require.main === module) {
	writeFileSync(OPENAPI_PATH, openApiText());
	console.log(`wrote ${OPENAPI_PATH}`);
	writeSdkTypes().then(
		(current) => console.log(current ? `${SDK_TYPES_PATH} is current` : `wrote ${SDK_TYPES_PATH}`),
		(err: unknown) => {
			console.error(err);
			process.exit(1);
		},
	);
}
