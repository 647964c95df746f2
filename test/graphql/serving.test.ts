import { createClient } from 'graphql-sse';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

describe('GraphQL endpoint', () => {
  let t: TestApp;
  let alice: TestUser;

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
  });

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

describe('GraphQL over SSE (graphql-sse)', () => {
  let t: TestApp;
  let alice: TestUser;
  const subscription = 'subscription ($id: ID!) { sessionEvents(sessionId: $id) { __typename seq } }';

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
  });

  it("serves the client's distinct connections mode: each subscription is its own stream", async () => {
    const agent = await fixtures(t).agent(alice);
    const session = (await t.services.sessions.send(await t.services.apiKeys.authenticate(alice.apiKey), { agentIds: [agent.id] }))
      .sessionId;
    const client = createClient({ url: `${t.url}/graphql`, headers: { 'x-api-key': alice.apiKey }, retryAttempts: 0 });
    try {
      const events = client.iterate<{ sessionEvents: { __typename: string; seq: number } }>({
        query: subscription,
        variables: { id: session },
      });
      await expect.poll(() => t.services.bus.subscriberCount()).toBe(1);
      await t.services.sessions.send(await t.services.apiKeys.authenticate(alice.apiKey), { sessionId: session, content: 'over sse' });
      const first = await events.next();
      expect(first.value?.data?.sessionEvents.__typename).toBe('PromptStarted');
      await events.return?.();
    } finally {
      client.dispose();
    }
  });

  it('refuses single connection mode (PUT to reserve a stream) with 405, Allow and a body saying what is served', async () => {
    const reserve = await fetch(`${t.url}/graphql`, { method: 'PUT', headers: { 'x-api-key': alice.apiKey } });
    expect(reserve.status).toBe(405);
    expect(reserve.headers.get('allow')?.split(', ')).toEqual(expect.arrayContaining(['GET', 'POST']));
    expect(reserve.headers.get('allow')).not.toContain('PUT');
    expect(await reserve.json()).toEqual({
      error: 'Method Not Allowed',
      message: expect.stringMatching(/^PUT is not allowed on \/graphql; it takes GET/),
    });

    const client = createClient({
      url: `${t.url}/graphql`,
      headers: { 'x-api-key': alice.apiKey },
      singleConnection: true,
      retryAttempts: 0,
    });
    try {
      const events = client.iterate({ query: subscription, variables: { id: 'any' } });
      await expect(events.next()).rejects.toThrow(/405/);
    } finally {
      client.dispose();
    }
  });
});
