import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.ts';
import { axis, startFakeEmbeddings, type FakeEmbeddings } from '../helpers/fake-embeddings.ts';
import { freshDatabaseEnv, runCli, startCliProcess, startServerProcess } from '../helpers/process.ts';

/**
 * `parley creations import` and `reembed` as a user runs them, against an embedding server on
 * loopback. The interrupted import is killed while the server holds an answer, so where it stops
 * never depends on timing.
 */
describe('parley creations', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let server: FakeEmbeddings;
  let env: Record<string, string>;
  let file: string;
  const validIds = new Set<string>();
  let badLineNumbers: number[];
  let aliceKey: string;

  /** Counts rows straight from the database, between runs (no process holds it then). */
  async function creationsInDatabase() {
    const database = await openDatabase(
      db.env.DATABASE_URL ? { kind: 'postgres', url: db.env.DATABASE_URL } : { kind: 'pglite', dataDir: db.env.DATA_DIR! },
    );
    try {
      const rows = await database.prisma.creation.findMany({
        where: { user: { username: 'alice' }, url: { startsWith: 'https://import.example.com/' } },
        select: { id: true, embeddingProvider: true },
      });
      return { ids: rows.map((r) => r.id), providers: new Set(rows.map((r) => r.embeddingProvider)) };
    } finally {
      await database.close();
    }
  }

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    server = await startFakeEmbeddings();
    // One request per import batch (250 lines), so holding one answer stops the import between batches.
    env = { ...db.env, EMBEDDINGS_URL: server.url, EMBEDDINGS_MODEL: 'fake-clip', EMBEDDINGS_BATCH_SIZE: '250', EMBEDDINGS_RETRIES: '0' };
    const demo = await runCli(['demo', '--json'], env);
    expect(demo.code, demo.stderr).toBe(0);
    aliceKey = JSON.parse(demo.stdout).users[0].apiKey;

    const lines: string[] = [];
    for (let i = 0; i < 700; i++) {
      const id = `import-${i}`;
      const line: Record<string, unknown> = {
        id,
        user: 'alice',
        name: `Imported creation ${i}`,
        tool: 'flux_dev',
        url: `https://import.example.com/${i}.png`,
        args: { prompt: `prompt ${i}` },
        public: i % 2 === 0,
      };
      if (i % 10 === 0) line.agent = 'muse';
      if (i % 7 === 0) line.embedding = axis(i % 700);
      if (i % 7 === 0 && i % 3 === 0) line.embeddingProvider = 'some-other-model';
      lines.push(JSON.stringify(line));
      validIds.add(id);
    }
    const bad: [number, string][] = [
      [5, '{"user": "alice", "name": "broken'],
      [60, JSON.stringify({ user: 'alice', tool: 'flux_dev', url: 'https://import.example.com/x.png' })],
      [120, JSON.stringify({ user: 'nobody-here', name: 'x', tool: 'flux_dev', url: 'https://import.example.com/y.png' })],
      [
        180,
        JSON.stringify({ user: 'alice', agent: 'no-such-agent', name: 'x', tool: 'flux_dev', url: 'https://import.example.com/z.png' }),
      ],
      [300, JSON.stringify({ user: 'alice', name: 'x', tool: 'flux_dev', url: 'https://import.example.com/w.png', embedding: [1, 2, 3] })],
      [420, JSON.stringify({ user: 'alice', name: 'x', tool: 'flux_dev', url: 'javascript:alert(1)' })],
      [500, '[1, 2, 3]'],
    ];
    for (const [at, text] of bad.reverse()) lines.splice(at, 0, text);
    lines.splice(200, 0, '');
    lines.push(lines[10]!); // the same creation twice in one file
    badLineNumbers = bad.reverse().map(([, text]) => lines.indexOf(text) + 1);
    file = join(await mkdtemp(join(tmpdir(), 'parley-import-')), 'creations.jsonl');
    await writeFile(file, `${lines.join('\n')}\n`);
  });
  afterAll(async () => {
    await server.close();
    await db.drop();
  });

  it('has usage texts', async () => {
    for (const args of [
      ['creations', '--help'],
      ['creations', 'import', '--help'],
    ]) {
      const { code, stdout } = await runCli(args, env);
      expect(code).toBe(0);
      expect(stdout).toMatch(/^Usage: parley creations import <file.jsonl>/);
      expect(stdout).toContain('parley creations reembed');
    }
    const missing = await runCli(['creations', 'import'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^Usage: parley creations/);
  });

  let afterKill: Awaited<ReturnType<typeof creationsInDatabase>>;
  it('an import killed mid-way keeps the batches it stored', async () => {
    server.holdAfter(1);
    const first = startCliProcess(['creations', 'import', file], env);
    try {
      // A plain progress line (output is not a terminal), written after the first batch is stored.
      await first.waitFor(/^import: \d+\/709 lines \(\d+%\), \d+ lines\/s, ETA \S+$/m);
      first.child.kill('SIGKILL');
      await first.exited;
    } finally {
      first.child.kill('SIGKILL');
      server.release();
    }
    afterKill = await creationsInDatabase();
    expect(afterKill.ids.length).toBeGreaterThan(0);
    expect(afterKill.ids.length).toBeLessThan(validIds.size);
  });

  // Each run of the import its own test: on a busy machine each process takes seconds to start.
  it('run again, the import resumes without duplicates, rejecting the bad lines with their reasons', async () => {
    const resumed = await runCli(['creations', 'import', file, '--json'], env);
    expect(resumed.code, resumed.stderr).toBe(0);
    const summary = JSON.parse(resumed.stdout);
    expect(summary).toMatchObject({
      lines: 709,
      imported: validIds.size - afterKill.ids.length,
      skipped: afterKill.ids.length + 1,
      rejected: 7,
    });
    expect(summary.rejections.map((r: { reason: string }) => r.reason)).toEqual([
      'not valid JSON',
      'name: is required',
      'user: no creator named "nobody-here"',
      'agent: no agent with the key "no-such-agent"',
      'embedding: must have 768 numbers',
      'url: must be an http or https URL',
      'not a JSON object',
    ]);
    expect(summary.rejections.map((r: { line: number }) => r.line)).toEqual(badLineNumbers);

    const after = await creationsInDatabase();
    expect(new Set(after.ids)).toEqual(validIds);
    expect(after.providers).toEqual(new Set(['openai-http:fake-clip']));
  });

  it('a third run finds everything in place', async () => {
    const again = JSON.parse((await runCli(['creations', 'import', file, '--json'], env)).stdout);
    expect(again).toMatchObject({ imported: 0, skipped: validIds.size + 1, rejected: 7 });
  });

  it('prints a readable summary naming each rejected line', async () => {
    const { code, stdout } = await runCli(['creations', 'import', file], env);
    expect(code).toBe(0);
    expect(stdout).toContain(
      `Imported 0 creations (0 embedded by openai-http:fake-clip), skipped ${validIds.size + 1} already present, rejected 7 of 709 lines.`,
    );
    expect(stdout).toContain(`  line ${badLineNumbers[2]}: user: no creator named "nobody-here"`);
    expect(stdout).toMatch(/Rejected by reason: not valid JSON 1, name 1, user 1, agent 1, embedding 1, url 1, not a JSON object 1/);
  });

  it('stops when the embedding server fails, saying how to resume', async () => {
    const other = join(tmpdir(), `parley-import-${process.pid}-fail.jsonl`);
    await writeFile(
      other,
      `${JSON.stringify({ user: 'alice', name: 'Needs a vector', tool: 'flux_dev', url: 'https://import.example.com/fail.png' })}\n`,
    );
    server.fail(1, 500);
    const { code, stderr } = await runCli(['creations', 'import', other], env);
    expect(code).toBe(1);
    expect(stderr).toMatch(/answered 500/);
    expect(stderr).toContain('Run the same command again to resume');
  });

  it('reembed moves every creation to a newly configured provider', async () => {
    const offline = { ...db.env };
    const result = await runCli(['creations', 'reembed'], offline);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^Re-embedded ${240 + validIds.size} creations with hashed-ngrams-v1\\.$`, 'm'));
    expect(result.stderr).toMatch(/^reembed: \d+\/\d+ creations/m);
  });

  it('a second reembed finds nothing left to move', async () => {
    expect((await runCli(['creations', 'reembed'], { ...db.env })).stdout).toContain('Re-embedded 0 creations');
    expect((await creationsInDatabase()).providers).toEqual(new Set(['hashed-ngrams-v1']));
  });

  it('after a reembed, search on a server finds the demo with the new provider', async () => {
    const serverProcess = await startServerProcess({ ...db.env });
    try {
      await serverProcess.waitFor(/embeddings: hashed-ngrams-v1: built-in hashed word and character n-grams \(offline fallback, not CLIP/);
      expect(serverProcess.output()).toMatch(
        /\nsearch: (pgvector vector\(768\), HNSW cosine index|exact scan over real\[\]: this PostgreSQL server has no pgvector\. To index embeddings, install pgvector)/,
      );
      const res = await fetch(`${serverProcess.url}/v2/creations/search?query=lighthouse%20thunderstorm&limit=5`, {
        headers: { 'x-api-key': aliceKey },
      });
      const page = await res.json();
      expect(res.status).toBe(200);
      expect(page.docs[0].name).toMatch(/^Lighthouse in a thunderstorm/);
      expect(page.total).toBeGreaterThan(0);
    } finally {
      serverProcess.child.kill('SIGKILL');
    }
  });
});
