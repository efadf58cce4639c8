import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { parse } from "yaml";
import { ALERT_RULES_FILE, DASHBOARD_FILE, monitoringManifests } from "../../../scripts/monitoring-manifests";
import { createTestDatabase, type TestDatabase } from "../../helpers/db";
import { freePort, httpRequest } from "../../helpers/http";
import { startTestNode, uniqueNamespace, type TestNode } from "../../helpers/node";
import { waitFor } from "../../helpers/wait";

/**
 * What operators see (monitoring/, k8s/monitoring/): the alert rules pass
 * `promtool check rules`, their unit tests (each alert firing on its failure
 * and silent when healthy) pass `promtool test rules` and fail on a broken
 * rule, the Kubernetes files are what `npm run monitoring` writes, and every
 * metric the rules and the dashboard name is registered by a running node.
 */

const ROOT = resolve(__dirname, "../../..");
const PROMTOOL = "/usr/bin/promtool";
const run = promisify(execFile);

async function promtool(args: string[], cwd = ROOT): Promise<{ code: number; out: string }> {
	try {
		const { stdout, stderr } = await run(PROMTOOL, args, { cwd, timeout: 30_000 });
		return { code: 0, out: stdout + stderr };
	} catch (err) {
		const e = err as { code?: number; stdout?: string; stderr?: string };
		return { code: typeof e.code === "number" ? e.code : -1, out: `${e.stdout ?? ""}${e.stderr ?? ""}` };
	}
}

interface RuleFile {
	groups: Array<{ rules: Array<{ alert: string; expr: string }> }>;
}

const rules = (): RuleFile => parse(readFileSync(join(ROOT, ALERT_RULES_FILE), "utf8")) as RuleFile;
const dashboardExprs = (): string[] =>
	(JSON.parse(readFileSync(join(ROOT, DASHBOARD_FILE), "utf8")) as { panels: Array<{ targets: Array<{ expr: string }> }> }).panels.flatMap((p) =>
		p.targets.map((t) => t.expr),
	);

/** The metric names a PromQL expression reads: identifiers that are not functions, keywords, label names or durations. */
export function metricNames(expr: string): string[] {
	const bare = expr
		.replace(/\{[^}]*\}/g, "") // label matchers
		.replace(/\[[^\]]*\]/g, "") // ranges
		.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ""); // grouping labels
	const names = [...bare.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()/g)].map((m) => m[1]);
	const keywords = new Set(["and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN"]);
	return names.filter((n) => !keywords.has(n));
}

describe("monitoring: alert rules, their tests, the dashboard", () => {
	test("promtool is installed (Debian's prometheus package)", () => {
		if (!existsSync(PROMTOOL)) throw new Error(`${PROMTOOL} is missing: apt-get install -y --no-install-recommends prometheus`);
	});

	test("promtool check rules", async () => {
		const r = await promtool(["check", "rules", ALERT_RULES_FILE]);
		expect([r.code, r.out]).toEqual([0, expect.stringContaining("SUCCESS")]);
	});

	test("promtool test rules: every alert fires on its failure and stays silent when healthy", async () => {
		const r = await promtool(["test", "rules", "monitoring/alert-rules.test.yml"]);
		expect([r.code, r.out]).toEqual([0, expect.stringContaining("SUCCESS")]);
		// Each alert has a case that fires and one that stays silent.
		const tests = readFileSync(join(ROOT, "monitoring/alert-rules.test.yml"), "utf8");
		for (const { alert } of rules().groups.flatMap((g) => g.rules)) {
			const cases = [...tests.matchAll(new RegExp(`alertname: ${alert}\\n\\s+exp_alerts:( \\[\\])?`, "g"))];
			expect([alert, cases.some((c) => c[1] === undefined), cases.some((c) => c[1] === " []")]).toEqual([alert, true, true]);
		}
	});

	test("a broken rule fails its unit tests", async () => {
		const dir = mkdtempSync(join(tmpdir(), "ride-rules-"));
		try {
			const broken = readFileSync(join(ROOT, ALERT_RULES_FILE), "utf8").replace("> 0.02", "> 0.5");
			expect(broken).not.toEqual(readFileSync(join(ROOT, ALERT_RULES_FILE), "utf8"));
			writeFileSync(join(dir, "alert-rules.yml"), broken);
			writeFileSync(join(dir, "alert-rules.test.yml"), readFileSync(join(ROOT, "monitoring/alert-rules.test.yml")));
			const r = await promtool(["test", "rules", "alert-rules.test.yml"], dir);
			expect(r.code).not.toBe(0);
			expect(r.out).toContain("RideCreateOrderErrors");
		} finally {
			rmSync(dir, { recursive: true, force: true });
		}
	});

	test.each(Object.keys(monitoringManifests()))("%s is what `npm run monitoring` writes", (path) => {
		// On a difference: run `npm run monitoring` and commit the result.
		expect(readFileSync(join(ROOT, path), "utf8")).toBe(monitoringManifests()[path]);
	});

	test("metricNames reads the metrics of an expression", () => {
		expect(
			metricNames('histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{route="POST /ride/create-order"}[5m]))) > 0.5'),
		).toEqual(["http_request_duration_seconds_bucket"]);
		expect(metricNames("sum(bus_connected) / count(database_up) == 0")).toEqual(["bus_connected", "database_up"]);
	});

	describe("every metric named is registered by a running node", () => {
		let db: TestDatabase;
		let node: TestNode | undefined;
		let metricsPort: number;

		beforeAll(async () => {
			db = await createTestDatabase("monitoring");
			metricsPort = await freePort();
			node = await startTestNode({
				databaseUrl: db.url,
				nats: { namespace: uniqueNamespace("monitoring") },
				env: { METRICS_PORT: String(metricsPort) },
			});
		}, 60_000);

		afterAll(async () => {
			await node?.stop().catch(() => undefined);
			await db?.drop().catch(() => undefined);
		}, 30_000);

		test("rules and dashboard", async () => {
			const broker = node!.broker;
			// The database gauge is set by its first probe, right after start.
			await waitFor("the database probe", () => broker.metrics.getMetric("database.up")?.get()?.value === 1, 10_000);
			// A scrape, as Prometheus makes: it also updates the process figures (registered on the first one).
			expect((await httpRequest(`http://127.0.0.1:${metricsPort}/metrics`)).status).toBe(200);
			const exported = new Set<string>();
			for (const m of broker.metrics.list()) {
				const name = m.name.replace(/[.-]/g, "_");
				exported.add(name);
				if (m.type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) exported.add(name + suffix);
			}
			const named = new Set([...rules().groups.flatMap((g) => g.rules.map((r) => r.expr)), ...dashboardExprs()].flatMap(metricNames));
			expect(named.size).toBeGreaterThanOrEqual(10);
			expect([...named].filter((n) => !exported.has(n))).toEqual([]);
		}, 30_000);
	});
});
