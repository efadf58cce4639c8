import type { ServiceType } from "../../contracts/common";
import type { DriverMode } from "../../contracts/dispatch";
import type { CellIndex } from "./spatial-index";

/**
 * Small shapes the dispatch parts share. A leaf: it imports no part, so
 * every part may import it without a cycle.
 */

/** A searching ride as the demand index keeps it: whose it is (each partner counts up to a cap). */
export interface DemandItem {
	partnerId: string;
}

/** One index per mode and service type: test rides see only test drivers and demand, live rides only live ones. */
export type ModeIndexes<T> = Record<DriverMode, Record<ServiceType, CellIndex<T>>>;

/** The steps a driver moves its ride by itself: accepted → arrived → started → dropped. */
export type DriverMoveFrom = "accepted" | "arrived" | "started";
export type DriverMoveTo = "arrived" | "started" | "dropped";

/** How a part reports: `trouble` is a warning, except while the service stops (peers leaving then is expected). */
export interface DispatchLog {
	info(message: string): void;
	debug(message: string): void;
	trouble(message: string): void;
}

/** "There is matching work": what a part calls instead of reaching the matcher. */
export type WorkSignal = () => void;
