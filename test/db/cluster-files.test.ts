import { mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyTreeSync, refreshTreeSync } from '../../src/db/cluster-files.js';

async function contents(dir: string) {
  const files = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile());
  const out: Record<string, string> = {};
  for (const f of files) out[join(f.parentPath.slice(dir.length), f.name)] = await readFile(join(f.parentPath, f.name), 'utf8');
  return out;
}

/**
 * A backup copies the database's files while the service writes them, then copies again, with
 * every statement held back, only what changed meanwhile: the second copy must leave an exact
 * copy of that instant, whatever the first one caught half-way.
 */
describe('a copy of files that change while it is made, brought up to date', () => {
  let scratch: string;
  const source = () => join(scratch, 'source');
  const copy = () => join(scratch, 'copy');
  const manifest = () => join(scratch, 'manifest.json');
  const hourAgo = new Date(Date.now() - 3_600_000);

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'parley-cluster-files-'));
    await mkdir(join(source(), 'base', '1'), { recursive: true });
    for (const name of ['stable', 'rewritten', 'deleted', 'same-size']) {
      await writeFile(join(source(), 'base', '1', name), `${name} before`);
      await utimes(join(source(), 'base', '1', name), hourAgo, hourAgo);
    }
    await writeFile(join(source(), 'pg_control'), 'control, written just now');
  });
  afterAll(() => rm(scratch, { recursive: true, force: true }));

  it('copies again what changed, added or went, and what changed too recently to tell, but not the rest', async () => {
    copyTreeSync(source(), copy(), manifest());
    expect(await contents(copy())).toEqual(await contents(source()));

    await writeFile(join(source(), 'base', '1', 'rewritten'), 'rewritten after, and longer');
    // The same size: only its time, recent to the file system, tells it changed.
    await writeFile(join(source(), 'base', '1', 'same-size'), 'same-size AFTER!');
    await rm(join(source(), 'base', '1', 'deleted'));
    await mkdir(join(source(), 'base', '2'));
    await writeFile(join(source(), 'base', '2', 'new'), 'a new relation');
    await writeFile(join(source(), 'pg_control'), 'control, written again');

    refreshTreeSync(source(), copy(), manifest());
    expect(await contents(copy())).toEqual(await contents(source()));
    expect(await readFile(join(copy(), 'base', '1', 'same-size'), 'utf8')).toBe('same-size AFTER!');
  });

  it('leaves alone a file last changed well before the copy began, so the held-back copy is short', async () => {
    copyTreeSync(source(), join(scratch, 'second'), join(scratch, 'second.json'));
    await writeFile(join(scratch, 'second', 'base', '1', 'stable'), 'marked in the copy');
    refreshTreeSync(source(), join(scratch, 'second'), join(scratch, 'second.json'));
    expect(await readFile(join(scratch, 'second', 'base', '1', 'stable'), 'utf8')).toBe('marked in the copy');
    // pg_control was written less than two seconds before the copy began: copied again.
    expect(await readFile(join(scratch, 'second', 'pg_control'), 'utf8')).toBe('control, written again');
  });
});
