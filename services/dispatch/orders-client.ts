import type { Context, ServiceBroker } from "moleculer";
import type { InternalOrder, ListActiveParams, ListActiveStatesResult, OrderIdParams, RecordLocationParams, TransitionParams } from "../../contracts/orders";
import { errorType } from "./dispatch-rules";

/**
 * Dispatch's calls to orders, the owner of every ride's state machine. A
 * call made for a request passes that request's `ctx` (its trace and
 * timeouts); background work calls through the broker.
 */
export class OrdersClient {
	constructor(private readonly broker: ServiceBroker) {}

	/** The order, or null when orders does not know it. */
	async get(orderId: string, ctx?: Context): Promise<InternalOrder | null> {
		try {
			return await (ctx ?? this.broker).call<InternalOrder, OrderIdParams>("orders.get", { orderId });
		} catch (err) {
			if (errorType(err) === "ORDER_NOT_FOUND") return null;
			throw err;
		}
	}

	/** Moves the order (orders decides); undefined fields are left out so the strict schema accepts the call. */
	transition(params: TransitionParams, ctx?: Context): Promise<InternalOrder> {
		const clean = Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined)) as TransitionParams;
		return (ctx ?? this.broker).call<InternalOrder, TransitionParams>("orders.transition", clean);
	}

	listActiveStates(params: ListActiveParams): Promise<ListActiveStatesResult> {
		return this.broker.call<ListActiveStatesResult, ListActiveParams>("orders.listActiveStates", params);
	}

	async recordLocation(params: RecordLocationParams): Promise<void> {
		await this.broker.call<unknown, RecordLocationParams>("orders.recordLocation", params);
	}
}
