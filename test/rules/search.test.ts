import { describe, expect, it } from 'vitest';
import { defaultSearchConfig } from '../../src/config.ts';
import { searchService } from '../../src/domain/search/service.ts';
import { memorySearchStore, SearchIndex, tableProvider, towards } from './support/search.ts';

/**
 * The search rules over an index in memory: what a viewer is shown (never another's private or
 * a deleted creation, even one hidden between ranking and reading), the relevance cut, the
 * numbers of a page, and input refused naming its parameter.
 */
const QUERY = towards(1, 0, 0, 0);

function world(config: Partial<typeof defaultSearchConfig> = {}) {
  const index = new SearchIndex();
  const provider = tableProvider({ foxes: QUERY });
  const store = memorySearchStore(index);
  const search = searchService(store, { ...defaultSearchConfig, minScore: 0.5, ...config }, provider);
  return { index, store, provider, search, owner: { id: 'user-owner' }, stranger: { id: 'user-stranger' } };
}

const refusal = (code: string, message: string, fieldPath?: (string | number)[]) => expect.objectContaining({ code, message, fieldPath });

describe('search', () => {
  it('ranks what the viewer may see by relevance, cutting off what is too far from the query', async () => {
    const { index, search, owner, stranger } = world();
    const near = index.add(stranger.id, towards(1, 0.1, 0, 0));
    const nearer = index.add(stranger.id, towards(1, 0, 0, 0));
    const mine = index.add(owner.id, towards(1, 0.5, 0, 0), { public: false });
    index.add(stranger.id, towards(1, 0, 0, 0), { public: false });
    index.add(stranger.id, towards(1, 0, 0, 0), { deleted: true });
    index.add(stranger.id, towards(0, 1, 0, 0));
    const page = await search.search(owner, { query: 'foxes' });
    expect(page.docs.map((d) => d.id)).toEqual([nearer.id, near.id, mine.id]);
    expect(page.docs[0]!.score).toBeCloseTo(1);
    expect(page).toMatchObject({ total: 3, page: 1, pages: 1, hasNextPage: false });
    expect((await search.search(stranger, { query: 'foxes' })).docs.map((d) => d.id)).not.toContain(mine.id);
  });

  it('leaves out a creation made private after it was ranked', async () => {
    const { index, store, provider, owner, stranger } = world();
    const shown = index.add(stranger.id, towards(1, 0, 0, 0));
    const hidden = index.add(stranger.id, towards(1, 0.1, 0, 0));
    const racing = {
      ...store,
      async nearest(q: Parameters<typeof store.nearest>[0]) {
        const ranked = await store.nearest(q);
        index.creations.get(hidden.id)!.public = false;
        return ranked;
      },
    };
    const search = searchService(racing, { ...defaultSearchConfig, minScore: 0.5 }, provider);
    expect((await search.search(owner, { query: 'foxes' })).docs.map((d) => d.id)).toEqual([shown.id]);
  });

  it('pages through the ranked window with the original’s numbers, asking the provider once per query text', async () => {
    const { index, provider, search, owner } = world({ maxResults: 4 });
    const made = [0.1, 0.2, 0.3, 0.4, 0.5].map((tilt) => index.add(owner.id, towards(1, tilt, 0, 0)));
    const second = await search.search(owner, { query: 'foxes', page: '2', limit: '3' });
    expect(second).toMatchObject({ total: 4, page: 2, pages: 2, pagingCounter: 4, hasPrevPage: true, hasNextPage: false, prevPage: 1 });
    expect(second.docs.map((d) => d.id)).toEqual([made[3]!.id]);
    const newest = await search.search(owner, { query: 'foxes', orderBy: 'createdAt', direction: 'desc', limit: 2 });
    expect(newest.docs.map((d) => d.id)).toEqual([made[3]!.id, made[2]!.id]);
    expect(provider.asked).toEqual(['foxes']);
  });

  it('continues a connection after its cursor, forward only', async () => {
    const { index, search, owner } = world();
    const made = [0.1, 0.2, 0.3].map((tilt) => index.add(owner.id, towards(1, tilt, 0, 0)));
    const first = await search.connection(owner, { query: 'foxes' }, { first: 2 });
    expect(first.nodes.map((n) => n.id)).toEqual([made[0]!.id, made[1]!.id]);
    expect(first).toMatchObject({ hasNextPage: true, hasPreviousPage: false, totalCount: 3 });
    const next = await search.connection(owner, { query: 'foxes' }, { first: 2, after: first.cursor(first.nodes[1]!) });
    expect(next.nodes.map((n) => n.id)).toEqual([made[2]!.id]);
    expect(next).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    await expect(search.connection(owner, { query: 'foxes' }, { last: 2 })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'is not supported: search results page forward, with first and after', ['last']),
    );
  });

  it('names the parameter at fault before asking the provider anything', async () => {
    const { provider, search, owner } = world();
    await expect(search.search(owner, {})).rejects.toEqual(refusal('BAD_USER_INPUT', 'is required', ['query']));
    await expect(search.search(owner, { query: '   ' })).rejects.toEqual(refusal('BAD_USER_INPUT', 'must not be empty', ['query']));
    await expect(search.search(owner, { query: 'foxes', limit: '101' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must be a whole number from 1 to 100', ['limit']),
    );
    await expect(search.search(owner, { query: 'foxes', orderBy: 'name' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must be one of score, createdAt, likeCount', ['orderBy']),
    );
    await expect(search.search(owner, { query: 'foxes', agentId: 'a\u0000' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must not contain the NUL character', ['agentId']),
    );
    expect(provider.asked).toEqual([]);
  });

  const refused: [Record<string, unknown>, string, string][] = [
    [{ query: '' }, 'query', 'must not be empty'],
    [{ query: 'x'.repeat(1001) }, 'query', 'must be at most 1000 characters'],
    ...[0, -1, 1.5, 'two', '1.5', '', 1_000_001].map((page): [Record<string, unknown>, string, string] => [
      { query: 'foxes', page },
      'page',
      'must be a whole number from 1 to 1000000',
    ]),
    ...[0, 101, 'ten'].map((limit): [Record<string, unknown>, string, string] => [
      { query: 'foxes', limit },
      'limit',
      'must be a whole number from 1 to 100',
    ]),
    [{ query: 'foxes', direction: 'sideways' }, 'direction', 'must be one of desc, asc'],
    ...['agentId', 'userId', 'tool'].map((name): [Record<string, unknown>, string, string] => [
      { query: 'foxes', [name]: '' },
      name,
      'must not be empty',
    ]),
  ];
  it.each(refused.map(([params, field, message]) => ({ field, params, message, shown: JSON.stringify(params).slice(0, 60) })))(
    'refuses $shown on $field, asking the provider nothing',
    async ({ params, field, message }) => {
      const { provider, search, owner } = world();
      await expect(search.search(owner, params)).rejects.toEqual(refusal('BAD_USER_INPUT', message, [field]));
      expect(provider.asked).toEqual([]);
    },
  );
});
