import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { monitoringManifests } from "./monitoring-manifests";

/**
 * `npm run monitoring`: writes k8s/monitoring/ from monitoring/alert-rules.yml
 * and monitoring/dashboard.json (scripts/monitoring-manifests.ts). Run it after
 * changing either, and commit the result; test/integration/platform/monitoring.test.ts
 * fails while a committed file differs.
 */
const root = join(__dirname, "..");
for (const [path, content] of Object.entries(monitoringManifests())) {
	writeFileSync(join(root, path), content);
	process.stdout.write(`wrote ${path}\n`);
}
