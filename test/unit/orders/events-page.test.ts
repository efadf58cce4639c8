import { cutEventsPage } from "../../../services/orders/events-page";

/** `/ride/events` pages cut by bytes as well as by count (services/orders/events-page.ts). */

const rows = (sizes: number[]) => sizes.map((size, i) => ({ sequence: i + 1, size }));
const sizeOf = (r: { size: number }) => r.size;
const seqs = (page: Array<{ sequence: number }>) => page.map((r) => r.sequence);

it("takes `limit` events when they fit, and says whether more follow from the extra row", () => {
	const full = cutEventsPage(rows([10, 10, 10, 10]), 3, 1_000, sizeOf);
	expect(seqs(full.page)).toEqual([1, 2, 3]);
	expect(full.more).toBe(true);
	const end = cutEventsPage(rows([10, 10, 10]), 3, 1_000, sizeOf);
	expect(end).toMatchObject({ more: false });
	expect(seqs(end.page)).toEqual([1, 2, 3]);
});

it("cuts the page before the event that would pass the byte bound; more follow", () => {
	// 2 bytes of brackets + (40 + 1) per event: three fit in 130, the fourth would not.
	const cut = cutEventsPage(rows([40, 40, 40, 40, 40]), 1000, 130, sizeOf);
	expect(seqs(cut.page)).toEqual([1, 2, 3]);
	expect(cut.more).toBe(true);
	// The bound itself is allowed.
	expect(seqs(cutEventsPage(rows([40, 40, 40]), 1000, 2 + 3 * 41, sizeOf).page)).toEqual([1, 2, 3]);
});

it("always takes the first event, so paging moves forward", () => {
	const cut = cutEventsPage(rows([5_000, 10]), 10, 100, sizeOf);
	expect(seqs(cut.page)).toEqual([1]);
	expect(cut.more).toBe(true);
	expect(cutEventsPage(rows([]), 10, 100, sizeOf)).toEqual({ page: [], more: false });
});
