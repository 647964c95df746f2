import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.ts';

describe('GraphQL endpoint', () => {
  let t: TestApp;
  let alice: TestUser;

  beforeAll(async () => {
    t = await startTestApp();
    alice = await t.createUser('alice');
  });
  afterAll(() => t.close());

  it('serves GraphiQL to a browser', async () => {
    const response = await fetch(`${t.url}/graphql`, { headers: { accept: 'text/html,application/xhtml+xml' } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/text\/html/);
    expect(await response.text()).toMatch(/graphiql/i);
  });

  it('answers queries sent with GET', async () => {
    const query = encodeURIComponent('{ me { username } }');
    const response = await fetch(`${t.url}/graphql?query=${query}`, { headers: { accept: 'application/json', 'x-api-key': alice.apiKey } });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ data: { me: { username: 'alice' } } });
  });

  it('refuses mutations sent with GET', async () => {
    const query = encodeURIComponent('mutation { deleteApiKey(apiKey: "pk_x") }');
    const response = await fetch(`${t.url}/graphql?query=${query}`, { headers: { accept: 'application/json', 'x-api-key': alice.apiKey } });
    expect(response.status).toBe(405);
    const me = await t.rest('GET', '/v2/creators/me', { key: alice.apiKey });
    expect(me.status).toBe(200);
  });
});
