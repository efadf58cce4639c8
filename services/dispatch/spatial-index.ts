import { cellToBoundary, cellToLatLng, gridRing, gridDisk, latLngToCell } from "h3-js";
import type { Point } from "../../contracts/common";
import { haversineMeters } from "../../lib/geo";

/**
 * A nearest-neighbour index over points on the globe, bucketed by H3 cell.
 * A query walks hexagonal rings outwards from the query's cell and stops as
 * soon as no unvisited ring can hold anything closer than what it already
 * has (or anything inside the radius), so the cost depends on how many
 * points are near the query, not on how many there are in total.
 *
 * Dispatch keeps one per service type for the available drivers, and one for
 * recent ride requests (demand). It is a cache: the database decides.
 */

export interface Neighbour<T> {
	id: string;
	item: T;
	point: Point;
	distanceM: number;
}

interface Entry<T> {
	id: string;
	lat: number;
	lng: number;
	cell: string;
	item: T;
}

export interface NearestOptions<T> {
	/** At most this many results, nearest first. */
	limit: number;
	radiusM: number;
	/** Skip entries this returns false for (e.g. drivers who declined this ride). */
	accept?: (id: string, item: T) => boolean;
}

/**
 * A lower bound of the distance from any point in the origin cell to any
 * point in a cell `k` rings away. For regular hexagons of edge `e`, the disk
 * of `k - 1` rings contains a circle of radius (1.5(k - 1) + 0.5)·e around the
 * origin's centre (the notches of its zigzag outline are the closest points),
 * and the query is at most `e` from that centre: (1.5k - 2)·e. The 0.8
 * factor covers H3's size distortion between neighbouring cells.
 */
export function ringLowerBoundM(k: number, edgeM: number): number {
	return Math.max(0, 0.8 * (1.5 * k - 2) * edgeM);
}

export class CellIndex<T> {
	private readonly entries = new Map<string, Entry<T>>();
	private readonly cells = new Map<string, Map<string, Entry<T>>>();
	private readonly edgeCache = new Map<string, number>();
	private readonly centreCache = new Map<string, Point>();

	/** Per cell, how many entries each group holds (only with `groupOf`): counting a wholly covered cell costs its groups, not its entries. */
	private readonly groupCounts = new Map<string, Map<string, number>>();

	constructor(
		readonly resolution: number,
		/** Safety stop for sparse areas: never walk more rings than this. */
		private readonly maxRings = 400,
		/** The group an entry counts for in `countGroupsWithin` (demand: its partner). */
		private readonly groupOf?: (item: T) => string,
	) {}

	get size(): number {
		return this.entries.size;
	}

	/** Every entry's id. */
	ids(): IterableIterator<string> {
		return this.entries.keys();
	}

	has(id: string): boolean {
		return this.entries.has(id);
	}

	/** Where the entry is, or undefined when the index does not hold it. */
	pointOf(id: string): Point | undefined {
		const e = this.entries.get(id);
		return e ? { lat: e.lat, lng: e.lng } : undefined;
	}

	get(id: string): T | undefined {
		return this.entries.get(id)?.item;
	}

	upsert(id: string, point: Point, item: T): void {
		const cell = latLngToCell(point.lat, point.lng, this.resolution);
		const old = this.entries.get(id);
		if (old && old.cell !== cell) this.removeFromCell(old);
		if (old) this.countGroup(old, -1);
		const entry: Entry<T> = { id, lat: point.lat, lng: point.lng, cell, item };
		this.countGroup(entry, 1);
		this.entries.set(id, entry);
		let bucket = this.cells.get(cell);
		if (!bucket) {
			bucket = new Map();
			this.cells.set(cell, bucket);
		}
		bucket.set(id, entry);
	}

	remove(id: string): boolean {
		const old = this.entries.get(id);
		if (!old) return false;
		this.entries.delete(id);
		this.removeFromCell(old);
		this.countGroup(old, -1);
		return true;
	}

	clear(): void {
		this.entries.clear();
		this.cells.clear();
		this.groupCounts.clear();
	}

	*values(): IterableIterator<{ id: string; point: Point; item: T }> {
		for (const e of this.entries.values()) yield { id: e.id, point: { lat: e.lat, lng: e.lng }, item: e.item };
	}

	/** The nearest entries within `radiusM` of `point`, nearest first. */
	nearest(point: Point, opts: NearestOptions<T>): Neighbour<T>[] {
		const found: Neighbour<T>[] = [];
		if (opts.limit <= 0 || this.entries.size === 0) return found;
		const origin = latLngToCell(point.lat, point.lng, this.resolution);
		const edge = this.edgeOf(origin);
		for (let k = 0; k <= this.maxRings; k++) {
			if (ringLowerBoundM(k, edge) > opts.radiusM) break;
			for (const cell of this.ring(origin, k)) {
				const bucket = this.cells.get(cell);
				if (!bucket) continue;
				for (const e of bucket.values()) {
					if (opts.accept && !opts.accept(e.id, e.item)) continue;
					const d = haversineMeters(point, e);
					if (d > opts.radiusM) continue;
					insertSorted(found, { id: e.id, item: e.item, point: { lat: e.lat, lng: e.lng }, distanceM: d }, opts.limit);
				}
			}
			// Full, and nothing in the next ring can beat the worst kept result.
			if (found.length >= opts.limit && ringLowerBoundM(k + 1, edge) > found[found.length - 1].distanceM) break;
		}
		return found;
	}

	/** How many entries lie within `radiusM` of `point` (optionally only those `accept` passes). */
	countWithin(point: Point, radiusM: number, accept?: (id: string, item: T) => boolean): number {
		let count = 0;
		this.walkWithin(point, radiusM, (bucket, whollyInside) => {
			// Wholly inside the circle: every entry counts without measuring each.
			if (!accept && whollyInside) {
				count += bucket.size;
				return;
			}
			for (const e of bucket.values()) {
				if (accept && !accept(e.id, e.item)) continue;
				if (haversineMeters(point, e) <= radiusM) count++;
			}
		});
		return count;
	}

	/**
	 * How many entries of each group lie within `radiusM` of `point` (needs
	 * `groupOf`). Cells wholly inside the circle add their per-group counts
	 * without visiting entries, so the cost follows the cells and groups
	 * near the point, not the entries (demand near a busy pickup can be
	 * thousands of rides, asked for on every quote).
	 */
	countGroupsWithin(point: Point, radiusM: number): Map<string, number> {
		const groupOf = this.groupOf;
		if (!groupOf) throw new Error("countGroupsWithin needs an index made with groupOf");
		const out = new Map<string, number>();
		this.walkWithin(point, radiusM, (bucket, whollyInside, cell) => {
			if (whollyInside) {
				for (const [group, n] of this.groupCounts.get(cell) ?? []) out.set(group, (out.get(group) ?? 0) + n);
				return;
			}
			for (const e of bucket.values()) {
				if (haversineMeters(point, e) > radiusM) continue;
				const group = groupOf(e.item);
				out.set(group, (out.get(group) ?? 0) + 1);
			}
		});
		return out;
	}

	/** Calls `visit` for every entry within `radiusM` of `point` (in no particular order). */
	forEachWithin(point: Point, radiusM: number, visit: (id: string, item: T) => void): void {
		this.walkWithin(point, radiusM, (bucket) => {
			for (const e of bucket.values()) if (haversineMeters(point, e) <= radiusM) visit(e.id, e.item);
		});
	}

	/** The non-empty cells that may hold entries within `radiusM` of `point`, and whether each lies wholly inside. */
	private walkWithin(point: Point, radiusM: number, onCell: (bucket: Map<string, Entry<T>>, whollyInside: boolean, cell: string) => void): void {
		if (this.entries.size === 0) return;
		const origin = latLngToCell(point.lat, point.lng, this.resolution);
		const edge = this.edgeOf(origin);
		// A hexagon lies within its circumradius (= edge) of its centre; 1.2 covers distortion.
		const slack = edge * 1.2;
		for (let k = 0; k <= this.maxRings; k++) {
			if (ringLowerBoundM(k, edge) > radiusM) break;
			for (const cell of this.ring(origin, k)) {
				const bucket = this.cells.get(cell);
				if (!bucket) continue;
				const toCentre = haversineMeters(point, this.centreOf(cell));
				if (toCentre - slack > radiusM) continue;
				onCell(bucket, toCentre + slack <= radiusM, cell);
			}
		}
	}

	private ring(origin: string, k: number): string[] {
		if (k === 0) return [origin];
		try {
			return gridRing(origin, k);
		} catch {
			// Near one of the 12 pentagons a ring is irregular; take the disk minus the inner disk.
			const inner = new Set(gridDisk(origin, k - 1));
			return gridDisk(origin, k).filter((c) => !inner.has(c));
		}
	}

	private centreOf(cell: string): Point {
		let centre = this.centreCache.get(cell);
		if (!centre) {
			const [lat, lng] = cellToLatLng(cell);
			centre = { lat, lng };
			if (this.centreCache.size > 200_000) this.centreCache.clear();
			this.centreCache.set(cell, centre);
		}
		return centre;
	}

	/** The shortest edge of a cell, metres (cached: a query near the same place reuses it). */
	private edgeOf(cell: string): number {
		let edge = this.edgeCache.get(cell);
		if (edge !== undefined) return edge;
		const boundary = cellToBoundary(cell);
		edge = Infinity;
		for (let i = 0; i < boundary.length; i++) {
			const [aLat, aLng] = boundary[i];
			const [bLat, bLng] = boundary[(i + 1) % boundary.length];
			edge = Math.min(edge, haversineMeters({ lat: aLat, lng: aLng }, { lat: bLat, lng: bLng }));
		}
		if (this.edgeCache.size > 50_000) this.edgeCache.clear();
		this.edgeCache.set(cell, edge);
		return edge;
	}

	private countGroup(entry: Entry<T>, delta: 1 | -1): void {
		if (!this.groupOf) return;
		const group = this.groupOf(entry.item);
		let counts = this.groupCounts.get(entry.cell);
		if (!counts) {
			if (delta < 0) return;
			counts = new Map();
			this.groupCounts.set(entry.cell, counts);
		}
		const n = (counts.get(group) ?? 0) + delta;
		if (n > 0) counts.set(group, n);
		else counts.delete(group);
		if (counts.size === 0) this.groupCounts.delete(entry.cell);
	}

	private removeFromCell(entry: Entry<T>): void {
		const bucket = this.cells.get(entry.cell);
		if (!bucket) return;
		bucket.delete(entry.id);
		if (bucket.size === 0) this.cells.delete(entry.cell);
	}
}

/** Keeps `list` sorted by distance and at most `limit` long. */
function insertSorted<T>(list: Neighbour<T>[], n: Neighbour<T>, limit: number): void {
	if (list.length >= limit && n.distanceM >= list[list.length - 1].distanceM) return;
	let i = list.length;
	while (i > 0 && list[i - 1].distanceM > n.distanceM) i--;
	list.splice(i, 0, n);
	if (list.length > limit) list.pop();
}
