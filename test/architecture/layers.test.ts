import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const src = fileURLToPath(new URL('../../src', import.meta.url));

/** Every relative import of every source file, as `from → to` paths relative to src/. */
function imports(): { from: string; to: string }[] {
  const found: { from: string; to: string }[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'generated') walk(path);
      } else if (/\.(ts|js)$/.test(entry.name)) {
        for (const m of readFileSync(path, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
          found.push({ from: relative(src, path), to: relative(src, resolve(dirname(path), m[1]!)) });
        }
      }
    }
  };
  walk(src);
  return found;
}

const folder = (path: string) => path.split('/')[0]!;

/** Which top-level folders of src/ each folder may import (docs/decisions.md, "Layers"). */
const outward: Record<string, string[]> = {
  domain: ['realtime', 'rest', 'graphql', 'http', 'limits', 'redis', 'cli', 'demo'],
  realtime: ['graphql', 'rest', 'http', 'cli'],
  limits: ['graphql', 'rest', 'http', 'realtime', 'cli'],
  db: ['domain', 'graphql', 'rest', 'http', 'realtime', 'limits', 'cli'],
  rest: ['graphql', 'cli'],
  graphql: ['rest', 'cli'],
  http: ['rest', 'graphql', 'cli'],
  control: ['rest', 'graphql', 'http', 'realtime'],
};

describe('layers', () => {
  const all = imports();

  it('reads the imports of the whole tree', () => {
    expect(all.length).toBeGreaterThan(200);
    expect(all).toContainEqual({ from: 'app.ts', to: 'domain/services.ts' });
  });

  for (const [layer, forbidden] of Object.entries(outward)) {
    it(`src/${layer}/ imports nothing from ${forbidden.map((f) => `src/${f}/`).join(', ')}`, () => {
      const wrong = all.filter((i) => folder(i.from) === layer && forbidden.includes(folder(i.to)));
      expect(wrong.map((i) => `${i.from} → ${i.to}`)).toEqual([]);
    });
  }
});
