import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabaseEnv, runCli } from '../helpers/process.ts';

let env: Record<string, string>;
let drop: () => Promise<void>;
let dir: string;

beforeAll(async () => {
  ({ env, drop } = await freshDatabaseEnv());
  dir = await mkdtemp(join(tmpdir(), 'parley-import-'));
  expect((await runCli(['keys', 'create', 'alice', '--json'], env)).code).toBe(0);
});
afterAll(async () => {
  await drop?.();
  if (dir) await rm(dir, { recursive: true, force: true });
  if (env?.DATA_DIR) await rm(env.DATA_DIR, { recursive: true, force: true });
});

const creation = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id, user: 'alice', name: `Creation ${id}`, tool: 'flux_dev', url: `https://import.example.com/${id}.png`, ...extra });

describe('parley creations import', () => {
  it('rejects a line whose vector length overflows (768 values of 1e200, each finite) with a reason, and imports the rest', async () => {
    const file = join(dir, 'overflow.jsonl');
    await writeFile(file, [creation('before'), creation('huge', { embedding: Array(768).fill(1e200) }), creation('after')].join('\n'));
    for (let run = 0; run < 2; run++) {
      const result = await runCli(['creations', 'import', file, '--json'], env);
      expect(result.code, result.stderr).toBe(0);
      const summary = JSON.parse(result.stdout);
      expect(summary).toMatchObject({ lines: 3, imported: run === 0 ? 2 : 0, skipped: run === 0 ? 0 : 2, rejected: 1 });
      expect(summary.rejections).toEqual([{ line: 2, reason: 'embedding: must have a finite length (its numbers are too large)' }]);
    }
  });
});
