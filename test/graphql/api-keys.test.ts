import { describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

const KeysDelete = graphql(`
  mutation KeysDelete($apiKey: String!) {
    deleteApiKey(apiKey: $apiKey)
  }
`);
const KeysWhoAmI = graphql(`
  query KeysWhoAmI {
    me { username }
  }
`);

let t: TestApp;

setUp(async (start) => {
  t = await start.app();
});

const extraKey = async (userId: string) => (await t.services.apiKeys.create(userId)).apiKey;

async function expectKeyWorks(key: string, username: string) {
  expect(expectData(await t.gql(KeysWhoAmI, {}, key)).me.username).toBe(username);
}

async function expectKeyRejected(key: string) {
  const response = await t.gql(KeysWhoAmI, {}, key);
  expect(response.status).toBe(401);
  expect(response.data).toBeNull();
  expect(expectGraphQLError(response, 'UNAUTHENTICATED').message).toMatch(/invalid api key/i);
}

describe('deleteApiKey', () => {
  it('deletes another of your keys: true, then that key is 401 and the one in use still works', async () => {
    const user = await t.createUser('olga');
    const second = await extraKey(user.id);
    await expectKeyWorks(second, 'olga');

    expect(expectData(await t.gql(KeysDelete, { apiKey: second }, user.apiKey)).deleteApiKey).toBe(true);
    await expectKeyRejected(second);
    await expectKeyWorks(user.apiKey, 'olga');
  });

  it('deletes the key in use: true, and the very next request with it is 401', async () => {
    const user = await t.createUser('pavel');
    const spare = await extraKey(user.id);
    expect(expectData(await t.gql(KeysDelete, { apiKey: user.apiKey }, user.apiKey)).deleteApiKey).toBe(true);
    await expectKeyRejected(user.apiKey);
    // A deleted key cannot delete anything either.
    const response = await t.gql(KeysDelete, { apiKey: spare }, user.apiKey);
    expect(response.status).toBe(401);
    expectGraphQLError(response, 'UNAUTHENTICATED');
    await expectKeyWorks(spare, 'pavel');
  });

  it("another user's key is NOT_FOUND, and that key still works", async () => {
    const owner = await t.createUser('quinn');
    const attacker = await t.createUser('rita');
    const response = await t.gql(KeysDelete, { apiKey: owner.apiKey }, attacker.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'NOT_FOUND').message).toMatch(/api key not found/i);
    await expectKeyWorks(owner.apiKey, 'quinn');
    await expectKeyWorks(attacker.apiKey, 'rita');
  });

  it('deleting the same key twice: the second time is NOT_FOUND', async () => {
    const user = await t.createUser('sven');
    const second = await extraKey(user.id);
    expect(expectData(await t.gql(KeysDelete, { apiKey: second }, user.apiKey)).deleteApiKey).toBe(true);
    expectGraphQLError(await t.gql(KeysDelete, { apiKey: second }, user.apiKey), 'NOT_FOUND');
  });

  it('a right id with a wrong secret is NOT_FOUND, and the real key survives', async () => {
    const user = await t.createUser('tara');
    const second = await extraKey(user.id);
    const forged = second.slice(0, -1) + (second.endsWith('A') ? 'B' : 'A');
    expectGraphQLError(await t.gql(KeysDelete, { apiKey: forged }, user.apiKey), 'NOT_FOUND');
    await expectKeyWorks(second, 'tara');
  });

  it.each([
    ['a malformed key', 'definitely-not-a-key'],
    ['a well-formed key that does not exist', `pk_${'Z'.repeat(16)}_${'y'.repeat(43)}`],
  ])('%s is NOT_FOUND', async (_name, apiKey) => {
    const user = await t.createUser();
    expectGraphQLError(await t.gql(KeysDelete, { apiKey }, user.apiKey), 'NOT_FOUND');
    await expectKeyWorks(user.apiKey, user.username);
  });

  it('an empty key is BAD_USER_INPUT naming apiKey', async () => {
    const user = await t.createUser();
    const response = await t.gql(KeysDelete, { apiKey: '' }, user.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'BAD_USER_INPUT').message).toMatch(/apiKey/);
    await expectKeyWorks(user.apiKey, user.username);
  });
});
