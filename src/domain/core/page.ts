import type { NumberedCut } from './byte-pages.ts';

/**
 * One page of results with the numbers the "paginate" plugin of document databases gives, which
 * clients of the original service read: `pages` is at least 1, `pagingCounter` is the 1-based
 * number of the page's first row, and past the last page `prevPage` still points one back.
 */
export interface Page<T> {
  docs: T[];
  total: number;
  limit: number;
  page: number;
  pages: number;
  pagingCounter: number;
  hasPrevPage: boolean;
  hasNextPage: boolean;
  prevPage: number | null;
  nextPage: number | null;
}

/** `cut`: where a page cut by bytes (`numberedCut`) starts, and the pages the list makes so. */
export function paginate<T>(docs: T[], total: number, page: number, limit: number, cut?: Pick<NumberedCut, 'start' | 'pages'>): Page<T> {
  const pages = cut?.pages ?? Math.max(1, Math.ceil(total / limit));
  return {
    docs,
    total,
    limit,
    page,
    pages,
    pagingCounter: (cut?.start ?? (page - 1) * limit) + 1,
    hasPrevPage: page > 1,
    hasNextPage: page < pages,
    prevPage: page > 1 ? page - 1 : null,
    nextPage: page < pages ? page + 1 : null,
  };
}
