import type { SearchService } from '../../search/service.ts';
import type { Executor } from './types.ts';

/** Searches the creations the user may see, as the search page would, and tells the model what it found. */
export function searchExecutor(search: SearchService): Executor {
  return async ({ args, userId }) => {
    const page = await search.search({ id: userId }, { query: args.query, limit: args.limit ?? 5 });
    return {
      result: {
        total: page.total,
        creations: page.docs.map((c) => ({
          id: c.id,
          name: c.name,
          tool: c.tool,
          url: c.url,
          thumbnail: c.thumbnail,
          score: Number(c.score.toFixed(4)),
        })),
      },
    };
  };
}
