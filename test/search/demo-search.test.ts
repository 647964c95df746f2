import { describe, expect, it } from 'vitest';
import { loadDemo, type DemoManifest } from '../../src/demo/load.ts';
import type { TestApp } from '../helpers/app.ts';
import { setUp } from '../helpers/set-up.ts';
import { searchPath } from './support.ts';

describe('search over the demo data with nothing configured', () => {
  let t: TestApp;
  let manifest: DemoManifest;

  setUp(async (start) => {
    t = await start.app();
    manifest = await loadDemo(t.services);
  });

  const search = async (username: string, query: string) =>
    (await t.rest('GET', searchPath({ query, limit: 100 }), { key: manifest.users.find((u) => u.username === username)!.apiKey })).body;

  it('finds the demo creations by their subject, with the built-in embeddings', async () => {
    const page = await search('bob', 'lighthouse in a storm');
    expect(page.docs[0].name).toMatch(/^Lighthouse in a thunderstorm \(/);
    // Every lighthouse is found; the ones bob may not see (alice's private ones) are not.
    const visibleLighthouses = manifest.creations.filter((c, n) => n % 20 === 1 && (c.public || c.owner === 'bob'));
    expect(
      page.docs
        .filter((d: { name: string }) => d.name.startsWith('Lighthouse'))
        .map((d: { id: string }) => d.id)
        .sort(),
    ).toEqual(visibleLighthouses.map((c) => c.id).sort());
    expect(
      page.docs.every(
        (d: { id: string }) =>
          manifest.creations.find((c) => c.id === d.id)!.public || manifest.creations.find((c) => c.id === d.id)!.owner === 'bob',
      ),
    ).toBe(true);
  });

  it('loading the demo again embeds nothing twice', async () => {
    const before = await t.db.creation.findMany({ where: { embeddingProvider: 'hashed-ngrams-v1' }, select: { id: true } });
    expect(before).toHaveLength(manifest.creations.length);
    await loadDemo(t.services);
    expect(await t.services.search.indexCreations(manifest.creations.map((c) => c.id))).toEqual({ embedded: 0 });
  });
});
