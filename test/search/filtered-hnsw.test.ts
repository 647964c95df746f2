import { beforeAll, describe, expect, it } from 'vitest';
import { defaultSearchConfig } from '../../src/config.ts';
import { detectVectorColumn } from '../../src/db/vector-column.ts';
import { hashedNgramVector } from '../../src/domain/search/embeddings/hashed-ngrams.ts';
import { searchService, searchStore } from '../../src/domain/search/index.ts';
import { embeddingProviderFor } from '../../src/providers/index.ts';
import { onRealPostgres } from '../helpers/database.ts';
import { domainDatabase, people } from '../helpers/domain-database.ts';

/**
 * A filter that drops every nearest neighbour must not empty the page. 380 creations match the
 * query closely and 20 loosely; filtering on the tool of the 20 leaves nothing among the first
 * `ef_search` candidates of the HNSW index, so only iterative index scans (which search turns
 * on for its transaction) find them. The search service over its store on a migrated database, no app.
 */
describe('filtered search over the HNSW index', () => {
  const t = domainDatabase();
  let search: ReturnType<typeof searchService>;
  let alice: { id: string };
  const efSearch = 40;

  beforeAll(async () => {
    const config = { ...defaultSearchConfig, efSearch, minScore: -1 };
    search = searchService(searchStore(t.db), config, embeddingProviderFor(config.embeddings));
    alice = await (await people(t.db)).user('alice');
    // Varied names: hundreds of near-identical vectors would leave some unreachable in any HNSW graph.
    const adjectives =
      'amber brisk calm dusky eager faded gilded hazy icy jolly keen lush misty noble ochre pale quiet rusty sunny tawny'.split(' ');
    const nouns =
      'anchors bells canyons dragons engines ferns gulls harbors islands jugglers kettles lanterns meadows nests orchards parrots quarries rivers sails towers'.split(
        ' ',
      );
    const ids: string[] = [];
    for (let i = 0; i < 400; i++) {
      const rare = i % 20 === 19;
      const detail = `${adjectives[i % 20]} ${nouns[Math.floor(i / 20)]}`;
      const name = rare ? `A kite with ${detail}` : `Kite festival over the dunes, ${detail}`;
      ids.push(
        (
          await t.db.creation.create({
            data: { userId: alice.id, tool: rare ? 'sdxl' : 'flux_dev', name, url: 'https://cdn.example.com/k.png', public: true },
          })
        ).id,
      );
    }
    await search.indexCreations(ids);
    // On a table this small the planner would rather scan it than use the HNSW index. The
    // embedded database is one session: these settings (and no other index to prefer) make it
    // plan as it does on a large table.
    if (!onRealPostgres()) {
      for (const index of ['Creation_public_deleted_createdAt_idx', 'Creation_userId_createdAt_idx', 'Creation_agentId_createdAt_idx'])
        await t.db.$executeRawUnsafe(`DROP INDEX "${index}"`);
      await t.db.$executeRawUnsafe('SET enable_seqscan = off');
      await t.db.$executeRawUnsafe('SET enable_bitmapscan = off');
    }
  });

  it('still finds the 20 creations of the filtered tool', async () => {
    const page = await search.search({ id: alice.id }, { query: 'kite festival dunes', tool: 'sdxl', limit: 100 });
    expect(page.total).toBe(20);
    expect(page.docs.every((d) => d.tool === 'sdxl')).toBe(true);
  });

  it('(on pgvector) where the index alone, at the same ef_search, returns none of them', async () => {
    if ((await detectVectorColumn(t.db)) !== 'vector' || onRealPostgres()) return;
    const vector = `[${Array.from(hashedNgramVector('kite festival dunes')).join(',')}]`;
    const [, plan, rows] = await t.db.$transaction([
      t.db.$queryRawUnsafe(`SELECT set_config('hnsw.ef_search', '${efSearch}', true), set_config('hnsw.iterative_scan', 'off', true)`),
      t.db.$queryRawUnsafe<{ 'QUERY PLAN': string }[]>(
        `EXPLAIN SELECT id FROM "Creation" WHERE tool = 'sdxl' ORDER BY embedding <=> $1::vector LIMIT 200`,
        vector,
      ),
      t.db.$queryRawUnsafe<{ id: string }[]>(
        `SELECT id FROM "Creation" WHERE tool = 'sdxl' ORDER BY embedding <=> $1::vector LIMIT 200`,
        vector,
      ),
    ]);
    expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toContain('Creation_embedding_hnsw_idx');
    expect(rows).toHaveLength(0);
  });
});
