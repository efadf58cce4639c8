import type { Migration } from "../../../mixins/db.mixin";

/**
 * Scheduled rides (services/orders/schedule.ts): a ride booked with a pickup
 * time waits as `scheduled` until `dispatch_at` (the pickup time less the
 * dispatch lead). The schedule is these rows, not a timer: each orders
 * instance reads the next due one through `orders_scheduled_due`, which
 * holds only waiting rides, so that read costs the same whatever the
 * backlog. A rider may hold one waiting scheduled ride per mode besides its
 * one active ride (`orders_one_active_per_rider`): the database judges both.
 */
export const scheduledRidesMigration: Migration = {
	name: "007-scheduled-rides",
	async up(_qi, sequelize) {
		await sequelize.transaction(async (transaction) => {
			const run = (sql: string) => sequelize.query(sql, { transaction });
			await run("ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_status_check");
			await run(`ALTER TABLE orders ADD CONSTRAINT orders_status_check
				CHECK (status IN ('scheduled','searching','accepted','arrived','started','dropped','customer_cancelled','no_driver_found'))`);
			await run("ALTER TABLE orders ADD COLUMN pickup_at timestamptz");
			await run("ALTER TABLE orders ADD COLUMN dispatch_at timestamptz");
			await run(
				"ALTER TABLE orders ADD CONSTRAINT orders_scheduled_has_times CHECK (status <> 'scheduled' OR (pickup_at IS NOT NULL AND dispatch_at IS NOT NULL))",
			);
			await run("CREATE INDEX orders_scheduled_due ON orders (dispatch_at) WHERE status = 'scheduled'");
			await run("CREATE UNIQUE INDEX orders_one_scheduled_per_rider ON orders (rider_id, mode) WHERE status = 'scheduled'");
		});
	},
	async down(_qi, sequelize) {
		await sequelize.transaction(async (transaction) => {
			const run = (sql: string) => sequelize.query(sql, { transaction });
			await run("DROP INDEX IF EXISTS orders_one_scheduled_per_rider");
			await run("DROP INDEX IF EXISTS orders_scheduled_due");
			await run("ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_scheduled_has_times");
			await run("UPDATE orders SET status = 'customer_cancelled' WHERE status = 'scheduled'");
			await run("ALTER TABLE orders DROP COLUMN IF EXISTS dispatch_at");
			await run("ALTER TABLE orders DROP COLUMN IF EXISTS pickup_at");
			await run("ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_status_check");
			await run(`ALTER TABLE orders ADD CONSTRAINT orders_status_check
				CHECK (status IN ('searching','accepted','arrived','started','dropped','customer_cancelled','no_driver_found'))`);
		});
	},
};
