import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { builtinModules } from "node:module";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import Redis from "ioredis";
import { parse, parseAllDocuments } from "yaml";
import { freePort } from "../../helpers/http";
import { waitFor } from "../../helpers/wait";

/**
 * The production shape, validated offline: every Kubernetes manifest against
 * the API schema (kubernetes-models, ESM, so through a spawned Node script),
 * the compose file with `docker-compose config -q` when installed plus a
 * built-in structural check, the Dockerfile's references, and each validator
 * failing on a broken copy.
 */
const ROOT = resolve(__dirname, "../../..");

interface Run {
	code: number | null;
	out: string;
}

function runNode(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
	return new Promise((resolvePromise, reject) => {
		const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
		let out = "";
		child.stdout.on("data", (c: Buffer) => (out += c.toString()));
		child.stderr.on("data", (c: Buffer) => (out += c.toString()));
		child.on("error", reject);
		child.on("exit", (code) => resolvePromise({ code, out }));
	});
}

const hasDockerCompose = spawnSync("docker-compose", ["version", "--short"], { encoding: "utf8" }).status === 0;
const hasKubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status === 0;
const COMPOSE_ENV: Record<string, string> = {
	POSTGRES_PASSWORD: "test-only-placeholder",
	REDIS_PASSWORD: "test-only-redis-placeholder",
	...Object.fromEntries(
		["GATEWAY", "PRICING", "RIDERS", "ORDERS", "DISPATCH", "NOTIFICATIONS", "FLEET", "OPERATOR"].map((u) => [`NATS_PASSWORD_${u}`, `test-only-nats-${u}`]),
	),
};

let tmp: string;
beforeAll(() => {
	tmp = mkdtempSync(join(tmpdir(), "ride-manifests-"));
});
afterAll(() => {
	rmSync(tmp, { recursive: true, force: true });
});

function brokenK8sCopy(label: string, file: string, edit: (text: string) => string): string {
	const dir = join(tmp, label);
	cpSync(join(ROOT, "k8s"), dir, { recursive: true });
	const path = join(dir, file);
	const before = readFileSync(path, "utf8");
	const after = edit(before);
	expect(after).not.toBe(before); // the edit really broke something
	writeFileSync(path, after);
	return dir;
}

describe("Kubernetes manifests", () => {
	test("every manifest is valid (kubernetes-models schema + references + production rules)", async () => {
		const r = await runNode(["scripts/validate-manifests.mjs", "k8s"]);
		expect(r.out).toMatch(/manifest\(s\) valid/);
		expect(r.code).toBe(0);
	});

	test("the set is complete: a Deployment per service with SERVICES, HPAs, PDBs, gateway Service + Ingress, migration Job, NATS, PostgreSQL", () => {
		const docs = [
			"namespace.yaml",
			"configmap.yaml",
			"gateway.yaml",
			"pricing.yaml",
			"riders.yaml",
			"orders.yaml",
			"dispatch.yaml",
			"notifications.yaml",
			"sandbox/fleet.yaml",
			"migrate-job.yaml",
			"infra/nats.yaml",
			"infra/postgres.yaml",
		]
			.flatMap((f) => parseAllDocuments(readFileSync(join(ROOT, "k8s", f), "utf8")).map((d) => d.toJS()))
			.filter(Boolean);
		const of = (kind: string) => docs.filter((d) => d.kind === kind);
		const servicesEnv = of("Deployment").map((d) => d.spec.template.spec.containers[0].env.find((e: { name: string }) => e.name === "SERVICES").value);
		expect(servicesEnv.sort()).toEqual(["dispatch", "fleet", "gateway,partners", "notifications", "orders", "pricing", "riders"]);
		expect(
			of("HorizontalPodAutoscaler")
				.map((h) => h.spec.scaleTargetRef.name)
				.sort(),
		).toEqual(["ride-dispatch", "ride-gateway", "ride-notifications", "ride-pricing"]);
		expect(of("PodDisruptionBudget")).toHaveLength(7);
		expect(of("Ingress")[0].spec.rules[0].http.paths[0].backend.service.name).toBe("ride-gateway");
		for (const d of of("Deployment")) {
			const pod = d.spec.template.spec;
			const c = pod.containers[0];
			expect(c.readinessProbe.httpGet.path).toBe("/health/ready");
			expect(c.livenessProbe.httpGet.path).toBe("/health/live");
			expect(c.lifecycle.preStop).toBeDefined();
			// The preStop sleep plus the in-process shutdown bound fit in the grace period.
			expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(5 + 25);
		}
		const config = of("ConfigMap")[0].data;
		expect(Number(config.SHUTDOWN_TIMEOUT_MS)).toBeLessThanOrEqual(25_000);
		expect(of("Job")[0].spec.template.spec.containers[0].command).toEqual(["node", "dist/bin/migrate.js"]);
		expect(
			of("StatefulSet")
				.map((s) => s.metadata.name)
				.sort(),
		).toEqual(["nats", "postgres"]);
		expect(parse(readFileSync(join(ROOT, "k8s/kustomization.yaml"), "utf8")).resources).toEqual(
			expect.arrayContaining(["infra/nats.yaml", "infra/postgres.yaml", "infra/redis.yaml"]),
		);
	});

	test("the bus and the database are closed: NATS over TLS with a user per service, and each pod reads its own Secret with only what it uses", () => {
		const load = (f: string) =>
			parseAllDocuments(readFileSync(join(ROOT, "k8s", f), "utf8"))
				.map((d) => d.toJS())
				.filter(Boolean);
		const kustomization = parse(readFileSync(join(ROOT, "k8s/kustomization.yaml"), "utf8"));
		expect(kustomization.resources).toContain("network-policy.yaml");
		const generator = kustomization.configMapGenerator.find((g: { name: string }) => g.name === "nats-config");
		expect(generator.files).toEqual(["nats-server.conf=infra/nats-server.conf"]);
		// The generated conf (test/unit/platform/bus-permissions.test.ts checks it is current): TLS and a user per service.
		const conf = readFileSync(join(ROOT, "k8s/infra/nats-server.conf"), "utf8");
		expect(conf).toMatch(/^tls \{\n {2}cert_file: "\/etc\/nats-tls\/tls.crt"\n {2}key_file: "\/etc\/nats-tls\/tls.key"/m);

		const nats = load("infra/nats.yaml").find((d) => d.kind === "StatefulSet");
		const container = nats.spec.template.spec.containers[0];
		expect(container.args.slice(0, 2)).toEqual(["-c", "/etc/nats/nats-server.conf"]);
		// Every user's password, from that user's own Secret: the one its pods log in with.
		const users = ["gateway", "pricing", "riders", "orders", "dispatch", "notifications", "fleet", "operator"];
		expect(container.env).toEqual(
			users.map((u) => ({ name: `NATS_PASSWORD_${u.toUpperCase()}`, valueFrom: { secretKeyRef: { name: `ride-${u}`, key: "NATS_PASSWORD" } } })),
		);
		for (const u of users) expect(conf).toContain(`user: ${u}\n      password: $NATS_PASSWORD_${u.toUpperCase()}\n`);
		expect(nats.spec.template.spec.volumes).toContainEqual({ name: "config", configMap: { name: "nats-config" } });
		expect(container.volumeMounts).toContainEqual({ name: "config", mountPath: "/etc/nats", readOnly: true });
		// The certificate from the `nats-tls` Secret, where the conf reads it.
		expect(nats.spec.template.spec.volumes).toContainEqual({ name: "tls", secret: { secretName: "nats-tls", defaultMode: 0o440 } });
		expect(container.volumeMounts).toContainEqual({ name: "tls", mountPath: "/etc/nats-tls", readOnly: true });
		const config = load("configmap.yaml")[0].data;
		// No shared bus login: each Deployment names its own user.
		expect(config.NATS_USER).toBeUndefined();
		// The services' roles cannot change the schema: the migrate Job does.
		expect(config.MIGRATE_ON_START).toBe("false");

		// One Secret per pod, holding only what it reads.
		const secrets = Object.fromEntries(load("secret.example.yaml").map((d) => [d.metadata.name, d.stringData as Record<string, string>]));
		const keysOf = (name: string) => Object.keys(secrets[name] ?? {}).sort();
		expect(keysOf("ride-gateway")).toEqual(["DATABASE_URL", "NATS_PASSWORD", "REDIS_URL"]);
		for (const s of ["pricing", "riders", "orders", "dispatch", "notifications"])
			expect([s, keysOf(`ride-${s}`)]).toEqual([s, ["DATABASE_URL", "NATS_PASSWORD"]]);
		expect(keysOf("ride-fleet")).toEqual(["NATS_PASSWORD"]);
		expect(keysOf("ride-migrate")).toEqual(["DATABASE_ADMIN_URL"]);
		expect(keysOf("ride-operator")).toEqual(["NATS_PASSWORD"]);
		expect(keysOf("nats-tls")).toEqual(["tls.crt", "tls.key"]);
		expect(load("secret.example.yaml").find((d) => d.metadata.name === "nats-ca")).toMatchObject({ kind: "ConfigMap", data: { "ca.crt": "REPLACE_ME" } });
		expect(keysOf("ride-redis")).toEqual(["REDIS_PASSWORD"]);
		// Each service's own role, none of them the admin, none shared (the gateway pod runs partners).
		const admin = new URL(secrets["ride-migrate"].DATABASE_ADMIN_URL).username;
		const roles = ["gateway", "pricing", "riders", "orders", "dispatch", "notifications"].map((s) => new URL(secrets[`ride-${s}`].DATABASE_URL).username);
		expect(roles).toEqual(["ride_partners", "ride_pricing", "ride_riders", "ride_orders", "ride_dispatch", "ride_notifications"]);
		expect(roles).not.toContain(admin);

		const workloads: Array<[string, string]> = [
			["gateway.yaml", "ride-gateway"],
			["pricing.yaml", "ride-pricing"],
			["riders.yaml", "ride-riders"],
			["orders.yaml", "ride-orders"],
			["dispatch.yaml", "ride-dispatch"],
			["notifications.yaml", "ride-notifications"],
			["sandbox/fleet.yaml", "ride-fleet"],
			["migrate-job.yaml", "ride-migrate"],
		];
		for (const [file, secret] of workloads) {
			const w = load(file).find((d) => d.kind === "Deployment" || d.kind === "Job");
			const c = w.spec.template.spec.containers[0];
			expect([file, w.spec.template.metadata.labels["app.kubernetes.io/part-of"]]).toEqual([file, "ride-platform"]);
			const secretRefs = (c.envFrom ?? [])
				.filter((r: { secretRef?: unknown }) => r.secretRef)
				.map((r: { secretRef: { name: string } }) => r.secretRef.name);
			expect([file, secretRefs]).toEqual([file, [secret]]);
			const keyRefs = (c.env ?? []).filter((e: { valueFrom?: { secretKeyRef?: unknown } }) => e.valueFrom?.secretKeyRef);
			if (file !== "migrate-job.yaml") expect([file, keyRefs]).toEqual([file, []]);
			if (file === "migrate-job.yaml") continue; // it never uses the bus
			// Its own bus user, and the NATS server's certificate checked against the mounted CA.
			const env = Object.fromEntries((c.env ?? []).map((e: { name: string; value?: string }) => [e.name, e.value]));
			expect([file, env.NATS_USER]).toEqual([file, secret.replace("ride-", "")]);
			expect([file, env.NATS_TLS_CA]).toEqual([file, "/etc/nats-ca/ca.crt"]);
			expect([file, c.volumeMounts]).toEqual([file, expect.arrayContaining([{ name: "nats-ca", mountPath: "/etc/nats-ca", readOnly: true }])]);
			expect([file, w.spec.template.spec.volumes]).toEqual([file, expect.arrayContaining([{ name: "nats-ca", configMap: { name: "nats-ca" } }])]);
		}
		// The Job: each service's DATABASE_URL by key, as <SERVICE>_DATABASE_URL, from that service's Secret.
		const job = load("migrate-job.yaml")[0].spec.template.spec.containers[0];
		const byName = Object.fromEntries(job.env.map((e: { name: string; valueFrom: { secretKeyRef: unknown } }) => [e.name, e.valueFrom.secretKeyRef]));
		expect(byName).toEqual({
			PARTNERS_DATABASE_URL: { name: "ride-gateway", key: "DATABASE_URL" },
			PRICING_DATABASE_URL: { name: "ride-pricing", key: "DATABASE_URL" },
			RIDERS_DATABASE_URL: { name: "ride-riders", key: "DATABASE_URL" },
			ORDERS_DATABASE_URL: { name: "ride-orders", key: "DATABASE_URL" },
			DISPATCH_DATABASE_URL: { name: "ride-dispatch", key: "DATABASE_URL" },
			NOTIFICATIONS_DATABASE_URL: { name: "ride-notifications", key: "DATABASE_URL" },
		});
	});

	test.each([
		[
			"a default-deny NetworkPolicy",
			"network-policy.yaml",
			(t: string) =>
				t
					.replace("  name: default-deny", "  name: default-open")
					.replace('  policyTypes: ["Ingress", "Egress"]\n---', '  policyTypes: ["Ingress"]\n---'),
			/no default-deny NetworkPolicy/,
		],
		[
			"no service account token (infra too)",
			"infra/postgres.yaml",
			(t: string) => t.replace("      automountServiceAccountToken: false\n", ""),
			/StatefulSet\/postgres: must not mount a service account token/,
		],
		[
			"a securityContext on every container (infra too)",
			"infra/nats.yaml",
			(t: string) =>
				t.replace(
					/ {10}securityContext:\n {12}allowPrivilegeEscalation: false\n {12}readOnlyRootFilesystem: true\n {12}capabilities:\n {14}drop: \["ALL"\]\n/,
					"",
				),
			/container nats: securityContext: must set allowPrivilegeEscalation: false[\s\S]*container nats: securityContext: must set readOnlyRootFilesystem: true[\s\S]*container nats: securityContext: must drop ALL capabilities/,
		],
		[
			"seccomp RuntimeDefault (the sandbox fleet too)",
			"sandbox/fleet.yaml",
			(t: string) => t.replace("        seccompProfile:\n          type: RuntimeDefault\n", ""),
			/Deployment\/ride-fleet container fleet: securityContext: seccompProfile must be RuntimeDefault/,
		],
		[
			"non-root (the migrate Job too)",
			"migrate-job.yaml",
			(t: string) => t.replace("        runAsNonRoot: true\n", ""),
			/Job\/ride-migrate container migrate: securityContext: must set runAsNonRoot: true/,
		],
		[
			"notifications never reaches 10.0.0.0/8",
			"network-policy.yaml",
			(t: string) => t.replace("              - 10.0.0.0/8\n", ""),
			/forbidden flow is allowed: ride-notifications → 10\.1\.2\.3:443\/TCP[\s\S]*ride-notifications → 10\.96\.0\.1:443/,
		],
		[
			"no app pod reaches NATS monitoring (8222)",
			"network-policy.yaml",
			(t: string) =>
				t.replaceAll(
					"        - protocol: TCP\n          port: 4222\n",
					"        - protocol: TCP\n          port: 4222\n        - protocol: TCP\n          port: 8222\n",
				),
			/forbidden flow is allowed: ride-gateway → nats:8222\/TCP/,
		],
		[
			"only the gateway reaches Redis",
			"network-policy.yaml",
			(t: string) =>
				t
					.replace("  name: gateway-to-redis", "  name: all-to-redis")
					.replace(/(name: all-to-redis[\s\S]*?podSelector:)\n {4}matchLabels:\n {6}app.kubernetes.io\/name: ride-gateway/, "$1 {}")
					.replace(
						/(name: redis-from-gateway[\s\S]*?- from:\n {8}- podSelector:)\n {12}matchLabels:\n {14}app.kubernetes.io\/name: ride-gateway/,
						"$1 {}",
					),
			/forbidden flow is allowed: ride-pricing → redis:6379/,
		],
		[
			"the fleet never reaches PostgreSQL",
			"network-policy.yaml",
			(t: string) => t.replaceAll("ride-notifications, ride-migrate]", "ride-notifications, ride-migrate, ride-fleet]"),
			/forbidden flow is allowed: ride-fleet → postgres:5432/,
		],
		[
			"a needed flow stays open (DNS)",
			"network-policy.yaml",
			(t: string) => t.replace("  name: dns-egress", "  name: dns-egress-typo").replace("k8s-app: kube-dns", "k8s-app: kube-dnss"),
			/needed flow is denied: ride-orders → kube-dns:53\/UDP/,
		],
	])("the validator enforces %s: a broken copy fails", async (label, file, edit, message) => {
		const dir = brokenK8sCopy(label.replace(/\W+/g, "-"), file, edit);
		const r = await runNode(["scripts/validate-manifests.mjs", dir]);
		expect(r.out).toMatch(message);
		expect(r.code).toBe(1);
	});

	test("the NetworkPolicy evaluator follows Kubernetes' rules (unselected pods open, both ends must allow, selectors AND, ipBlock except, named ports)", async () => {
		const script = `
			import { allowed } from "./scripts/network-policies.mts";
			const ns = { a: { "kubernetes.io/metadata.name": "a" }, b: { "kubernetes.io/metadata.name": "b" } };
			const pod = (name, namespace, labels, ip, ports) => ({ name, namespace, labels, ip, ports });
			const web = pod("web", "a", { app: "web" }, "10.0.0.1", [{ name: "http", containerPort: 8080 }]);
			const db = pod("db", "a", { app: "db" }, "10.0.0.2");
			const bWeb = pod("bweb", "b", { app: "web" }, "10.0.1.1");
			const deny = { metadata: { name: "deny", namespace: "a" }, spec: { podSelector: {}, policyTypes: ["Ingress", "Egress"] } };
			const dbIn = { metadata: { name: "db-in", namespace: "a" }, spec: { podSelector: { matchLabels: { app: "db" } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: "web" } } }], ports: [{ port: 5432 }] }] } };
			const webOut = { metadata: { name: "web-out", namespace: "a" }, spec: { podSelector: { matchExpressions: [{ key: "app", operator: "In", values: ["web"] }] }, policyTypes: ["Egress"], egress: [{ to: [{ podSelector: { matchLabels: { app: "db" } } }, { ipBlock: { cidr: "0.0.0.0/0", except: ["10.0.0.0/8"] } }] }] } };
			const webIn = { metadata: { name: "web-in", namespace: "a" }, spec: { podSelector: { matchLabels: { app: "web" } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "b" } }, podSelector: { matchLabels: { app: "web" } } }], ports: [{ port: "http" }] }] } };
			const ext = { name: "x", ip: "93.184.216.34" };
			console.log(JSON.stringify({
				open: allowed([], ns, web, db, 5432),
				denied: allowed([deny], ns, web, db, 5432),
				onlyIngress: allowed([deny, dbIn], ns, web, db, 5432),
				both: allowed([deny, dbIn, webOut], ns, web, db, 5432),
				wrongPort: allowed([deny, dbIn, webOut], ns, web, db, 5433),
				internet: allowed([deny, webOut], ns, web, ext, 443),
				exceptBlocks: allowed([deny, webOut], ns, web, { name: "p", ip: "10.9.9.9" }, 443),
				namedPort: allowed([dbIn, webIn], ns, bWeb, web, 8080),
				namedPortOther: allowed([dbIn, webIn], ns, bWeb, web, 9090),
				sameNamespaceNotSelected: allowed([webIn], ns, pod("w2", "a", { app: "web" }, "10.0.0.3"), web, 8080),
			}));
		`;
		const r = await runNode(["--input-type=module", "-e", script]);
		expect([r.code, JSON.parse(r.out)]).toEqual([
			0,
			{
				open: true,
				denied: false,
				onlyIngress: false,
				both: true,
				wrongPort: false,
				internet: true,
				exceptBlocks: false,
				namedPort: true,
				namedPortOther: false,
				sameNamespaceNotSelected: false,
			},
		]);
	});

	test("live mode by default: FLEET_MODE=live and no fleet in the default set; the sandbox component adds the fleet and sets simulated", async () => {
		const kustomization = parse(readFileSync(join(ROOT, "k8s/kustomization.yaml"), "utf8"));
		expect(kustomization.resources.some((r: string) => /fleet/.test(r))).toBe(false);
		expect(kustomization.components).toBeUndefined();
		const config = parseAllDocuments(readFileSync(join(ROOT, "k8s/configmap.yaml"), "utf8"))[0].toJS();
		expect(config.data.FLEET_MODE).toBe("live");
		const component = parse(readFileSync(join(ROOT, "k8s/sandbox/kustomization.yaml"), "utf8"));
		expect(component).toMatchObject({ apiVersion: "kustomize.config.k8s.io/v1alpha1", kind: "Component", resources: ["fleet.yaml"] });
		expect(component.patches[0].target).toEqual({ kind: "ConfigMap", name: "ride-config" });
		expect(parse(component.patches[0].patch)).toEqual([{ op: "replace", path: "/data/FLEET_MODE", value: "simulated" }]);
		// The commented switch in the default kustomization turns it on.
		expect(readFileSync(join(ROOT, "k8s/kustomization.yaml"), "utf8")).toMatch(/^# components:\n# {3}- sandbox$/m);
		if (!hasKubectl) return;
		const render = (dir: string) => spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8" });
		const live = render(join(ROOT, "k8s"));
		expect(live.status).toBe(0);
		const liveDocs = parseAllDocuments(live.stdout).map((d) => d.toJS());
		expect(liveDocs.find((d) => d.kind === "ConfigMap" && d.metadata.name === "ride-config").data.FLEET_MODE).toBe("live");
		expect(liveDocs.some((d) => d.metadata.name === "ride-fleet")).toBe(false);
		const dir = brokenK8sCopy("sandbox-on", "kustomization.yaml", (t) => t.replace("# components:\n#   - sandbox", "components:\n  - sandbox"));
		const sandbox = render(dir);
		expect(sandbox.status).toBe(0);
		const sandboxDocs = parseAllDocuments(sandbox.stdout).map((d) => d.toJS());
		expect(sandboxDocs.find((d) => d.kind === "ConfigMap" && d.metadata.name === "ride-config").data.FLEET_MODE).toBe("simulated");
		expect(
			sandboxDocs
				.filter((d) => d.metadata.name === "ride-fleet")
				.map((d) => d.kind)
				.sort(),
		).toEqual(["Deployment", "PodDisruptionBudget"]);
	});

	test("the validator fails on a NetworkPolicy schema error", async () => {
		const dir = brokenK8sCopy("netpol", "network-policy.yaml", (t) => t.replace("port: 5432", "port: [5432]"));
		const r = await runNode(["scripts/validate-manifests.mjs", dir]);
		expect(r.code).toBe(1);
		expect(r.out).toMatch(/NetworkPolicy\/postgres-clients: schema/);
	});

	test("the validator fails on a schema error (replicas is not an integer)", async () => {
		const dir = brokenK8sCopy("schema", "orders.yaml", (t) => t.replace("replicas: 2", 'replicas: "two"'));
		const r = await runNode(["scripts/validate-manifests.mjs", dir]);
		expect(r.code).toBe(1);
		expect(r.out).toMatch(/Deployment\/ride-orders: schema: .*replicas must be integer/);
	});

	test("the validator fails on a missing required field (Deployment without selector)", async () => {
		const dir = brokenK8sCopy("required", "riders.yaml", (t) =>
			t.replace(/ {2}selector:\n {4}matchLabels:\n {6}app.kubernetes.io\/name: ride-riders\n {2}strategy:/, "  strategy:"),
		);
		const r = await runNode(["scripts/validate-manifests.mjs", dir]);
		expect(r.code).toBe(1);
		expect(r.out).toMatch(/must have required property 'selector'|required property selector/);
	});

	test("the validator fails on a broken reference (HPA targets a Deployment that does not exist) and an unknown kind", async () => {
		const dir = brokenK8sCopy("refs", "pricing.yaml", (t) =>
			t
				.replace("    kind: Deployment\n    name: ride-pricing", "    kind: Deployment\n    name: ride-pricer")
				.replace("kind: PodDisruptionBudget", "kind: PodDisruptionBudgett"),
		);
		const r = await runNode(["scripts/validate-manifests.mjs", dir]);
		expect(r.code).toBe(1);
		expect(r.out).toMatch(/scaleTargetRef Deployment\/ride-pricer is not defined/);
		expect(r.out).toMatch(/unknown apiVersion\/kind "policy\/v1" "PodDisruptionBudgett"/);
	});

	test("the validator refuses a real-looking value in a committed Secret", async () => {
		const dir = brokenK8sCopy("secret", "secret.example.yaml", (t) => t.replace('password: "REPLACE_ME"', 'password: "s3cr3t-prod-password"'));
		const r = await runNode(["scripts/validate-manifests.mjs", dir]);
		expect(r.code).toBe(1);
		expect(r.out).toMatch(/password looks like a real value/);
	});
});

/** A manifest's `sh -c` command run here, with arguments appended to its last command (a free port, loopback only). */
function startShellCommand(command: string, extraArgs: string, env: Record<string, string>): ChildProcess {
	// Its own process group: the pipeline's redis-server is a child of sh, and is stopped with it.
	return spawn("sh", ["-c", `${command} ${extraArgs}`], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
}

describe("Redis for the gateways' shared limits (Kubernetes and Compose)", () => {
	const loadK8s = (f: string) =>
		parseAllDocuments(readFileSync(join(ROOT, "k8s", f), "utf8"))
			.map((d) => d.toJS())
			.filter(Boolean);
	const compose = () => parse(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true });
	const k8sRedis = () => loadK8s("infra/redis.yaml").find((d) => d.kind === "StatefulSet");

	test("Kubernetes: a Redis that needs the Secret's password, REDIS_URL in the Secret every gateway reads, and a NetworkPolicy that lets only the gateway in", () => {
		const redis = k8sRedis();
		const c = redis.spec.template.spec.containers[0];
		expect(c.env).toContainEqual({ name: "REDIS_PASSWORD", valueFrom: { secretKeyRef: { name: "ride-redis", key: "REDIS_PASSWORD" } } });
		expect(c.command.join(" ")).toMatch(/requirepass/);
		// The limits' keys expire; nothing is written to disk.
		expect(c.command.join(" ")).toMatch(/--save '' --appendonly no/);
		const service = loadK8s("infra/redis.yaml").find((d) => d.kind === "Service");
		expect(service.spec.selector).toEqual({ "app.kubernetes.io/name": "redis" });
		const secret = loadK8s("secret.example.yaml").find((d) => d.metadata.name === "ride-gateway").stringData;
		expect(loadK8s("secret.example.yaml").find((d) => d.metadata.name === "ride-redis").stringData.REDIS_PASSWORD).toBe("REPLACE_ME");
		expect(new URL(secret.REDIS_URL)).toMatchObject({
			protocol: "redis:",
			password: "REPLACE_ME",
			hostname: `${service.metadata.name}.ride.svc.cluster.local`,
			port: "6379",
		});
		const gateway = loadK8s("gateway.yaml").find((d) => d.kind === "Deployment");
		expect(gateway.spec.template.spec.containers[0].envFrom).toContainEqual({ secretRef: { name: "ride-gateway" } });
		const policy = loadK8s("network-policy.yaml").find((p) => p.spec.podSelector.matchLabels?.["app.kubernetes.io/name"] === "redis");
		expect(policy.spec.policyTypes).toEqual(["Ingress"]);
		expect(policy.spec.ingress).toHaveLength(1);
		expect(policy.spec.ingress[0].ports).toEqual([{ protocol: "TCP", port: 6379 }]);
		const allowed = policy.spec.ingress[0].from[0].podSelector.matchLabels as Record<string, string>;
		const admits = (labels: Record<string, string>) => Object.entries(allowed).every(([k, v]) => labels[k] === v);
		// The gateway's pods are let in; no other service's are.
		expect(admits(gateway.spec.template.metadata.labels)).toBe(true);
		for (const f of ["pricing.yaml", "riders.yaml", "orders.yaml", "dispatch.yaml", "notifications.yaml", "sandbox/fleet.yaml", "migrate-job.yaml"]) {
			const w = loadK8s(f).find((d) => d.kind === "Deployment" || d.kind === "Job");
			expect([f, admits(w.spec.template.metadata.labels)]).toEqual([f, false]);
		}
		expect(redis.spec.template.metadata.labels["app.kubernetes.io/name"]).toBe("redis");
	});

	test("Compose: a Redis that needs REDIS_PASSWORD from the environment, and only the gateway pointed at it", () => {
		const services = compose().services;
		expect(services.redis.environment.REDIS_PASSWORD).toMatch(/^\$\{REDIS_PASSWORD:\?/);
		expect(services.redis.command.join(" ")).toMatch(/requirepass/);
		expect(services.gateway.environment.REDIS_URL).toBe("redis://:${REDIS_PASSWORD:?set REDIS_PASSWORD in .env}@redis:6379");
		expect(services.gateway.depends_on).toMatchObject({
			redis: { condition: "service_healthy" },
			nats: { condition: "service_healthy" },
			migrate: { condition: "service_completed_successfully" },
		});
		for (const name of ["pricing", "riders", "orders", "dispatch", "notifications", "fleet", "migrate"])
			expect([name, services[name].environment.REDIS_URL]).toEqual([name, undefined]);
		expect(readFileSync(join(ROOT, ".env.example"), "utf8")).toMatch(/^REDIS_PASSWORD=change-me/m);
	});

	test.each([
		["k8s/infra/redis.yaml", () => k8sRedis().spec.template.spec.containers[0].command as string[]],
		// Compose writes a literal $ as $$.
		["docker-compose.yml", () => (compose().services.redis.command as string[]).map((a) => a.replace(/\$\$/g, "$"))],
	])(
		"the Redis command of %s runs: it refuses a client without the password, admits the gateway's REDIS_URL form, saves nothing, and keeps the password out of its arguments",
		async (_file, commandOf) => {
			const command = commandOf();
			expect(command.slice(0, 2)).toEqual(["sh", "-c"]);
			const password = `pw-${randomBytes(12).toString("hex")}`;
			const port = await freePort();
			const child = startShellCommand(command[2], `--port ${port} --bind 127.0.0.1`, { REDIS_PASSWORD: password });
			let output = "";
			child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
			child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
			const clients: Redis[] = [];
			const client = (url: string) => {
				const r = new Redis(url, { lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
				r.on("error", () => undefined);
				clients.push(r);
				return r;
			};
			try {
				await waitFor("redis-server listening", () => /Ready to accept connections/.test(output), 15_000, 50);
				const anonymous = client(`redis://127.0.0.1:${port}`);
				await expect(anonymous.ping()).rejects.toThrow(/NOAUTH/);
				await expect(anonymous.auth(`not-${password}`)).rejects.toThrow(/WRONGPASS/);
				const gateway = client(`redis://:${password}@127.0.0.1:${port}`);
				expect(await gateway.ping()).toBe("PONG");
				expect(await gateway.config("GET", "save")).toEqual(["save", ""]);
				expect(await gateway.config("GET", "appendonly")).toEqual(["appendonly", "no"]);
				// Keys without a TTL are kept; the limits' keys (with one) go first under memory pressure.
				expect(await gateway.config("GET", "maxmemory-policy")).toEqual(["maxmemory-policy", "volatile-ttl"]);
				const serverPid = Number((await gateway.info("server")).match(/process_id:(\d+)/)![1]);
				expect(readFileSync(`/proc/${serverPid}/cmdline`, "utf8")).not.toContain(password);
			} finally {
				for (const r of clients) r.disconnect();
				const exited = new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once("exit", r)));
				process.kill(-child.pid!, "SIGTERM");
				await exited;
			}
		},
	);
});

describe("docker-compose.yml", () => {
	test(`is valid (built-in check${hasDockerCompose ? " and docker-compose config -q" : "; docker-compose not installed"})`, async () => {
		const r = await runNode(["scripts/validate-compose.mjs", "docker-compose.yml"], COMPOSE_ENV);
		expect(r.out).toMatch(/valid/);
		expect(r.code).toBe(0);
		if (hasDockerCompose) expect(r.out).toMatch(/docker-compose config -q/);
	});

	test("wires every service as its own container over NATS and PostgreSQL, after the one-shot migration", () => {
		const compose = parse(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true });
		const services = compose.services;
		expect(services.nats.command).toContain("-js");
		expect(services.postgres.volumes[0]).toMatch(/^pg-data:/);
		expect(services.migrate.command).toEqual(["node", "dist/bin/migrate.js"]);
		const expected: Record<string, string> = {
			gateway: "gateway,partners",
			pricing: "pricing",
			riders: "riders",
			orders: "orders",
			dispatch: "dispatch",
			notifications: "notifications",
			fleet: "fleet",
		};
		for (const [name, servicesEnv] of Object.entries(expected)) {
			const s = services[name];
			expect(s.environment.SERVICES).toBe(servicesEnv);
			expect(s.environment.TRANSPORTER).toBe("nats://nats:4222");
			expect(s.environment.DATABASE_URL).toContain("${POSTGRES_PASSWORD:?");
			expect(s.depends_on.migrate.condition).toBe("service_completed_successfully");
			expect(s.healthcheck.test).toEqual(["CMD", "node", "dist/bin/healthcheck.js", "ready"]);
		}
		// A bus user per service: nats-server reads every password from its environment (the generated
		// k8s/infra/nats-compose.conf), each service logs in with its own.
		expect(services.nats.command.slice(0, 2)).toEqual(["-c", "/etc/nats/ride.conf"]);
		expect(services.nats.volumes).toContain("./k8s/infra/nats-compose.conf:/etc/nats/ride.conf:ro");
		for (const user of ["gateway", "pricing", "riders", "orders", "dispatch", "notifications", "fleet", "operator"])
			expect(services.nats.environment[`NATS_PASSWORD_${user.toUpperCase()}`]).toMatch(new RegExp(`^\\$\\{NATS_PASSWORD_${user.toUpperCase()}:\\?`));
		for (const name of Object.keys(expected)) {
			expect([name, services[name].environment.NATS_USER]).toEqual([name, name]);
			expect([name, services[name].environment.NATS_PASSWORD]).toEqual([
				name,
				`\${NATS_PASSWORD_${name.toUpperCase()}:?set NATS_PASSWORD_${name.toUpperCase()} in .env}`,
			]);
		}
		// The migrate container never uses the bus.
		expect(services.migrate.environment.NATS_USER).toBeUndefined();
		// No secret values in the file: the password comes from the environment or .env.
		expect(readFileSync(join(ROOT, "docker-compose.yml"), "utf8")).not.toMatch(/^\s*POSTGRES_PASSWORD:\s*[^$\s]/m);
	});

	test("live mode by default; the simulated fleet only in the `sandbox` profile", async () => {
		const compose = parse(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true });
		for (const name of ["gateway", "pricing", "riders", "orders", "dispatch", "notifications", "fleet"]) {
			expect([name, compose.services[name].environment.FLEET_MODE]).toEqual([name, "${FLEET_MODE:-live}"]);
			expect([name, compose.services[name].profiles]).toEqual([name, name === "fleet" ? ["sandbox"] : undefined]);
		}
		if (!hasDockerCompose) return;
		const env = { ...process.env, ...COMPOSE_ENV };
		const rendered = (extra: Record<string, string>) =>
			spawnSync("docker-compose", ["-f", join(ROOT, "docker-compose.yml"), "config"], { encoding: "utf8", env: { ...env, ...extra } });
		const live = rendered({});
		expect(live.status).toBe(0);
		expect(parse(live.stdout).services.dispatch.environment.FLEET_MODE).toBe("live");
		const sandbox = rendered({ FLEET_MODE: "simulated", COMPOSE_PROFILES: "sandbox" });
		expect(sandbox.status).toBe(0);
		expect(parse(sandbox.stdout).services.fleet.environment).toMatchObject({ FLEET_MODE: "simulated", SERVICES: "fleet" });
	});

	test("refuses to render without the required secret from the environment", async () => {
		const r = await runNode(["scripts/validate-compose.mjs", "docker-compose.yml", "--builtin-only"], { POSTGRES_PASSWORD: "" });
		expect(r.code).toBe(1);
		expect(r.out).toMatch(/required variable POSTGRES_PASSWORD is not set/);
		const noNats = await runNode(["scripts/validate-compose.mjs", "docker-compose.yml", "--builtin-only"], { ...COMPOSE_ENV, NATS_PASSWORD_ORDERS: "" });
		expect(noNats.code).toBe(1);
		expect(noNats.out).toMatch(/services\.nats\.environment\.NATS_PASSWORD_ORDERS: required variable NATS_PASSWORD_ORDERS is not set/);
	});

	test("the built-in check fails on a broken compose file", async () => {
		const file = join(tmp, "docker-compose.broken.yml");
		writeFileSync(
			file,
			readFileSync(join(ROOT, "docker-compose.yml"), "utf8")
				.replace("    interval: 10s", "    intervall: 10s")
				.replace("condition: service_completed_successfully", "condition: when_ready"),
		);
		const r = await runNode(["scripts/validate-compose.mjs", file, "--builtin-only"], COMPOSE_ENV);
		expect(r.code).toBe(1);
		expect(r.out).toMatch(/healthcheck: unknown key "intervall"/);
		expect(r.out).toMatch(/condition: "when_ready" is not one of/);
	});

	(hasDockerCompose ? test : test.skip)("docker-compose config -q fails on a broken compose file", async () => {
		const file = join(tmp, "docker-compose.broken2.yml");
		writeFileSync(
			file,
			readFileSync(join(ROOT, "docker-compose.yml"), "utf8").replace(
				"    volumes:\n      - nats-data:/data\n      - ./k8s/infra/nats-compose.conf:/etc/nats/ride.conf:ro",
				"    volumes: nats-data",
			),
		);
		const r = spawnSync("docker-compose", ["-f", file, "config", "-q"], { encoding: "utf8", env: { ...process.env, ...COMPOSE_ENV } });
		expect(r.status).not.toBe(0);
		expect(r.stderr + r.stdout).toMatch(/volumes/);
	});
});

/** The TypeScript the image compiles (tsconfig.build.json), tests aside. */
function imageSourceFiles(): string[] {
	const files: string[] = [];
	const walk = (dir: string) => {
		for (const entry of readdirSync(dir)) {
			const path = join(dir, entry);
			if (statSync(path).isDirectory()) walk(path);
			else if (entry.endsWith(".ts") && !entry.endsWith(".test.ts")) files.push(path);
		}
	};
	for (const dir of ["services", "contracts", "lib", "mixins", "middlewares", "runtime", "bin"]) if (existsSync(join(ROOT, dir))) walk(join(ROOT, dir));
	return files;
}

describe("Dockerfile", () => {
	const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");

	test("multi-stage on Node 24, production dependencies only, non-root, runs the compiled server", () => {
		const stages = [...dockerfile.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)].map((m) => m[2]);
		expect(stages).toEqual(["build", "deps", "runtime"]);
		expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24[-\w.]*$/m);
		expect(dockerfile).toMatch(/npm ci --omit=dev/);
		expect(dockerfile).toMatch(/^USER 1000:1000$/m);
		expect(dockerfile).toMatch(/^ENV NODE_ENV=production/m);
		expect(dockerfile).toMatch(/^CMD \["node", "dist\/bin\/server\.js"\]$/m);
	});

	test("the code the image runs imports production dependencies only (the image has no devDependencies)", () => {
		const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
		const files = [...imageSourceFiles(), join(ROOT, "moleculer.config.ts")];
		const imported = new Set<string>();
		for (const file of files) {
			const text = readFileSync(file, "utf8");
			for (const m of text.matchAll(/(?:^import[^"']*?from\s*|^export[^"']*?from\s*|require\(|import\()["']([^"'.][^"']*)["']/gm)) {
				const spec = m[1];
				if (spec.startsWith("node:") || builtinModules.includes(spec)) continue;
				imported.add(spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]);
			}
		}
		expect(imported.size).toBeGreaterThan(5);
		const notProduction = [...imported].filter((name) => !(name in pkg.dependencies));
		expect(notProduction).toEqual([]);
		// moleculer loads these by name at run time (REPL, NATS transporter, validator).
		for (const name of ["moleculer-repl", "nats", "fastest-validator"]) expect(pkg.dependencies).toHaveProperty(name);
		// No TypeScript runner or compiler in production: the image runs dist/.
		for (const name of ["tsx", "ts-node", "typescript"]) expect(pkg.dependencies).not.toHaveProperty(name);
	});

	test("PGlite is loaded only when the embedded database starts (no static import of it)", () => {
		for (const path of imageSourceFiles()) {
			expect([path, /^import\s+(?!type\b)[^"']*from\s*["']@electric-sql\//m.test(readFileSync(path, "utf8"))]).toEqual([path, false]);
		}
	});

	test("npm ci works from the committed lock: every optional dependency has an entry", async () => {
		const r = await runNode(["scripts/lock-placeholders.mjs", "--check"]);
		expect(r.out).toMatch(/every optional dependency has an entry/);
		expect(r.code).toBe(0);
	});

	test("every path it copies exists and every compiled entry point it or the manifests run has a source", () => {
		const copies = [...dockerfile.matchAll(/^COPY\s+(?!--from)(?:--chown=\S+\s+)?(.+)\s+\S+$/gm)].flatMap((m) => m[1].trim().split(/\s+/));
		expect(copies.length).toBeGreaterThan(5);
		for (const path of copies) expect([path, existsSync(join(ROOT, path))]).toEqual([path, true]);
		const ignored = readFileSync(join(ROOT, ".dockerignore"), "utf8")
			.split("\n")
			.map((l) => l.trim());
		for (const path of copies) expect(ignored).not.toContain(path);

		const everything = [dockerfile, readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), readFileSync(join(ROOT, "k8s/migrate-job.yaml"), "utf8")].join(
			"\n",
		);
		const entryPoints = new Set([...everything.matchAll(/dist\/(bin\/[\w-]+)\.js/g)].map((m) => m[1]));
		expect([...entryPoints]).toEqual(expect.arrayContaining(["bin/healthcheck", "bin/migrate", "bin/server"]));
		for (const entry of entryPoints) expect([entry, existsSync(join(ROOT, `${entry}.ts`))]).toEqual([entry, true]);
	});
});
