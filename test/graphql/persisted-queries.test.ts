import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * Automatic persisted queries as Apollo's clients speak them: the hash alone first, the query
 * with its hash when the server does not know it, the hash alone from then on; over POST and GET.
 */
let t: TestApp;
let alice: TestUser;

setUp(async (start) => {
  t = await start.app({ apq: { maxEntries: 3, ttlMs: 60_000 } });
  alice = await t.createUser('alice');
});

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const persisted = (hash: string) => ({ persistedQuery: { version: 1, sha256Hash: hash } });

async function post(body: object) {
  const res = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', 'x-api-key': alice.apiKey },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function get(params: Record<string, string>) {
  const res = await fetch(`${t.url}/graphql?${new URLSearchParams(params)}`, {
    headers: { accept: 'application/graphql-response+json', 'x-api-key': alice.apiKey },
  });
  return { status: res.status, body: await res.json() };
}

const notFound = {
  status: 200,
  body: { errors: [{ message: 'PersistedQueryNotFound', extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } }] },
};

describe('automatic persisted queries', () => {
  it('over POST: an unknown hash is PERSISTED_QUERY_NOT_FOUND (200, so Apollo clients retry); query and hash run and register it; the hash alone then runs it', async () => {
    const query = '{ me { username } }';
    const hash = sha256(query);
    expect(await post({ extensions: persisted(hash) })).toEqual(notFound);
    expect(await post({ query, extensions: persisted(hash) })).toEqual({ status: 200, body: { data: { me: { username: 'alice' } } } });
    expect(await post({ extensions: persisted(hash) })).toEqual({ status: 200, body: { data: { me: { username: 'alice' } } } });
  });

  it('over GET, with the extensions in the query string, the same way', async () => {
    const query = 'query Mine { me { id username } }';
    const hash = sha256(query);
    const extensions = JSON.stringify(persisted(hash));
    expect(await get({ extensions })).toEqual(notFound);
    expect((await get({ query, extensions })).body.data.me.username).toBe('alice');
    expect((await get({ extensions, operationName: 'Mine' })).body.data.me.username).toBe('alice');
    // Registered over GET, known over POST: one store.
    expect((await post({ extensions: persisted(hash) })).body.data.me.username).toBe('alice');
  });

  it('a query sent with a hash that is not its own is refused, does not run and is not stored', async () => {
    const query = 'mutation { deleteSession(id: "none") }';
    const wrong = sha256('{ me { id } }');
    const res = await post({ query, extensions: persisted(wrong) });
    expect(res.body).toEqual({ errors: [{ message: 'PersistedQueryMismatch', extensions: { code: 'PERSISTED_QUERY_MISMATCH' } }] });
    expect(await post({ extensions: persisted(wrong) })).toEqual(notFound);
  });

  it('hashes that are not SHA-256 hex, and malformed extensions, are answered cleanly', async () => {
    for (const hash of ['', 'nope', 'A'.repeat(64), 'x'.repeat(100_000)])
      expect(await post({ extensions: persisted(hash) })).toEqual(notFound);
    for (const extensions of [
      { persistedQuery: { version: 2, sha256Hash: sha256('{ me { id } }') } },
      { persistedQuery: 'abc' },
      { persistedQuery: null },
    ]) {
      const res = await post({ extensions });
      expect(res.status).toBe(400);
      expect(res.body.errors[0].message).toBeTruthy();
    }
  });

  it('a persisted mutation sent with GET is refused, as any mutation over GET', async () => {
    const query = 'mutation { forgetMemory(agentId: "none") }';
    const hash = sha256(query);
    await post({ query, extensions: persisted(hash) });
    const res = await get({ extensions: JSON.stringify(persisted(hash)) });
    expect(res.status).toBe(405);
  });

  it('the store is bounded: the least recently used query goes past the limit, and a query over 32 KiB runs but is not kept', async () => {
    const queries = ['{ me { id } }', '{ me { createdAt } }', '{ me { type } }', '{ me { userImage } }'].map((q) => ({
      q,
      hash: sha256(q),
    }));
    for (const { q, hash } of queries.slice(0, 3)) expect((await post({ query: q, extensions: persisted(hash) })).body.data).toBeTruthy();
    // Using the first makes the second the least recently used.
    expect((await post({ extensions: persisted(queries[0]!.hash) })).body.data).toBeTruthy();
    await post({ query: queries[3]!.q, extensions: persisted(queries[3]!.hash) });
    expect(await post({ extensions: persisted(queries[1]!.hash) })).toEqual(notFound);
    for (const i of [0, 2, 3]) expect((await post({ extensions: persisted(queries[i]!.hash) })).body.data).toBeTruthy();

    const long = `{ me { username } } # ${'x'.repeat(40 * 1024)}`;
    expect((await post({ query: long, extensions: persisted(sha256(long)) })).body.data).toEqual({ me: { username: 'alice' } });
    expect(await post({ extensions: persisted(sha256(long)) })).toEqual(notFound);
  });
});
