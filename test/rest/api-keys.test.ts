import { describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { expectAuthError, expectError, expectRejectsBadKeys, unknownWellFormedKey, withWrongSecret } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

describe('DELETE /apikeys', () => {
  let t: TestApp;

  setUp(async (start) => {
    t = await start.app();
  });

  /** A second key for a user, issued the same way as the first. */
  const issueKey = async (userId: string) => (await t.services.apiKeys.create(userId)).apiKey;
  const keyWorks = async (key: string) => (await t.rest('GET', '/v2/creators/me', { key })).status === 200;

  it('refuses a missing, malformed or unknown caller key with 401 {error}', async () => {
    const alice = await t.createUser();
    const other = await issueKey(alice.id);
    expect(await expectRejectsBadKeys(t, 'DELETE', '/apikeys', { apiKey: other })).toBe(true);
    // A well-formed key whose id exists but whose secret is wrong is refused too.
    expectAuthError(await t.rest('DELETE', '/apikeys', { key: withWrongSecret(alice.apiKey), body: { apiKey: other } }));
    // None of those deleted the key named in the body.
    expect(await keyWorks(other)).toBe(true);
    expect(await t.db.apiKey.count({ where: { userId: alice.id } })).toBe(2);
  });

  it('answers 400 {message:"Missing apiKey"} without a body, with {} and with a non-string apiKey', async () => {
    const alice = await t.createUser();
    for (const options of [
      {},
      { body: {} },
      { body: { apiKey: '' } },
      { body: { apiKey: 42 } },
      { body: { apiKey: null } },
      { body: { key: alice.apiKey } },
    ]) {
      const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, ...options });
      expectError(res, 400, 'message', 'Missing apiKey');
    }
    expect(await keyWorks(alice.apiKey)).toBe(true);
  });

  it('refuses to delete another user\'s key with 401 {message:"API key not found"}; that key keeps working', async () => {
    const alice = await t.createUser();
    const bob = await t.createUser();
    const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: bob.apiKey } });
    expectError(res, 401, 'message', 'API key not found');
    expect(await keyWorks(bob.apiKey)).toBe(true);
    expect(await keyWorks(alice.apiKey)).toBe(true);
    expect(await t.db.apiKey.count({ where: { userId: bob.id } })).toBe(1);
  });

  it('answers 401 {message:"API key not found"} for an unknown, malformed or wrong-secret key', async () => {
    const alice = await t.createUser();
    const second = await issueKey(alice.id);
    for (const apiKey of [unknownWellFormedKey(), 'nope', withWrongSecret(second)]) {
      const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey } });
      expectError(res, 401, 'message', 'API key not found');
    }
    // The key whose id was used with a wrong secret was not deleted.
    expect(await keyWorks(second)).toBe(true);
    expect(await t.db.apiKey.count({ where: { userId: alice.id } })).toBe(2);
  });

  it('deletes one of my other keys: 200 {}, the deleted key fails on the very next request, the calling key still works', async () => {
    const alice = await t.createUser();
    const second = await issueKey(alice.id);
    expect(await keyWorks(second)).toBe(true);

    const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: second } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});

    expectAuthError(await t.rest('GET', '/v2/creators/me', { key: second }));
    expect(await keyWorks(alice.apiKey)).toBe(true);
    expect(await t.db.apiKey.count({ where: { userId: alice.id } })).toBe(1);

    // Deleting it again: it is gone.
    expectError(await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: second } }), 401, 'message', 'API key not found');
  });

  it('deletes the key I am calling with; it fails at once, my other key still works', async () => {
    const alice = await t.createUser();
    const second = await issueKey(alice.id);
    const res = await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: alice.apiKey } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});

    expectAuthError(await t.rest('GET', '/v2/creators/me', { key: alice.apiKey }));
    expectAuthError(await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: second } }));
    expect(await keyWorks(second)).toBe(true);
  });

  it('stores no plaintext: no column of any key row contains the key or its secret', async () => {
    const alice = await t.createUser();
    const secret = alice.apiKey.slice(20);
    expect(secret).toHaveLength(43);
    const rows = await t.db.apiKey.findMany({ where: { userId: alice.id }, omit: { hash: false } });
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row.hash).toMatch(/^[0-9a-f]{64}$/);
    for (const [column, value] of Object.entries(row)) {
      const text = value instanceof Date ? value.toISOString() : String(value);
      expect(text, column).not.toContain(secret);
      expect(text, column).not.toContain(alice.apiKey);
    }
    // Nor does any other key row in the table.
    const all = JSON.stringify(await t.db.apiKey.findMany({ omit: { hash: false } }));
    expect(all).not.toContain(secret);
  });

  it('reads the keys of requests that arrive together in one statement, each checked as if alone', async () => {
    const users = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    const deleted = await issueKey(users[0]!.id);
    await t.services.apiKeys.delete(await t.services.apiKeys.authenticate(deleted), deleted);
    const asked = [...users.flatMap((u) => Array.from({ length: 10 }, () => u.apiKey)), deleted, withWrongSecret(users[1]!.apiKey)];
    const before = t.queries.length;
    const outcomes = await Promise.all(
      asked.map((key) =>
        t.services.apiKeys.authenticate(key).then(
          (viewer) => viewer.id,
          (e: { code: string }) => e.code,
        ),
      ),
    );
    expect(t.queries.slice(before).filter((q) => q.includes('FROM "ApiKey" AS k'))).toHaveLength(1);
    expect(outcomes).toEqual([...users.flatMap((u) => Array.from({ length: 10 }, () => u.id)), 'UNAUTHENTICATED', 'UNAUTHENTICATED']);
  });
});
