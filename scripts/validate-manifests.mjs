#!/usr/bin/env node
// Validates the Kubernetes manifests offline:
//
//   node scripts/validate-manifests.mjs [dir=k8s]
//
// 1. Every document of every *.yaml under `dir` against the Kubernetes API
//    schema of its apiVersion/kind (kubernetes-models, and its prometheus-operator
//    models for k8s/monitoring's PrometheusRule; an unknown kind fails).
// 2. References that the schema cannot see: Service, PodDisruptionBudget and
//    Deployment selectors match pod labels; Services' target ports and probes'
//    ports exist on the containers; the Ingress backend exists (and the
//    pods behind it read the client from X-Forwarded-For: TRUST_PROXY >= 1); HPAs target an
//    existing Deployment; every ConfigMap/Secret a pod reads is defined;
//    kustomization resources exist.
// 3. This project's production rules: every platform Deployment sets SERVICES,
//    requests and limits, liveness and readiness probes, a preStop hook and a
//    termination grace period, runs as non-root; Secrets hold placeholders only
//    (REPLACE_ME), never real values. With a kustomization.yaml in `dir`, the
//    whole set must be there (a Deployment per service, HPAs for gateway,
//    pricing, dispatch and notifications, a PDB per Deployment, gateway
//    Service and Ingress, the migration Job, NATS, PostgreSQL and Redis).
// 4. The cluster boundary, for every pod (Deployments, StatefulSets, Jobs,
//    infra and the sandbox fleet alike): no service account token
//    (automountServiceAccountToken: false) and a securityContext on every
//    container (non-root, read-only root filesystem, no privilege
//    escalation, ALL capabilities dropped, seccomp RuntimeDefault). With a
//    kustomization.yaml: a default-deny NetworkPolicy (ingress and egress),
//    and the NetworkPolicies evaluated over the pods (scripts/network-policies.mts):
//    every flow the platform needs is allowed, every forbidden one denied.
//
// Exits 0 when valid; prints every problem and exits 1 otherwise.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { flowProblems } from "./network-policies.mts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const dir = resolve(process.argv[2] ?? join(root, "k8s"));
const NAMESPACE = "ride";
const PLATFORM_SERVICES = ["gateway", "pricing", "riders", "orders", "dispatch", "notifications", "fleet"];
const NEED_HPA = ["gateway", "pricing", "dispatch", "notifications"];

const problems = [];
const problem = (where, message) => problems.push(`${where}: ${message}`);

function yamlFiles(d) {
	const out = [];
	for (const entry of readdirSync(d).sort()) {
		const p = join(d, entry);
		if (statSync(p).isDirectory()) out.push(...yamlFiles(p));
		else if (/\.ya?ml$/.test(entry)) out.push(p);
	}
	return out;
}

/** kubernetes-models module of an apiVersion/kind, e.g. apps/v1 Deployment → kubernetes-models/apps/v1/Deployment. */
async function modelFor(apiVersion, kind) {
	if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9.]+(\/[a-z0-9]+)?$/.test(apiVersion) || !/^[A-Z][A-Za-z]+$/.test(kind))
		return null;
	try {
		// The core group ("v1") and named groups ("apps/v1") map the same way; the Prometheus Operator's
		// kinds (k8s/monitoring: PrometheusRule) come from its kubernetes-models package.
		const pkg = apiVersion.startsWith("monitoring.coreos.com/") ? "@kubernetes-models/prometheus-operator" : "kubernetes-models";
		const mod = await import(`${pkg}/${apiVersion}/${kind}`);
		return mod[kind] ?? null;
	} catch {
		return null;
	}
}

const resources = []; // { file, doc }
let kustomization = null;
const components = []; // kustomize Components (e.g. sandbox/): their resources must exist too

if (!existsSync(dir)) {
	console.error(`${dir} does not exist`);
	process.exit(1);
}

for (const file of yamlFiles(dir)) {
	const rel = relative(dir, file);
	let docs;
	try {
		docs = parseAllDocuments(readFileSync(file, "utf8"));
	} catch (err) {
		problem(rel, `not valid YAML: ${err.message}`);
		continue;
	}
	docs.forEach((d, i) => {
		if (d.errors.length > 0) return problem(`${rel}#${i}`, `not valid YAML: ${d.errors[0].message}`);
		const doc = d.toJS();
		if (doc === null || doc === undefined) return; // empty document (comments only)
		if (doc.kind === "Kustomization") kustomization = { file: rel, doc };
		else if (doc.kind === "Component" && String(doc.apiVersion).startsWith("kustomize.config.k8s.io/")) components.push({ file: rel, doc });
		else resources.push({ file: rel, index: i, doc });
	});
}

// 1. Schema
for (const r of resources) {
	const { doc } = r;
	const where = `${r.file} ${doc?.kind ?? "?"}/${doc?.metadata?.name ?? "?"}`;
	r.where = where;
	const Model = await modelFor(doc?.apiVersion, doc?.kind);
	if (!Model) {
		problem(where, `unknown apiVersion/kind "${doc?.apiVersion}" "${doc?.kind}"`);
		continue;
	}
	try {
		new Model(doc).validate();
	} catch (err) {
		problem(where, `schema: ${err.message}`);
	}
	if (!doc.metadata?.name) problem(where, "metadata.name is required");
	if (doc.kind !== "Namespace" && doc.metadata?.namespace !== NAMESPACE) problem(where, `metadata.namespace must be "${NAMESPACE}"`);
}

const byKind = (kind) => resources.filter((r) => r.doc?.kind === kind);
const named = (kind, name) => byKind(kind).find((r) => r.doc.metadata?.name === name);
const workloads = () => [...byKind("Deployment"), ...byKind("StatefulSet")];
const podLabels = (r) => r.doc.spec?.template?.metadata?.labels ?? {};
const matches = (selector, labels) => selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);
const containersOf = (r) => [...(r.doc.spec?.template?.spec?.containers ?? []), ...(r.doc.spec?.template?.spec?.initContainers ?? [])];
const hasPort = (containers, port) =>
	typeof port === "number"
		? containers.some((c) => (c.ports ?? []).some((p) => p.containerPort === port))
		: containers.some((c) => (c.ports ?? []).some((p) => p.name === port));

// 2. References
for (const w of [...workloads(), ...byKind("Job")]) {
	const sel = w.doc.spec?.selector?.matchLabels;
	if (w.doc.kind !== "Job" && !matches(sel, podLabels(w))) problem(w.where, "spec.selector.matchLabels does not match the pod template's labels");
	const containers = containersOf(w);
	for (const c of containers) {
		for (const ref of c.envFrom ?? []) {
			if (ref.configMapRef && !named("ConfigMap", ref.configMapRef.name))
				problem(w.where, `reads ConfigMap "${ref.configMapRef.name}", which is not defined`);
			if (ref.secretRef && !named("Secret", ref.secretRef.name))
				problem(w.where, `reads Secret "${ref.secretRef.name}", which is not defined (see secret.example.yaml)`);
		}
		for (const e of c.env ?? []) {
			const s = e.valueFrom?.secretKeyRef;
			const m = e.valueFrom?.configMapKeyRef;
			if (s && !named("Secret", s.name)) problem(w.where, `env ${e.name} reads Secret "${s.name}", which is not defined`);
			if (m && !named("ConfigMap", m.name)) problem(w.where, `env ${e.name} reads ConfigMap "${m.name}", which is not defined`);
		}
		for (const probeName of ["livenessProbe", "readinessProbe", "startupProbe"]) {
			const port = c[probeName]?.httpGet?.port ?? c[probeName]?.tcpSocket?.port;
			if (port !== undefined && !hasPort([c], port)) problem(w.where, `${c.name}.${probeName} uses port "${port}", which the container does not declare`);
		}
	}
}

for (const s of byKind("Service")) {
	const selector = s.doc.spec?.selector;
	const targets = workloads().filter((w) => matches(selector, podLabels(w)));
	if (targets.length === 0) problem(s.where, "selects no Deployment or StatefulSet pods");
	for (const p of s.doc.spec?.ports ?? []) {
		const tp = p.targetPort ?? p.port;
		for (const t of targets) if (!hasPort(containersOf(t), tp)) problem(s.where, `targetPort "${tp}" is not a port of ${t.doc.metadata.name}`);
	}
}

for (const ing of byKind("Ingress")) {
	for (const rule of ing.doc.spec?.rules ?? []) {
		for (const path of rule.http?.paths ?? []) {
			const backend = path.backend?.service;
			const svc = backend && named("Service", backend.name);
			if (!svc) {
				problem(ing.where, `backend service "${backend?.name}" is not defined`);
				continue;
			}
			const port = backend.port?.name ?? backend.port?.number;
			if (!(svc.doc.spec?.ports ?? []).some((p) => p.name === port || p.port === port))
				problem(ing.where, `backend port "${port}" is not a port of Service ${backend.name}`);
		}
	}
}

// An Ingress in front of the gateway: the gateway must count the client from
// X-Forwarded-For (TRUST_PROXY >= 1), or every caller has the ingress pod's
// address and one client's failed logins throttle everyone's.
const envOf = (c, name) => {
	const direct = (c.env ?? []).find((e) => e.name === name);
	if (direct) return direct.value;
	for (const from of c.envFrom ?? []) {
		const cm = from.configMapRef && named("ConfigMap", from.configMapRef.name);
		if (cm?.doc.data?.[name] !== undefined) return cm.doc.data[name];
	}
	return undefined;
};
for (const ing of byKind("Ingress")) {
	const backends = (ing.doc.spec?.rules ?? []).flatMap((rule) => (rule.http?.paths ?? []).map((p) => p.backend?.service?.name));
	for (const svc of backends.map((name) => name && named("Service", name)).filter(Boolean)) {
		for (const w of workloads().filter((w) => matches(svc.doc.spec?.selector, podLabels(w)))) {
			for (const c of containersOf(w)) {
				const hops = String(envOf(c, "TRUST_PROXY") ?? "")
					.trim()
					.toLowerCase();
				if (["", "0", "false", "no", "off"].includes(hops))
					problem(
						`${w.where} container ${c.name}`,
						`is behind Ingress/${ing.doc.metadata?.name} but TRUST_PROXY is ${hops || "unset"}: every client would have the ingress pod's address (set TRUST_PROXY=1)`,
					);
			}
		}
	}
}

for (const h of byKind("HorizontalPodAutoscaler")) {
	const ref = h.doc.spec?.scaleTargetRef;
	if (!ref || !resources.some((r) => r.doc.kind === ref.kind && r.doc.metadata?.name === ref.name))
		problem(h.where, `scaleTargetRef ${ref?.kind}/${ref?.name} is not defined`);
	if ((h.doc.spec?.minReplicas ?? 1) > h.doc.spec?.maxReplicas) problem(h.where, "minReplicas is above maxReplicas");
}

for (const p of byKind("PodDisruptionBudget")) {
	if (!workloads().some((w) => matches(p.doc.spec?.selector?.matchLabels, podLabels(w)))) problem(p.where, "selects no Deployment or StatefulSet pods");
}

for (const s of byKind("Secret")) {
	const values = {
		...(s.doc.stringData ?? {}),
		...Object.fromEntries(Object.entries(s.doc.data ?? {}).map(([k, v]) => [k, Buffer.from(String(v), "base64").toString()])),
	};
	for (const [k, v] of Object.entries(values)) {
		if (!String(v).includes("REPLACE_ME")) problem(s.where, `${k} looks like a real value: committed Secrets hold REPLACE_ME placeholders only`);
	}
}

for (const k of [kustomization, ...components].filter(Boolean)) {
	for (const res of [...(k.doc.resources ?? []), ...(k.doc.components ?? [])]) {
		if (!existsSync(join(dir, dirname(k.file), res))) problem(k.file, `resource "${res}" does not exist`);
	}
}

// 3. Production rules for the platform's own Deployments
const platformDeployments = byKind("Deployment").filter((d) => d.doc.metadata?.labels?.["app.kubernetes.io/part-of"] === "ride-platform");
for (const d of platformDeployments) {
	const spec = d.doc.spec?.template?.spec ?? {};
	if (!(spec.terminationGracePeriodSeconds > 0)) problem(d.where, "needs terminationGracePeriodSeconds");
	const podNonRoot = spec.securityContext?.runAsNonRoot === true;
	for (const c of spec.containers ?? []) {
		const at = `${d.where} container ${c.name}`;
		if (!(c.env ?? []).some((e) => e.name === "SERVICES" && typeof e.value === "string" && e.value.length > 0)) problem(at, "needs a SERVICES env value");
		if (!c.resources?.requests?.cpu || !c.resources?.requests?.memory) problem(at, "needs resources.requests (cpu and memory)");
		if (!c.resources?.limits?.memory) problem(at, "needs resources.limits.memory");
		if (!c.livenessProbe) problem(at, "needs a livenessProbe");
		if (!c.readinessProbe) problem(at, "needs a readinessProbe");
		if (!c.lifecycle?.preStop) problem(at, "needs a preStop hook (graceful termination)");
		if (!podNonRoot && c.securityContext?.runAsNonRoot !== true) problem(at, "must run as non-root (runAsNonRoot)");
	}
	if (!byKind("PodDisruptionBudget").some((p) => matches(p.doc.spec?.selector?.matchLabels, podLabels(d)))) problem(d.where, "has no PodDisruptionBudget");
}

if (kustomization) {
	const servicesOf = (d) =>
		(d.doc.spec?.template?.spec?.containers ?? []).flatMap((c) =>
			(c.env ?? []).filter((e) => e.name === "SERVICES").flatMap((e) => String(e.value).split(",")),
		);
	for (const name of PLATFORM_SERVICES) {
		const dep = platformDeployments.find((d) =>
			servicesOf(d)
				.map((s) => s.trim())
				.includes(name),
		);
		if (!dep) {
			problem(dir, `no Deployment runs ${name} (SERVICES)`);
			continue;
		}
		if (NEED_HPA.includes(name) && !byKind("HorizontalPodAutoscaler").some((h) => h.doc.spec?.scaleTargetRef?.name === dep.doc.metadata.name)) {
			problem(dir, `${name} has no HorizontalPodAutoscaler`);
		}
	}
	if (!byKind("Namespace").some((n) => n.doc.metadata?.name === NAMESPACE)) problem(dir, `no Namespace "${NAMESPACE}"`);
	if (byKind("ConfigMap").length === 0) problem(dir, "no ConfigMap");
	if (byKind("Ingress").length === 0) problem(dir, "no Ingress for the gateway");
	if (!byKind("Job").some((j) => containersOf(j).some((c) => (c.command ?? []).join(" ").includes("migrate")))) problem(dir, "no migration Job");
	for (const infra of ["nats", "postgres", "redis"])
		if (!byKind("StatefulSet").some((s) => s.doc.metadata?.name === infra)) problem(dir, `no in-cluster ${infra} StatefulSet`);
}

// 4. The cluster boundary
const podWorkloads = [...workloads(), ...byKind("Job")];
for (const w of podWorkloads) {
	const spec = w.doc.spec?.template?.spec ?? {};
	if (spec.automountServiceAccountToken !== false) problem(w.where, "must not mount a service account token (automountServiceAccountToken: false)");
	const pod = spec.securityContext ?? {};
	for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
		const at = `${w.where} container ${c.name}`;
		const sc = c.securityContext ?? {};
		if ((sc.runAsNonRoot ?? pod.runAsNonRoot) !== true) problem(at, "securityContext: must set runAsNonRoot: true (pod or container)");
		if ((sc.runAsUser ?? pod.runAsUser) === 0) problem(at, "securityContext: runs as user 0");
		if (sc.allowPrivilegeEscalation !== false) problem(at, "securityContext: must set allowPrivilegeEscalation: false");
		if (sc.readOnlyRootFilesystem !== true) problem(at, "securityContext: must set readOnlyRootFilesystem: true (mount an emptyDir where it writes)");
		if (sc.privileged === true) problem(at, "securityContext: must not be privileged");
		if (!(sc.capabilities?.drop ?? []).includes("ALL")) problem(at, 'securityContext: must drop ALL capabilities (capabilities.drop: ["ALL"])');
		if ((sc.capabilities?.add ?? []).length > 0) problem(at, "securityContext: must add no capabilities");
		if ((sc.seccompProfile ?? pod.seccompProfile)?.type !== "RuntimeDefault")
			problem(at, "securityContext: seccompProfile must be RuntimeDefault (pod or container)");
	}
}

if (kustomization) {
	const policies = byKind("NetworkPolicy").map((r) => r.doc);
	const denyAll = policies.find((p) => {
		const sel = p.spec?.podSelector ?? {};
		const everyPod = Object.keys(sel.matchLabels ?? {}).length === 0 && (sel.matchExpressions ?? []).length === 0;
		const types = p.spec?.policyTypes ?? [];
		return everyPod && types.includes("Ingress") && types.includes("Egress") && (p.spec?.ingress ?? []).length === 0 && (p.spec?.egress ?? []).length === 0;
	});
	if (!denyAll) problem(dir, "no default-deny NetworkPolicy (podSelector {}, policyTypes Ingress and Egress, no rules)");
	let n = 0;
	const pods = podWorkloads.map((w) => ({
		name: podLabels(w)["app.kubernetes.io/name"] ?? w.doc.metadata?.name,
		namespace: w.doc.metadata?.namespace ?? NAMESPACE,
		labels: podLabels(w),
		ip: `10.244.0.${++n}`,
		ports: containersOf(w).flatMap((c) => c.ports ?? []),
	}));
	for (const p of flowProblems(policies, pods)) problem("network-policy", p);
}

if (problems.length > 0) {
	console.error(`${dir}: ${problems.length} problem(s)\n- ${problems.join("\n- ")}`);
	process.exit(1);
}
console.log(`${dir}: ${resources.length} manifest(s) valid`);
