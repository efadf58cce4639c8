import { DRIVER_TOKEN_EVENTS } from "./driver";
import { DISPATCH_EVENTS } from "./dispatch";
import { DRIVER_ROUTES, RIDE_ROUTES } from "./gateway";
import { ORDER_EVENTS } from "./orders";
import { PARTNER_EVENTS } from "./partners";

/**
 * The bus contract: who may say what on NATS. One entry per NATS user, that
 * is per deployable unit (a Deployment, a Compose service): the Moleculer
 * services its nodes run, the actions its code calls on other nodes, the
 * events it emits and the ones it handles.
 *
 * lib/bus-permissions.ts turns this table into each user's NATS publish and
 * subscribe permissions, and `npm run nats-conf` writes them into
 * k8s/infra/nats-server.conf. The transporter (lib/coalescing-nats-transporter.ts)
 * puts the action in every request's subject and the event in every event's
 * subject, so a permission names one action or one event. A call missing
 * here fails at once with BUS_PERMISSION_DENIED on a node logged in as that
 * user; test/unit/platform/bus-contract.test.ts fails when a service's code
 * names an action or event of another service that its row does not list.
 *
 * The migrate Job has no row: it only talks to PostgreSQL, never to NATS.
 */
export interface BusUser {
	/** Moleculer services this user's nodes run: the only nodes that receive their actions' requests. */
	services: readonly string[];
	/** Actions this user's code calls (`service.action`); each goes only to the nodes of the user that runs its service. */
	calls: readonly string[];
	/** Events it emits or broadcasts. */
	emits: readonly string[];
	/** Events it handles (emitters address them to its nodes; listed for the code check and the docs). */
	receives: readonly string[];
}

/**
 * Moleculer `$` events that cross the bus: the Event trace exporter's spans
 * (TRACING_EXPORTER=Event) to a collector service. Every other `$` event
 * (`$node.*`, `$transporter.*`, …) stays in its process.
 */
export const TRACING_SPANS_EVENT = "$tracing.spans";
export const BUS_CROSSING_INTERNAL_EVENTS: readonly string[] = [TRACING_SPANS_EVENT];

/** What the gateway pod's code calls: every public route's action, driver auth, and the readiness checks. */
const GATEWAY_CALLS = [
	...new Set([
		...RIDE_ROUTES.map((r) => r.action),
		...DRIVER_ROUTES.map((r) => r.action),
		"dispatch.authenticateDriver",
		"partners.authenticate",
		"partners.dbHealth",
		"pricing.dbHealth",
		"riders.dbHealth",
		"orders.dbHealth",
	]),
];

export const BUS_USERS = {
	/** The public API and the partners service (API keys, webhook secrets) in one pod. */
	gateway: {
		services: ["gateway", "partners"],
		calls: GATEWAY_CALLS,
		emits: [PARTNER_EVENTS.changed, TRACING_SPANS_EVENT],
		receives: [PARTNER_EVENTS.changed],
	},
	pricing: {
		services: ["pricing"],
		calls: ["dispatch.supplyDemand"],
		emits: [TRACING_SPANS_EVENT],
		receives: [],
	},
	riders: {
		services: ["riders"],
		calls: [],
		emits: [TRACING_SPANS_EVENT],
		receives: [],
	},
	orders: {
		services: ["orders"],
		// notifications.undeliveredOrders: the retention pass keeps a finished ride whose webhooks are still owed.
		// fleet.sandboxStep: a sandbox advance has the simulated fleet take each step as the driver.
		calls: [
			"pricing.quote",
			"pricing.verifyQuote",
			"riders.upsert",
			"notifications.deliveryStates",
			"notifications.undeliveredOrders",
			"fleet.sandboxStep",
		],
		// orders.scheduleChanged: broadcast to every orders instance so each re-arms its schedule timer.
		emits: [ORDER_EVENTS.created, ORDER_EVENTS.statusChanged, ORDER_EVENTS.rideEventRecorded, ORDER_EVENTS.scheduleChanged, TRACING_SPANS_EVENT],
		receives: [ORDER_EVENTS.scheduleChanged],
	},
	dispatch: {
		services: ["dispatch"],
		calls: ["orders.get", "orders.transition", "orders.listActiveStates", "orders.recordLocation"],
		emits: [
			DISPATCH_EVENTS.driverChanged,
			DISPATCH_EVENTS.offerCreated,
			DISPATCH_EVENTS.driverPositions,
			DISPATCH_EVENTS.driverWaitStarted,
			DRIVER_TOKEN_EVENTS.changed,
			DRIVER_TOKEN_EVENTS.created,
			TRACING_SPANS_EVENT,
		],
		receives: [
			ORDER_EVENTS.created,
			ORDER_EVENTS.statusChanged,
			DISPATCH_EVENTS.driverChanged,
			DISPATCH_EVENTS.offerCreated,
			DISPATCH_EVENTS.driverPositions,
			DISPATCH_EVENTS.driverWaitStarted,
			DRIVER_TOKEN_EVENTS.changed,
			DRIVER_TOKEN_EVENTS.created,
		],
	},
	notifications: {
		services: ["notifications"],
		calls: ["partners.signingSecret"],
		emits: [TRACING_SPANS_EVENT],
		receives: [ORDER_EVENTS.rideEventRecorded, PARTNER_EVENTS.changed],
	},
	/** The simulated fleet (sandbox): a client of the driver actions, like a driver's app. */
	fleet: {
		services: ["fleet"],
		calls: [
			"dispatch.simulatedWork",
			"dispatch.register",
			"dispatch.driverGoOnline",
			"dispatch.driverReportLocations",
			"dispatch.driverAccept",
			"dispatch.driverArrived",
			"dispatch.driverStart",
			"dispatch.driverDrop",
			"dispatch.driverCancel",
			"orders.riderOtp",
			// Sandbox steps of manual rides: dispatch offers and ends them as matching does, and sends their location events.
			"dispatch.sandboxRide",
			"dispatch.sandboxOffer",
			"dispatch.sandboxLocation",
			"dispatch.sandboxNoDriver",
		],
		emits: [TRACING_SPANS_EVENT],
		receives: [DISPATCH_EVENTS.offerCreated, ORDER_EVENTS.created],
	},
} as const satisfies Record<string, BusUser>;

export type BusUserName = keyof typeof BUS_USERS;

/**
 * The operator: `npm run repl`, `npm run partner` and `npm run driver`
 * against the cluster. It may call any action of any node (the REPL is the
 * operations console: partners.createKey, dispatch.createDriverToken, …),
 * and emits nothing; it runs no services, so nothing is addressed to it but
 * answers and discovery.
 */
export const OPERATOR_USER = "operator";

/** Every NATS user the server knows: the services' and the operator's. */
export const ALL_BUS_USERS: readonly string[] = [...Object.keys(BUS_USERS), OPERATOR_USER];

/** The user whose nodes run a service (its actions' requests go only to them). */
export function hostUserOf(service: string): BusUserName | undefined {
	for (const [user, row] of Object.entries(BUS_USERS) as [BusUserName, BusUser][]) if (row.services.includes(service)) return user;
	return undefined;
}
