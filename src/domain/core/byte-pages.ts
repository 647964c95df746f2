/**
 * Pages bounded in bytes as well as rows: a page stops before its rows would pass a byte budget,
 * and always holds at least one row, so a row larger than the budget still reads, alone.
 */

/** How many rows (their sizes in reading order) go on a page of `take` within `maxBytes`: at least one. */
export function rowsThatFit(sizes: readonly number[], take: number, maxBytes: number): number {
  let fits = 0;
  for (let bytes = 0; fits < Math.min(take, sizes.length); fits++) {
    bytes += sizes[fits]!;
    if (fits > 0 && bytes > maxBytes) break;
  }
  return fits;
}

/** Where a numbered page starts and ends in the whole list, and how many pages the list makes. */
export interface NumberedCut {
  /** The index of the page's first row (past the end for a page past the last). */
  start: number;
  end: number;
  pages: number;
}

/**
 * A numbered page of a list cut by bytes. Numbered pages are cut from the list's first row on,
 * each of up to `limit` rows within `maxBytes` (`rowsThatFit`), so page `n` of a given limit is
 * always the same rows: a caller asking for the next page with the same limit gets the rows after
 * these, none skipped or repeated, however the pages before were cut. With rows small enough,
 * every page is `limit` rows, as numbered pages are without a byte budget.
 */
export function numberedCut(sizes: readonly number[], page: number, limit: number, maxBytes: number): NumberedCut {
  let cut: NumberedCut | null = null;
  let pages = 0;
  for (let start = 0; start < sizes.length; pages++) {
    const end = start + rowsThatFit(sizes.slice(start, start + limit), limit, maxBytes);
    if (pages + 1 === page) cut = { start, end, pages: 0 };
    start = end;
  }
  return { ...(cut ?? { start: sizes.length, end: sizes.length }), pages: Math.max(1, pages) };
}

/** A numbered page's window: which page, of how many rows at most, within how many bytes. */
export interface NumberedWindow {
  page: number;
  limit: number;
  maxBytes: number;
}

/**
 * A numbered page cut by bytes, read in three steps a store supplies: the ids of the whole list in
 * its order, the size of each (as the page would write it), and the rows of the page.
 */
export async function numberedByBytes<T extends { id: string }>(
  window: NumberedWindow,
  steps: {
    ids: () => Promise<string[]>;
    sizes: (ids: string[]) => Promise<Map<string, number>>;
    rows: (ids: string[]) => Promise<T[]>;
  },
): Promise<{ rows: T[]; total: number; cut: NumberedCut }> {
  const ids = await steps.ids();
  const sizes = ids.length ? await steps.sizes(ids) : new Map<string, number>();
  const cut = numberedCut(
    ids.map((id) => sizes.get(id) ?? 0),
    window.page,
    window.limit,
    window.maxBytes,
  );
  const pageIds = ids.slice(cut.start, cut.end);
  const byId = new Map((pageIds.length ? await steps.rows(pageIds) : []).map((r) => [r.id, r]));
  // A row gone between the reads is left out rather than shown half.
  return { rows: pageIds.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : [])), total: ids.length, cut };
}
