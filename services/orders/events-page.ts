/**
 * How many of a ride's events go into one `/ride/events` page: at most
 * `limit`, and no more than `maxBytes` of serialised events
 * (EVENTS_PAGE_MAX_BYTES), so the answer always fits one bus message however
 * large the events' metadata. The first event always goes in (one event is a
 * few KB: metadata is at most 4 KB), so paging always moves forward. Pure.
 */
export interface EventsPageCut<T> {
	page: T[];
	/** Whether events follow the page (`nextCursor` continues after its last event). */
	more: boolean;
}

/**
 * `rows` are the events after the cursor in sequence order, read with one
 * more than `limit` (the extra row only tells whether more follow);
 * `sizeOf` is an upper bound of one event's serialised bytes.
 */
export function cutEventsPage<T>(rows: readonly T[], limit: number, maxBytes: number, sizeOf: (row: T) => number): EventsPageCut<T> {
	const page: T[] = [];
	// The array's brackets; each event adds its bytes and a comma.
	let bytes = 2;
	for (const row of rows.slice(0, limit)) {
		const size = sizeOf(row) + 1;
		if (page.length > 0 && bytes + size > maxBytes) return { page, more: true };
		page.push(row);
		bytes += size;
	}
	return { page, more: rows.length > page.length };
}
