import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { NATS_CONF_FILES } from "../lib/bus-permissions";

/**
 * `npm run nats-conf`: writes the nats-server configurations from the bus
 * contract (contracts/bus.ts, through lib/bus-permissions.ts). Run it after
 * changing who calls what, and commit the result;
 * test/unit/platform/bus-permissions.test.ts fails while a committed file
 * differs from what this writes.
 */
const root = join(__dirname, "..");
for (const [path, render] of Object.entries(NATS_CONF_FILES)) {
	writeFileSync(join(root, path), render());
	process.stdout.write(`wrote ${path}\n`);
}
