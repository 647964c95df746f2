import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/process.ts';

const PASSWORD = 'Hunter2-never-shown';

/**
 * A URL's password is never printed back: commands and the start refuse a URL they cannot use
 * (a mistyped scheme, one that does not parse, one that fetch cannot send credentials in) with
 * a message naming the setting or option, and without the password. The commands run as
 * processes, as an operator runs them, all at once: each stops before it opens anything.
 */
describe('URL passwords in messages', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'parley-passwords-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  const cases: { name: string; args: string[]; env: Record<string, string>; says: RegExp }[] = [
    {
      name: 'db copy to a mistyped scheme',
      args: ['db', 'copy', '--to', `postgress://parley:${PASSWORD}@db.example.com/parley`],
      env: {},
      says: /--to takes a PostgreSQL URL.*\(not "postgress:\/\/parley:\*\*\*@db\.example\.com\/parley"\)/,
    },
    {
      name: 'db copy to a URL that does not parse (an @ left in the password)',
      args: ['db', 'copy', '--to', `postgres://parley:${PASSWORD}@x@[db/parley`],
      env: {},
      says: /--to takes a PostgreSQL URL/,
    },
    {
      name: 'a DATABASE_URL that does not parse',
      args: ['migrate'],
      env: { DATABASE_URL: `postgres://parley:${PASSWORD}@[db/parley` },
      says: /DATABASE_URL: is not a URL \(escape any of : \/ @ \? # in the password as %XX\)/,
    },
    {
      name: 'a REDIS_URL that does not parse',
      args: ['serve'],
      env: { REDIS_URL: `redis://:${PASSWORD}@[cache` },
      says: /REDIS_URL: is not a URL/,
    },
    {
      name: 'an EMBEDDINGS_URL with credentials (fetch would quote it whole in every failure)',
      args: ['demo'],
      env: { EMBEDDINGS_URL: `http://parley:${PASSWORD}@127.0.0.1:9/v1`, EMBEDDINGS_MODEL: 'clip' },
      says: /EMBEDDINGS_URL: must not hold a user name or password/,
    },
    {
      name: 'a PUBLIC_URL with credentials (every media link would show them)',
      args: ['serve'],
      env: { PUBLIC_URL: `https://parley:${PASSWORD}@parley.example.com` },
      says: /PUBLIC_URL: must not hold a user name or password/,
    },
  ];

  it('each is refused with a message that names what is wrong and holds no password', async () => {
    const results = await Promise.all(cases.map((c) => runCli(c.args, { DATA_DIR: dataDir, ...c.env })));
    results.forEach((result, i) => {
      const { name, says } = cases[i]!;
      expect(result.code, name).toBe(1);
      expect(result.stderr, name).toMatch(says);
      expect(result.stdout + result.stderr, name).not.toContain(PASSWORD);
      expect(result.stderr, name).not.toMatch(/\n\s+at /);
    });
  });
});
