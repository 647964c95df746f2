import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { graphqlWsClients, wsExecute } from '../helpers/graphql-ws.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectCleanErrors } from './support.ts';

const WsMe = graphql(`
  query WsMe {
    me { rawId username type }
  }
`);
const WsAgent = graphql(`
  query WsAgent($id: ID!) {
    agent(id: $id) { id name }
  }
`);
const WsLike = graphql(`
  mutation WsLike($id: ID!) {
    likeCreation(id: $id) { rawId likeCount likedByMe }
  }
`);
const WsCreation = graphql(`
  query WsCreation($id: ID!) {
    creation(id: $id) { likeCount likedByMe }
  }
`);
const WsDeleteKey = graphql(`
  mutation WsDeleteKey($apiKey: String!) {
    deleteApiKey(apiKey: $apiKey)
  }
`);

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
const ws = graphqlWsClients(() => t.url);

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});
afterEach(() => ws.disposeAll());
afterAll(async () => {
  await ws.disposeAll();
});

describe('GraphQL over graphql-ws', () => {
  it('a query over the socket runs as the key in connectionParams', async () => {
    const result = await wsExecute(ws.connect(alice.apiKey), WsMe);
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ me: { rawId: alice.id, username: 'alice', type: 'USER' } });
  });

  it('the key is also accepted as x-api-key or apiKey', async () => {
    expect((await wsExecute(ws.connect(bob.apiKey, { paramName: 'x-api-key' }), WsMe)).data?.me.username).toBe('bob');
    expect((await wsExecute(ws.connect(bob.apiKey, { paramName: 'apiKey' }), WsMe)).data?.me.username).toBe('bob');
  });

  it('two sockets with different keys each see their own user, several operations per socket', async () => {
    const a = ws.connect(alice.apiKey);
    const b = ws.connect(bob.apiKey);
    const results = await Promise.all([wsExecute(a, WsMe), wsExecute(b, WsMe), wsExecute(a, WsMe), wsExecute(b, WsMe)]);
    expect(results.map((r) => r.data?.me.username)).toEqual(['alice', 'bob', 'alice', 'bob']);
  });

  it.each([
    ['a bad key', 'pk_not_a_real_key', { code: 4403, reason: 'Invalid API key' }],
    ['no key', null, { code: 4401, reason: 'Missing API key: send it in connectionParams as X-Api-Key' }],
  ])('with %s the socket is closed at connection_init, before any operation runs', async (_name, key, close) => {
    const refused = await wsExecute(ws.connect(key), WsMe).then(
      (result) => ({ result }),
      (e: { code: number; reason: string }) => ({ code: e.code, reason: e.reason }),
    );
    expect(refused).toEqual(close);
  });

  it('domain errors carry the same codes as over HTTP', async () => {
    const f = fixtures(t);
    const hidden = await f.agent(alice, { public: false });
    const client = ws.connect(bob.apiKey);
    const forbidden = await wsExecute(client, WsAgent, { id: hidden.id });
    expect(forbidden.data ?? null).toBeNull();
    expect(forbidden.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const missing = await wsExecute(client, WsAgent, { id: 'no-such-agent' });
    expect(missing.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expectCleanErrors([...(forbidden.errors ?? []), ...(missing.errors ?? [])] as never);
  });

  it('a mutation over the socket is persisted', async () => {
    const creation = await fixtures(t).creation(alice, { public: true });
    const result = await wsExecute(ws.connect(bob.apiKey), WsLike, { id: creation.id });
    expect(result.data?.likeCreation).toEqual({ rawId: creation.id, likeCount: 1, likedByMe: true });
    expect(expectData(await t.gql(WsCreation, { id: creation.id }, bob.apiKey)).creation).toEqual({ likeCount: 1, likedByMe: true });
  });

  it('a key deleted while the socket is open closes that socket (4403), and a new socket with it is refused', async () => {
    const carl = await t.createUser('carl');
    // Kept open between operations, as an app holding its socket would.
    const client = ws.connect(carl.apiKey, { lazyCloseTimeout: 60_000 });
    expect((await wsExecute(client, WsMe)).data?.me.username).toBe('carl');
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      client.on('closed', (e) => {
        const { code, reason } = e as { code: number; reason: string };
        resolve({ code, reason });
      }),
    );
    expect((await wsExecute(client, WsDeleteKey, { apiKey: carl.apiKey })).data?.deleteApiKey).toBe(true);
    expect(await closed).toEqual({ code: 4403, reason: 'The API key of this connection was deleted' });
    const again = await wsExecute(ws.connect(carl.apiKey), WsMe).then(
      () => null,
      (e: { code: number; reason: string }) => ({ code: e.code, reason: e.reason }),
    );
    expect(again).toEqual({ code: 4403, reason: 'Invalid API key' });
  });

  it('an invalid document is refused with a clear message and no stack', async () => {
    const client = ws.connect(alice.apiKey);
    const refused = await new Promise<unknown>((resolve) => {
      client.subscribe(
        { query: '{ me { notAField } }' },
        { next: () => resolve('unexpected result'), error: resolve, complete: () => resolve('completed without error') },
      );
    });
    expect(Array.isArray(refused)).toBe(true);
    const errors = refused as { message: string }[];
    expect(errors[0]!.message).toMatch(/Cannot query field "notAField" on type "Creator"/);
    expect(JSON.stringify(errors)).not.toMatch(/stack|node_modules|prisma/i);
  });

  it('an unexpected failure is masked over the socket too', async () => {
    const agent = await fixtures(t).agent(alice);
    const spy = vi
      .spyOn(t.services.agents, 'get')
      .mockRejectedValueOnce(
        new Error('Invalid `prisma.agent.findUnique()` invocation: SELECT "public"."Agent" FROM "public"."Agent": connection terminated'),
      );
    try {
      const result = await wsExecute(ws.connect(alice.apiKey), WsAgent, { id: agent.id });
      expect(spy).toHaveBeenCalledOnce();
      expect(result.data ?? null).toBeNull();
      expect(result.errors?.[0]?.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
      expect(result.errors?.[0]?.message).toBe('Unexpected error.');
      expectCleanErrors(result.errors as never);
    } finally {
      spy.mockRestore();
    }
  });
});
