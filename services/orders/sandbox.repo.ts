import type { Db } from "../../mixins/db.mixin";

/** Milliseconds into an interval. */
const MS = "* interval '1 millisecond'";

/**
 * The SQL of sandbox advances (sandbox-advance.ts): the advance lease on an
 * order (`orders.sandbox_advance_until`, migration 006).
 */
export class SandboxRepo {
	constructor(private readonly db: Db) {}

	/**
	 * Takes the ride's advance lease for `ms`, unless another advance holds
	 * it: one conditional update, so of two racing advances (any instances)
	 * exactly one gets it. True when this call took it.
	 */
	async takeLease(orderId: string, ms: number): Promise<boolean> {
		const row = await this.db.row(
			`UPDATE orders SET sandbox_advance_until = now() + $2 ${MS}
			 WHERE id = $1 AND (sandbox_advance_until IS NULL OR sandbox_advance_until <= now()) RETURNING id`,
			[orderId, ms],
		);
		return row !== undefined;
	}

	async releaseLease(orderId: string): Promise<void> {
		await this.db.run("UPDATE orders SET sandbox_advance_until = NULL WHERE id = $1", [orderId]);
	}
}
