import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { serveUsage, usage } from '../src/cli/usage.ts';
import { loadConfig, settings } from '../src/config.ts';
import { entries, markdownTable, rows, tableInDocument } from '../src/settings.ts';

/** What an operator writes in the environment, and what the service makes of it (or refuses at start). */
describe('configuration of limits and origins', () => {
  it('rate limits per tier come from RATE_LIMIT_<TIER> for any tier name; the window, the default and the keyless limit have their own', () => {
    const config = loadConfig({
      RATE_LIMIT_PRO: '5000',
      RATE_LIMIT_PRO_PLUS: '0',
      RATE_LIMIT_WINDOW_MS: '1000',
      RATE_LIMIT_DEFAULT: '50',
      RATE_LIMIT_ANONYMOUS: '10',
    });
    expect(config.limits.rate).toEqual({ windowMs: 1000, perTier: { free: 300, pro: 5000, pro_plus: 0 }, default: 50, anonymous: 10 });
    expect(loadConfig({}).limits).toEqual({
      rate: { windowMs: 60_000, perTier: { free: 300, pro: 1200 }, default: 300, anonymous: 120 },
      maxSubscriptionsPerKey: 100,
      maxStreamsPerKey: 10,
      slotTtlMs: 30_000,
    });
  });

  it('refuses limits that are not whole numbers, naming the variable', () => {
    expect(() => loadConfig({ RATE_LIMIT_PRO: 'lots', RATE_LIMIT_WINDOW_MS: '0' })).toThrow(
      /^Invalid configuration: RATE_LIMIT_WINDOW_MS: .+; RATE_LIMIT_PRO: must be a whole number of requests \(0 for no limit\)$/,
    );
    expect(() => loadConfig({ MAX_STREAMS_PER_KEY: '-1' })).toThrow(/MAX_STREAMS_PER_KEY/);
  });

  it('CORS_ORIGINS takes * or origins (a trailing slash is forgiven); anything else stops the start', () => {
    expect(loadConfig({}).http.corsOrigins).toBe('*');
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com/, http://localhost:3000' }).http.corsOrigins).toEqual([
      'https://app.example.com',
      'http://localhost:3000',
    ]);
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com,*' }).http.corsOrigins).toBe('*');
    for (const bad of ['app.example.com', 'https://app.example.com/path', 'null'])
      expect(() => loadConfig({ CORS_ORIGINS: bad })).toThrow(/^Invalid configuration: CORS_ORIGINS: /);
  });

  it('TRUST_PROXY is off by default, and takes true, a number of hops or proxy addresses', () => {
    expect(loadConfig({}).http.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'true' }).http.trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: '2' }).http.trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, ::1' }).http.trustProxy).toEqual(['10.0.0.0/8', '::1']);
    expect(() => loadConfig({ TRUST_PROXY: 'the load balancer' })).toThrow(/^Invalid configuration: TRUST_PROXY: /);
  });
});

/**
 * Each setting is declared once, in src/config.ts; what an operator reads about them (the table in
 * docs/configuration.md, `parley serve --help`) must say what the declarations do.
 */
describe('settings declared once', () => {
  const all = rows(settings);
  const cells = (table: string) =>
    table
      .trim()
      .split('\n')
      .filter((_, i) => i !== 1)
      .map((line) =>
        line
          .slice(1, -1)
          .split('|')
          .map((cell) => cell.trim()),
      );

  it('docs/configuration.md shows every setting with the default, meaning and place its declaration gives', () => {
    const { table } = tableInDocument(readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8'));
    const shown = cells(table);
    expect(shown, 'the table is out of date: run npx tsx scripts/configuration-table.ts').toEqual(cells(markdownTable(settings)));
    expect(shown.slice(1).map((row) => row[0])).toEqual(all.map((r) => `\`${r.name}\``));
    expect(all.length).toBeGreaterThanOrEqual(69);
  });

  it('every variable has one declaration, a meaning and a place in Config', () => {
    expect(new Set(all.map((r) => r.name)).size).toBe(all.length);
    for (const r of all) {
      expect(r.name).toMatch(/^[A-Z][A-Z0-9_]*(<[A-Z]+>)?$/);
      expect(r.meaning.length, r.name).toBeGreaterThan(10);
      expect(r.places.length, r.name).toBeGreaterThan(0);
    }
  });

  it('a number set in the environment lands at the place the table names', () => {
    const config = loadConfig({}) as unknown as Record<string, unknown>;
    const at = (object: unknown, place: string) => place.split('.').reduce((o: any, key) => o?.[key], object);
    const direct = entries(settings).filter(
      (e) => e.declared.kind === 'setting' && typeof e.declared.fallback === 'number' && at(config, e.places[0]!) === e.declared.fallback,
    );
    expect(direct.length).toBeGreaterThanOrEqual(41);
    for (const { declared, places } of direct) {
      const changed = (declared as { fallback: number }).fallback + 1;
      expect(at(loadConfig({ [declared.name]: String(changed) }), places[0]!), declared.name).toBe(changed);
    }
  });

  it('`parley serve --help` lists every setting with its default, and the main help points to it', async () => {
    const help = await serveUsage();
    for (const r of all) {
      const line = help.split('\n').find((l) => l.startsWith(`  ${r.name} `));
      expect(line, r.name).toBeDefined();
      if (r.default !== 'unset') expect(help.slice(help.indexOf(line!)).replace(/\s+/g, ' '), r.name).toMatch(/\(default: [^)]+\)/);
    }
    expect(help).toContain('PORT                         the port to listen on (default: 4000)');
    expect(help).toContain('MEDIA_DIR');
    expect(help.split('\n').every((l) => l.length <= 100)).toBe(true);
    expect(usage.main).toContain('parley serve --help');
  });

  it('a rule between settings names the one to fix, after the problems of single settings', () => {
    expect(() => loadConfig({ EMBEDDINGS_URL: 'http://127.0.0.1:7997/v1' })).toThrow(
      /^Invalid configuration: EMBEDDINGS_MODEL: is required with EMBEDDINGS_URL$/,
    );
    expect(() => loadConfig({ EMBEDDINGS_URL: 'ftp://x', RATE_LIMIT_GOLD: 'x' })).toThrow(
      /^Invalid configuration: EMBEDDINGS_URL: must be an http\(s\) URL such as http:\/\/127\.0\.0\.1:7997\/v1; EMBEDDINGS_MODEL: is required with EMBEDDINGS_URL; RATE_LIMIT_GOLD: must be/,
    );
    expect(loadConfig({ EMBEDDINGS_URL: 'http://e/v1', EMBEDDINGS_MODEL: 'clip', PORT: '' }).search.embeddings).toEqual({
      kind: 'http',
      url: 'http://e/v1',
      model: 'clip',
      apiKey: undefined,
      batchSize: 32,
      timeoutMs: 30_000,
      retries: 3,
    });
  });
});
