import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateUpTo, migrationScript, type RawDatabase, rawDatabase } from '../helpers/raw-database.ts';

const LINKS = '20261207100000_relative_media_links';

const OLD = 'http://127.0.0.1:4701';
const PROXIED = 'https://parley.example.com';
const image = (base: string, id: string) => ({ creationId: id, url: `${base}/media/${id}.png`, width: 1024, height: 1024 });

/**
 * Rows made before links were stored relative: creations and tools' results hold the address the
 * service had then. The migration makes the service's own links relative (a file under /media/
 * named after a creation the service made), in columns and wherever results repeat them, and
 * leaves every other link: an imported creation's (even one named after it), another host's, a
 * file named after no creation.
 */
describe(`migration ${LINKS} over links stored absolute`, () => {
  let db: RawDatabase;

  beforeAll(async () => {
    db = await rawDatabase();
    await migrateUpTo(db, LINKS);
    const painted = { note: 'Rendered locally.', images: [image(OLD, 'c1'), image(PROXIED, 'c2')] };
    const found = {
      total: 3,
      creations: [
        { id: 'c1', name: 'Heron', url: `${OLD}/media/c1.png`, thumbnail: `${OLD}/media/c1-thumb.png`, score: 0.9 },
        { id: 'imported', name: 'Lock', url: 'https://cdn.example.com/media/imported.png', thumbnail: null, score: 0.5 },
        { id: 'c2', name: 'Barge', url: 'https://cdn.example.com/media/other.png', thumbnail: null, score: 0.4 },
      ],
    };
    const elsewhere = { url: 'https://tools.example.com/media/x1.png', nested: [{ id: 'x1', url: `${OLD}/media/x1.png` }] };
    await db.exec(`
      INSERT INTO "User" (id, username, "updatedAt") VALUES ('alice', 'alice', now());
      INSERT INTO "Task" (id, "userId", tool, status, result, "updatedAt") VALUES
        ('paint', 'alice', 'flux_dev', 'completed', '${JSON.stringify(painted)}', now()),
        ('find', 'alice', 'creations_search', 'completed', '${JSON.stringify(found)}', now()),
        ('http', 'alice', 'remote_maker', 'completed', '${JSON.stringify(elsewhere)}', now()),
        ('none', 'alice', 'flux_dev', 'failed', NULL, now());
      -- c1 made by a task; c2 by one since deleted (its filename is the service's); the others imported.
      INSERT INTO "Creation" (id, "userId", "taskId", tool, name, url, thumbnail, filename, "updatedAt") VALUES
        ('c1', 'alice', 'paint', 'flux_dev', 'Heron', '${OLD}/media/c1.png', '${OLD}/media/c1-thumb.png', 'c1.png', now()),
        ('c2', 'alice', NULL, 'flux_dev', 'Barge', '${PROXIED}/media/c2.png', '${PROXIED}/media/c2-thumb.png', 'c2.png', now()),
        ('imported', 'alice', NULL, 'sdxl', 'Lock', 'https://cdn.example.com/media/imported.png', NULL, NULL, now()),
        ('foreign', 'alice', NULL, 'sdxl', 'Canal', '${OLD}/media/someone-else.png', NULL, 'someone-else.png', now()),
        ('demo', 'alice', NULL, 'sdxl', 'Mill', 'https://cdn.parley.dev/creations/demo.webp', 'https://cdn.parley.dev/creations/demo-thumb.webp', NULL, now());
    `);
    await db.exec(await migrationScript(LINKS));
  });
  afterAll(() => db?.close());

  it("makes creations' own links relative, whatever address they were made at, and leaves the others", async () => {
    expect(await db.rows(`SELECT id, url, thumbnail FROM "Creation" ORDER BY id`)).toEqual([
      { id: 'c1', url: '/media/c1.png', thumbnail: '/media/c1-thumb.png' },
      { id: 'c2', url: '/media/c2.png', thumbnail: '/media/c2-thumb.png' },
      { id: 'demo', url: 'https://cdn.parley.dev/creations/demo.webp', thumbnail: 'https://cdn.parley.dev/creations/demo-thumb.webp' },
      { id: 'foreign', url: `${OLD}/media/someone-else.png`, thumbnail: null },
      { id: 'imported', url: 'https://cdn.example.com/media/imported.png', thumbnail: null },
    ]);
  });

  it("makes the same links relative in tools' results, at any depth, and no other string", async () => {
    const results = Object.fromEntries(
      (await db.rows<{ id: string; result: unknown }>(`SELECT id, result FROM "Task" ORDER BY id`)).map((r) => [r.id, r.result]),
    );
    expect(results).toEqual({
      paint: {
        note: 'Rendered locally.',
        images: [
          { creationId: 'c1', url: '/media/c1.png', width: 1024, height: 1024 },
          { creationId: 'c2', url: '/media/c2.png', width: 1024, height: 1024 },
        ],
      },
      find: {
        total: 3,
        creations: [
          { id: 'c1', name: 'Heron', url: '/media/c1.png', thumbnail: '/media/c1-thumb.png', score: 0.9 },
          { id: 'imported', name: 'Lock', url: 'https://cdn.example.com/media/imported.png', thumbnail: null, score: 0.5 },
          { id: 'c2', name: 'Barge', url: 'https://cdn.example.com/media/other.png', thumbnail: null, score: 0.4 },
        ],
      },
      http: { url: 'https://tools.example.com/media/x1.png', nested: [{ id: 'x1', url: `${OLD}/media/x1.png` }] },
      none: null,
    });
  });
});
