import type { Context, Service } from "moleculer";
import type { Transaction } from "sequelize";
import type { ServiceType } from "../../contracts/common";
import type {
	DriverChangedEvent,
	DriverJob,
	DriverMode,
	DriverView,
	DropOutParams,
	NearbyDriver,
	NearestDriversParams,
	OfferAnswerParams,
	RegisterParams,
	ReportedLocation,
	RideStepParams,
	RideView,
	SimulatedWork,
	SupplyDemandReply,
} from "../../contracts/dispatch";
import type { InternalOrder, OrderCreatedEvent, TransitionParams } from "../../contracts/orders";
import type { CoalescedPass } from "../../lib/coalesced-pass";
import type { StatementBatcher } from "../../lib/statement-batcher";
import type { LatLng } from "../../lib/geo";
import type { DbThis } from "../../mixins/db.mixin";
import type { DispatchSettings } from "./dispatch.settings";
import type { DispatchMetrics, OfferOutcome } from "./dispatch.metrics";
import type { DispatchRepo } from "./dispatch.repo";
import type { DriverRow } from "./drivers.repo";
import type { RideMirrorRepo, RideRow } from "./ride-mirror.repo";
import type { CellIndex } from "./spatial-index";

/**
 * The dispatch service's own shape: its per-instance state and its methods,
 * which live in the part files (driver-index, ride-mirror, matching,
 * driver-moves) and are all mixed into the one service.
 */

/** A searching ride as the demand index keeps it: whose it is (each partner counts up to a cap). */
export interface DemandItem {
	partnerId: string;
}

/** The steps a driver moves its ride by itself: accepted → arrived → started → dropped. */
export type DriverMoveFrom = "accepted" | "arrived" | "started";
export type DriverMoveTo = "arrived" | "started" | "dropped";

/** One index per mode and service type: test rides see only test drivers and demand, live rides only live ones. */
export type ModeIndexes<T> = Record<DriverMode, Record<ServiceType, CellIndex<T>>>;

export interface DispatchLocal {
	cfg: DispatchSettings;
	repo: DispatchRepo;
	metrics: DispatchMetrics;
	available: ModeIndexes<null>;
	driverRevs: Map<string, number>;
	demand: ModeIndexes<DemandItem>;
	timers: NodeJS.Timeout[];
	/** The tick: one at a time, a kick while it runs makes it run once more. */
	ticker: CoalescedPass;
	/** Mirror rows of new rides: concurrent `orders.created` events share one INSERT. */
	newRides: StatementBatcher<Parameters<RideMirrorRepo["insertNewRides"]>[0][number], boolean>;
	/** Matching alone, one pass at a time: what `kick` asks for. */
	matcher: CoalescedPass;
	sweepRunning: Promise<void> | null;
	refreshRunning: Promise<void> | null;
	/** Database time of the last index refresh; the next one re-reads drivers changed since (with overlap). */
	refreshedUpTo: Date | null;
	stopping: boolean;
	startedAt: number;
	fleetWarnedAt: number;
}

export interface DispatchMethods {
	trouble(message: string): void;
	// driver-index
	publishDrivers(rows: DriverRow[]): void;
	wakeRides(orderIds: string[]): void;
	applyDriverChange(change: DriverChangedEvent): void;
	rebuildIndex(): Promise<void>;
	refreshIndex(): Promise<void>;
	refreshDemand(): Promise<void>;
	setDemand(order: Pick<InternalOrder, "orderId" | "partnerId" | "serviceType" | "pickup">, searching: boolean): void;
	supplyDemandAt(point: LatLng, mode: DriverMode): SupplyDemandReply;
	nearestDrivers(params: NearestDriversParams): NearbyDriver[];
	hasCandidate(ride: RideRow): boolean;
	candidates(pickup: LatLng, serviceType: ServiceType, mode: DriverMode, excluded: Set<string>, t: Transaction): Promise<Array<{ driverId: string }>>;
	// ride-mirror
	getOrder(orderId: string, ctx?: Context): Promise<InternalOrder | null>;
	transition(params: TransitionParams, ctx?: Context): Promise<InternalOrder>;
	applyOrder(order: InternalOrder, opts?: { abandonInFlight?: boolean }): Promise<void>;
	mirrorNewRide(event: OrderCreatedEvent): Promise<void>;
	reconcileOrder(orderId: string, opts?: { abandonInFlight?: boolean }): Promise<void>;
	afterRefusal(orderId: string, err: unknown): Promise<void>;
	sweep(): Promise<void>;
	warnIfNoFleet(): void;
	// matching
	kick(): void;
	tick(): Promise<void>;
	tickSteps(): Promise<void>;
	matchPass(): Promise<void>;
	expireOffers(): Promise<void>;
	matchRides(): Promise<void>;
	matchRide(orderId: string): Promise<void>;
	endRide(orderId: string): Promise<void>;
	endOffer(driverId: string, orderId: string, how: Exclude<OfferOutcome, "accepted">): Promise<boolean>;
	sendLocations(): Promise<void>;
	simulatedWork(): Promise<SimulatedWork>;
	rideView(orderId: string): Promise<RideView>;
	// driver-moves
	loadDriver(driverId: string, t?: Transaction): Promise<DriverRow>;
	registerDriver(params: RegisterParams): Promise<DriverView>;
	goOnline(driverId: string, location: ReportedLocation): Promise<DriverView>;
	goOffline(driverId: string): Promise<DriverView>;
	setDriverLocation(driverId: string, location: ReportedLocation): Promise<DriverRow>;
	acceptOffer(ctx: Context<OfferAnswerParams>): Promise<DriverJob>;
	declineOffer(driverId: string, orderId: string): Promise<DriverView>;
	requireOnRide(driverId: string, orderId: string, location?: ReportedLocation): Promise<{ driver: DriverRow; ride: RideRow }>;
	moveRide(ctx: Context<RideStepParams>, from: DriverMoveFrom, to: DriverMoveTo, otp?: string): Promise<DriverJob>;
	dropOut(ctx: Context<DropOutParams>): Promise<DriverView>;
	etaFor(driver: DriverRow, ride: RideRow, status: string): number | undefined;
	driverJob(driverId: string): Promise<DriverJob>;
	updateDriverGauges(): Promise<void>;
}

export type DispatchThis = Service<Record<string, never>> & DispatchMethods & DispatchLocal & DbThis;

/** A part's methods, bound to the service when mixed in. */
export type DispatchPart<K extends keyof DispatchMethods> = { [P in K]: (this: DispatchThis, ...args: Parameters<DispatchMethods[P]>) => ReturnType<DispatchMethods[P]> };
