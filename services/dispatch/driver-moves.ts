import type { DriverJob, DriverView, OfflineReason, RegisterParams, ReportedLocation } from "../../contracts/dispatch";
import { ApiError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import type { AuditHook } from "../../lib/audit";
import { dropOf, pickupOf, rideJob, toDriverView } from "./dispatch-views";
import type { DispatchRepo } from "./dispatch.repo";
import type { DriverIndex } from "./driver-index";
import type { DriverPresence } from "./driver-presence";
import type { DriverRow } from "./drivers.repo";
import type { Matcher } from "./matching";

/**
 * Driver moves: what a driver (app, REPL or the simulated fleet) does to
 * itself — register, go online or offline, report its location, decline an
 * offer — and its job as an app shows it. What it does to a ride (accept,
 * arrive, start, drop, drop out) is ride-steps.ts.
 */

const driverNotFound = (): ApiError => new ApiError("DRIVER_NOT_FOUND", "Driver not found");
const conflict = (message: string): ApiError => new ApiError("CONFLICT", message);

export interface DriverMovesDeps {
	repo: Pick<DispatchRepo, "drivers" | "mirror" | "matching">;
	index: Pick<DriverIndex, "publish">;
	presence: Pick<DriverPresence, "driver" | "remember" | "report" | "withNewestPosition">;
	matcher: Pick<Matcher, "endOffer" | "kick">;
}

export class DriverMoves {
	constructor(private readonly deps: DriverMovesDeps) {}

	async loadDriver(driverId: string): Promise<DriverRow> {
		const row = await this.deps.repo.drivers.driver(driverId);
		if (!row) throw driverNotFound();
		return row;
	}

	/** Idempotent by phone: a known phone answers that driver unchanged. A driver is `live` unless registered as `test` (the simulated fleet, test driver apps). */
	/** `audit`: an operator's registration records the new driver in the audit trail (the simulated fleet's do not). */
	async register(p: RegisterParams, audit?: AuditHook<DriverRow>): Promise<DriverView> {
		const drivers = this.deps.repo.drivers;
		const inserted = await drivers.insertDriver(newId("drv"), { ...p, mode: p.mode ?? (p.simulated ? "test" : "live") }, audit);
		if (inserted) return toDriverView(inserted);
		const existing = await drivers.driverByPhone(p.phone);
		if (!existing) throw conflict("Driver registration raced; try again");
		return toDriverView(existing);
	}

	async goOnline(driverId: string, location: ReportedLocation): Promise<DriverView> {
		const row = await this.deps.repo.drivers.setDriverLocation(driverId, location, true);
		if (!row) throw driverNotFound();
		this.deps.presence.remember(row);
		this.deps.index.publish([row]);
		this.deps.matcher.kick();
		return toDriverView(row);
	}

	/** A pending offer is declined first; a driver on a ride must drop it (or drop out) first. */
	async goOffline(driverId: string, reason: OfflineReason = "driver"): Promise<DriverView> {
		for (let attempt = 0; attempt < 5; attempt++) {
			const driver = await this.loadDriver(driverId);
			if (driver.status === "on_trip") throw new ApiError("DRIVER_NOT_AVAILABLE", "The driver is on a ride: drop it or drop out first");
			if (driver.status === "offered" && driver.order_id) {
				await this.deps.matcher.endOffer(driverId, driver.order_id, "declined");
				continue;
			}
			const row = await this.deps.repo.drivers.setDriverOffline(driverId, reason);
			if (row) {
				this.deps.presence.remember(row);
				this.deps.index.publish([row]);
				return toDriverView(row);
			}
		}
		throw conflict("The driver's state keeps changing; try again");
	}

	/** The driver's newest position: in memory at once, in PostgreSQL at the next flush (driver-presence.ts). */
	setLocation(driverId: string, location: ReportedLocation): Promise<DriverRow> {
		return this.deps.presence.report(driverId, location);
	}

	async decline(driverId: string, orderId: string): Promise<DriverView> {
		const declined = await this.deps.matcher.endOffer(driverId, orderId, "declined");
		if (!declined) {
			await this.loadDriver(driverId);
			throw conflict("No open offer for this driver and ride");
		}
		return toDriverView(await this.loadDriver(driverId));
	}

	/** A driver and its current job (pending offer or ride), as a driver app shows it. */
	/**
	 * From what this instance knows of the driver (the driver API's waits:
	 * the database is read only for an open offer or a ride), or `fresh` from
	 * PostgreSQL (operators).
	 */
	async driverJob(driverId: string, opts: { fresh?: boolean } = {}): Promise<DriverJob> {
		const presence = this.deps.presence;
		const driver = opts.fresh ? presence.withNewestPosition(await this.loadDriver(driverId)) : await presence.driver(driverId);
		const job: DriverJob = { driver: toDriverView(driver), offer: null, ride: null };
		if (driver.status === "offered") {
			const r = await this.deps.repo.matching.openOfferOf(driver.id);
			if (r)
				job.offer = {
					orderId: r.order_id,
					expiresAt: new Date(r.expires_at).toISOString(),
					pickup: pickupOf(r),
					drop: dropOf(r),
					distanceM: r.distance_m,
					eta: r.eta,
				};
		} else if (driver.status === "on_trip" && driver.order_id) {
			const r = await this.deps.repo.mirror.ride(driver.order_id);
			if (r) job.ride = rideJob(r);
		}
		return job;
	}
}
