/**
 * Kubernetes NetworkPolicy semantics as a function: given the policies, the
 * namespaces and two endpoints, is a connection on a port allowed? Used by
 * scripts/validate-manifests.mjs (Node runs this file with its types
 * stripped: erasable syntax only) and by the manifests test, over the
 * platform's pods with the flows it needs and the ones it must never have.
 *
 * The rules (networking.k8s.io/v1): a pod selected by no policy of a type is
 * open in that direction; once selected, only what some selecting policy's
 * rules allow gets through, and a connection needs both the sender's egress
 * and the receiver's ingress. A peer is a podSelector and/or
 * namespaceSelector (podSelector alone: the policy's namespace) or an
 * ipBlock, which is matched against pod addresses too (the conservative
 * reading: some CNIs apply ipBlocks to pod traffic).
 */
import ipaddr from "ipaddr.js";

export type Labels = Record<string, string>;

export interface LabelSelector {
	matchLabels?: Labels;
	matchExpressions?: Array<{ key: string; operator: "In" | "NotIn" | "Exists" | "DoesNotExist"; values?: string[] }>;
}

interface PolicyPort {
	protocol?: string;
	port?: number | string;
	endPort?: number;
}

interface PolicyPeer {
	podSelector?: LabelSelector;
	namespaceSelector?: LabelSelector;
	ipBlock?: { cidr: string; except?: string[] };
}

export interface NetworkPolicy {
	metadata: { name: string; namespace?: string };
	spec: {
		podSelector: LabelSelector;
		policyTypes?: string[];
		ingress?: Array<{ from?: PolicyPeer[]; ports?: PolicyPort[] }>;
		egress?: Array<{ to?: PolicyPeer[]; ports?: PolicyPort[] }>;
	};
}

/** A pod: where it runs, its labels, its address and its named ports. */
export interface Pod {
	name: string;
	namespace: string;
	labels: Labels;
	ip: string;
	ports?: Array<{ name?: string; containerPort: number; protocol?: string }>;
}

/** A pod, or an address outside the cluster's pods. */
export type Endpoint = Pod | { name: string; ip: string };

const isPod = (e: Endpoint): e is Pod => "namespace" in e;

/** Whether a label selector selects these labels (an empty selector selects everything). */
export function selects(selector: LabelSelector | undefined, labels: Labels): boolean {
	if (!selector) return true;
	for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
	for (const e of selector.matchExpressions ?? []) {
		const has = Object.prototype.hasOwnProperty.call(labels, e.key);
		const inValues = has && (e.values ?? []).includes(labels[e.key]);
		if (e.operator === "In" && !inValues) return false;
		if (e.operator === "NotIn" && inValues) return false;
		if (e.operator === "Exists" && !has) return false;
		if (e.operator === "DoesNotExist" && has) return false;
	}
	return true;
}

function inCidr(ip: string, cidr: string): boolean {
	const addr = ipaddr.process(ip);
	const [range, bits] = ipaddr.parseCIDR(cidr);
	const base = range.kind() === "ipv6" && (range as ipaddr.IPv6).isIPv4MappedAddress() ? (range as ipaddr.IPv6).toIPv4Address() : range;
	if (addr.kind() !== base.kind()) return false;
	return addr.match(base, base.kind() === range.kind() ? bits : bits - 96);
}

function peerMatches(peer: PolicyPeer, policyNamespace: string, other: Endpoint, namespaces: Record<string, Labels>): boolean {
	if (peer.ipBlock) return inCidr(other.ip, peer.ipBlock.cidr) && !(peer.ipBlock.except ?? []).some((c) => inCidr(other.ip, c));
	if (!isPod(other)) return false;
	const namespaceOk = peer.namespaceSelector ? selects(peer.namespaceSelector, namespaces[other.namespace] ?? {}) : other.namespace === policyNamespace;
	return namespaceOk && selects(peer.podSelector, other.labels);
}

function portMatches(ports: PolicyPort[] | undefined, port: number, protocol: string, receiver: Endpoint): boolean {
	if (!ports || ports.length === 0) return true;
	return ports.some((p) => {
		if ((p.protocol ?? "TCP") !== protocol) return false;
		if (p.port === undefined) return true;
		if (typeof p.port === "string") {
			// A named port is the receiver's container port of that name.
			return isPod(receiver) && (receiver.ports ?? []).some((c) => c.name === p.port && c.containerPort === port && (c.protocol ?? "TCP") === protocol);
		}
		return p.endPort !== undefined ? port >= p.port && port <= p.endPort : port === p.port;
	});
}

const typesOf = (p: NetworkPolicy): string[] => p.spec.policyTypes ?? (p.spec.egress ? ["Ingress", "Egress"] : ["Ingress"]);
const namespaceOf = (p: NetworkPolicy, fallback: string): string => p.metadata.namespace ?? fallback;

/** Whether `from` may open a connection to `to` on `port`/`protocol` under `policies` (every namespace's). */
export function allowed(
	policies: NetworkPolicy[],
	namespaces: Record<string, Labels>,
	from: Endpoint,
	to: Endpoint,
	port: number,
	protocol = "TCP",
	/** The namespace of policies without one (the manifests' kustomize namespace). */
	defaultNamespace = "ride",
): boolean {
	if (isPod(from)) {
		const egress = policies.filter(
			(p) => namespaceOf(p, defaultNamespace) === from.namespace && typesOf(p).includes("Egress") && selects(p.spec.podSelector, from.labels),
		);
		const out =
			egress.length === 0 ||
			egress.some((p) =>
				(p.spec.egress ?? []).some(
					(rule) =>
						(!rule.to || rule.to.length === 0 || rule.to.some((peer) => peerMatches(peer, namespaceOf(p, defaultNamespace), to, namespaces))) &&
						portMatches(rule.ports, port, protocol, to),
				),
			);
		if (!out) return false;
	}
	if (isPod(to)) {
		const ingress = policies.filter(
			(p) => namespaceOf(p, defaultNamespace) === to.namespace && typesOf(p).includes("Ingress") && selects(p.spec.podSelector, to.labels),
		);
		return (
			ingress.length === 0 ||
			ingress.some((p) =>
				(p.spec.ingress ?? []).some(
					(rule) =>
						(!rule.from ||
							rule.from.length === 0 ||
							rule.from.some((peer) => peerMatches(peer, namespaceOf(p, defaultNamespace), from, namespaces))) &&
						portMatches(rule.ports, port, protocol, to),
				),
			)
		);
	}
	return true;
}

export interface Flow {
	from: string;
	to: string;
	port: number;
	protocol?: "TCP" | "UDP";
	why: string;
}

const APP = ["ride-gateway", "ride-pricing", "ride-riders", "ride-orders", "ride-dispatch", "ride-notifications", "ride-fleet"];
const WITH_TABLES = ["ride-gateway", "ride-pricing", "ride-riders", "ride-orders", "ride-dispatch", "ride-notifications"];

/**
 * The namespaces and pods around the platform's own: cluster DNS, the
 * ingress controller, Prometheus, an unlabelled pod in the namespace and a
 * pod elsewhere (what an attacker who can start a pod would have).
 */
export const NAMESPACES: Record<string, Labels> = Object.fromEntries(
	["ride", "kube-system", "ingress-nginx", "monitoring", "other"].map((n) => [n, { "kubernetes.io/metadata.name": n }]),
);
export const NEIGHBOURS: Pod[] = [
	{ name: "kube-dns", namespace: "kube-system", labels: { "k8s-app": "kube-dns" }, ip: "10.244.9.10" },
	{ name: "ingress-nginx", namespace: "ingress-nginx", labels: { "app.kubernetes.io/name": "ingress-nginx" }, ip: "10.244.9.20" },
	{ name: "prometheus", namespace: "monitoring", labels: { "app.kubernetes.io/name": "prometheus" }, ip: "10.244.9.30" },
	{ name: "stranger", namespace: "ride", labels: {}, ip: "10.244.9.40" },
	{ name: "other-namespace", namespace: "other", labels: { "app.kubernetes.io/name": "ride-orders" }, ip: "10.244.9.50" },
];

/** What the platform needs to work (closed = broken platform). */
export const REQUIRED_FLOWS: Flow[] = [
	...APP.map((from) => ({ from, to: "nats", port: 4222, why: "every service talks over the bus" })),
	...[...WITH_TABLES, "ride-migrate"].map((from) => ({ from, to: "postgres", port: 5432, why: "its own tables (the migrate Job: every migration)" })),
	{ from: "ride-gateway", to: "redis", port: 6379, why: "the gateways' shared limits" },
	{ from: "ingress-nginx", to: "ride-gateway", port: 3000, why: "the public API" },
	...[...APP, "ride-migrate"].flatMap((from) => [
		{ from, to: "kube-dns", port: 53, protocol: "UDP" as const, why: "name lookups" },
		{ from, to: "kube-dns", port: 53, protocol: "TCP" as const, why: "name lookups" },
	]),
	{ from: "ride-notifications", to: "93.184.216.34", port: 443, why: "partners' webhook endpoints" },
	{ from: "ride-notifications", to: "2606:2800:220:1:248:1893:25c8:1946", port: 443, why: "partners' webhook endpoints over IPv6" },
	{ from: "ride-notifications", to: "93.184.216.34", port: 8443, why: "webhook ports (WEBHOOK_PORTS)" },
	{ from: "prometheus", to: "ride-orders", port: 3030, why: "metrics scraping" },
];

/** What must never be possible (open = a hole). */
export const FORBIDDEN_FLOWS: Flow[] = [
	...[...APP, "ride-migrate"].map((from) => ({ from, to: "nats", port: 8222, why: "NATS monitoring is not for application pods" })),
	{ from: "ride-migrate", to: "nats", port: 4222, why: "the migrate Job never uses the bus" },
	{ from: "ride-fleet", to: "postgres", port: 5432, why: "the fleet goes through dispatch, never the database" },
	{ from: "ride-notifications", to: "redis", port: 6379, why: "only the gateway uses Redis" },
	{ from: "ride-pricing", to: "redis", port: 6379, why: "only the gateway uses Redis" },
	{ from: "ride-orders", to: "redis", port: 6379, why: "only the gateway uses Redis" },
	...["10.1.2.3", "10.96.0.1", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "127.0.0.1", "fd00::1", "fe80::1"].map((to) => ({
		from: "ride-notifications",
		to,
		port: to === "169.254.169.254" ? 80 : 443,
		why: "webhooks go to the internet only, never to cluster, private, link-local (cloud metadata) or loopback addresses",
	})),
	{ from: "ride-notifications", to: "93.184.216.34", port: 22, why: "webhooks only on the webhook ports" },
	{ from: "ride-notifications", to: "postgres", port: 443, why: "the internet rule does not reach pods" },
	{ from: "ride-orders", to: "93.184.216.34", port: 443, why: "only notifications goes out to the internet" },
	{ from: "ride-gateway", to: "10.96.0.1", port: 443, why: "no Kubernetes API access" },
	{ from: "ride-pricing", to: "ride-orders", port: 3030, why: "services talk over the bus, not to each other" },
	{ from: "ingress-nginx", to: "ride-gateway", port: 3030, why: "the ingress reaches the API port only" },
	{ from: "ingress-nginx", to: "nats", port: 4222, why: "the bus is not public" },
	{ from: "stranger", to: "postgres", port: 5432, why: "an unlabelled pod in the namespace reaches nothing" },
	{ from: "stranger", to: "nats", port: 4222, why: "an unlabelled pod in the namespace reaches nothing" },
	{ from: "stranger", to: "redis", port: 6379, why: "an unlabelled pod in the namespace reaches nothing" },
	{ from: "stranger", to: "ride-gateway", port: 3000, why: "an unlabelled pod in the namespace reaches nothing" },
	{ from: "other-namespace", to: "postgres", port: 5432, why: "another namespace's pods, whatever their labels" },
	{ from: "other-namespace", to: "nats", port: 4222, why: "another namespace's pods, whatever their labels" },
	{ from: "nats", to: "93.184.216.34", port: 443, why: "the servers make no outbound connections" },
	{ from: "postgres", to: "93.184.216.34", port: 443, why: "the servers make no outbound connections" },
];

/**
 * The flows `policies` get wrong over `pods` (the platform's, from the
 * manifests) and the neighbours: needed ones closed, forbidden ones open,
 * and flows naming a pod that is not there. Empty when all is right.
 */
export function flowProblems(policies: NetworkPolicy[], pods: Pod[], required = REQUIRED_FLOWS, forbidden = FORBIDDEN_FLOWS): string[] {
	const everyPod = [...pods, ...NEIGHBOURS];
	const endpoint = (name: string): Endpoint | undefined => (ipaddr.isValid(name) ? { name, ip: name } : everyPod.find((p) => p.name === name));
	const problems: string[] = [];
	const check = (f: Flow, want: boolean) => {
		const from = endpoint(f.from);
		const to = endpoint(f.to);
		if (!from || !to) {
			// The sandbox fleet is a component: absent from the default set, checked when it is there.
			if (f.from !== "ride-fleet" && f.to !== "ride-fleet") problems.push(`flow ${f.from} → ${f.to}: no such pod`);
			return;
		}
		const protocol = f.protocol ?? "TCP";
		if (allowed(policies, NAMESPACES, from, to, f.port, protocol) !== want) {
			problems.push(`${want ? "needed flow is denied" : "forbidden flow is allowed"}: ${f.from} → ${f.to}:${f.port}/${protocol} (${f.why})`);
		}
	};
	for (const f of required) check(f, true);
	for (const f of forbidden) check(f, false);
	return problems;
}
