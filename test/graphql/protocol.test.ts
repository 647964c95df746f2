import { describe, expect, it, vi, afterAll, afterEach, beforeAll } from 'vitest';
import type { TestApp, TestUser, GraphQLResponse } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError, expectCleanErrors, postDocument, postRaw } from './support.ts';
import { createClient } from 'graphql-sse';
import { createHash } from 'node:crypto';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { graphqlWsClients, wsExecute } from '../helpers/graphql-ws.ts';

/**
 * GraphQL as a client speaks it: the endpoint over GET, POST and SSE, its errors, automatic persisted
 * queries, the statements a large query costs, and graphql-ws. One app for all (each start makes and
 * migrates a database); each describe has users of its own. Its persisted-query store is small, for
 * the store's bound to be reached in a few requests; no other describe sends persisted queries.
 */
let app: TestApp;

setUp(async (start) => {
  app = await start.app({ apq: { maxEntries: 3, ttlMs: 60_000 } });
});

describe('errors', () => {
  const ErrorsCreateAgent = graphql(`
  mutation ErrorsCreateAgent($input: CreateAgentInput!) {
    createAgent(input: $input) { id }
  }
`);
  const ErrorsUpdateAgent = graphql(`
  mutation ErrorsUpdateAgent($id: ID!, $input: UpdateAgentInput!) {
    updateAgent(id: $id, input: $input) { id name }
  }
`);
  const ErrorsAgent = graphql(`
  query ErrorsAgent($id: ID!) {
    agent(id: $id) { id rawId name description }
  }
`);
  const ErrorsMeAndAgent = graphql(`
  query ErrorsMeAndAgent($id: ID!) {
    me { username }
    agent(id: $id) { id }
  }
`);

  let t: TestApp;
  let alice: TestUser;

  beforeAll(async () => {
    t = app;
    alice = await t.createUser('alice-errors');
  });

  /** A request error: no data, a readable first message, nothing internal. */
  function expectRequestError(response: { status: number; json: any; text: string }, message: RegExp) {
    expect(response.json, response.text).toBeDefined();
    expect(response.json.data ?? null).toBeNull();
    expect(response.json.errors[0].message).toMatch(message);
    expectCleanErrors(response.json.errors);
    expect(response.text).not.toMatch(/"stack"|node_modules|\.ts:\d+/);
  }

  describe('errors never leak internals', () => {
    it('a syntax error is 400 with the parser message', async () => {
      const response = await postRaw(t, { query: '{ me { id ' }, alice.apiKey);
      expect(response.status).toBe(400);
      expectRequestError(response, /^Syntax Error: /);
      expect(response.json.errors[0].extensions?.code).toBe('GRAPHQL_PARSE_FAILED');
    });

    it('a syntax error is reported the same way without a key', async () => {
      const response = await postRaw(t, { query: 'query { me { id }' });
      expect(response.status).toBe(400);
      expectRequestError(response, /^Syntax Error: /);
    });

    it('a validation error is 400 (200 for plain application/json) naming the field', async () => {
      const response = await postRaw(t, { query: '{ me { username passwordHash } }' }, alice.apiKey);
      expect(response.status).toBe(400);
      expectRequestError(response, /Cannot query field "passwordHash" on type "Creator"/);
      expect(response.json.errors[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');

      const plain = await fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', 'x-api-key': alice.apiKey },
        body: JSON.stringify({ query: '{ me { username passwordHash } }' }),
      });
      expect(plain.status).toBe(200);
      const body = (await plain.json()) as { data?: unknown; errors: { message: string }[] };
      expect(body.data ?? null).toBeNull();
      expect(body.errors[0]!.message).toMatch(/passwordHash/);
    });

    it('a missing required argument or variable is a clear request error', async () => {
      const missingArg = await postRaw(t, { query: '{ agent { id } }' }, alice.apiKey);
      expect([200, 400]).toContain(missingArg.status);
      expectRequestError(missingArg, /argument "id" of type "ID!" is required/);

      const missingVariable = await postRaw(
        t,
        { query: 'query ErrorsRawMissing($id: ID!) { agent(id: $id) { id } }', variables: {} },
        alice.apiKey,
      );
      expect([200, 400]).toContain(missingVariable.status);
      expectRequestError(missingVariable, /Variable "\$id" of required type "ID!" was not provided/);
    });

    it('a variable of the wrong type is a request error that names the variable and where it is', async () => {
      const wrongType = await postRaw(
        t,
        { query: 'query ErrorsRawWrong($id: ID!) { agent(id: $id) { id } }', variables: { id: { nested: true } } },
        alice.apiKey,
      );
      expect(wrongType.status).toBe(400);
      expectRequestError(wrongType, /Variable "\$id" got invalid value/);
      expect(wrongType.json.errors[0].locations).toEqual([{ line: 1, column: 22 }]);

      const wrongEnum = await postRaw(
        t,
        {
          query: 'mutation ErrorsRawEnum($i: UpdateAgentInput!) { updateAgent(id: "x", input: $i) { id } }',
          variables: { i: { ownerPays: 'NOPE' } },
        },
        alice.apiKey,
      );
      expect(wrongEnum.status).toBe(400);
      expectRequestError(wrongEnum, /Variable "\$i" got invalid value "NOPE" at "i\.ownerPays"/);
    });

    it('a body that is not JSON, or has no query, is a 400 with a clear message', async () => {
      const notJson = await postRaw(t, '{"query": "{ me { id } }"', alice.apiKey);
      expect(notJson.status).toBe(400);
      expect(notJson.text).not.toMatch(/"stack"|node_modules|\.ts:\d+/);

      const noQuery = await postRaw(t, { variables: {} }, alice.apiKey);
      expect(noQuery.status).toBe(400);
      expectRequestError(noQuery, /query/i);
    });

    it('a POST without a content type, or accepting nothing GraphQL answers with, is refused in the transport error shape', async () => {
      const untyped = await fetch(`${t.url}/graphql`, { method: 'POST', headers: { 'x-api-key': alice.apiKey } });
      expect(untyped.status).toBe(415);
      expect(await untyped.json()).toEqual({
        error: 'Unsupported Media Type',
        message: 'Send GraphQL requests as application/json (POST), or in the query string (GET)',
      });
      const unacceptable = await fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json', accept: 'image/png' },
        body: '{"query":"{ me { id } }"}',
      });
      expect(unacceptable.status).toBe(406);
      expect(await unacceptable.json()).toEqual({
        error: 'Not Acceptable',
        message: 'Accept application/json or application/graphql-response+json (text/event-stream for subscriptions)',
      });
    });

    it('an unknown operation name is a clear request error', async () => {
      const response = await postRaw(t, { query: 'query A { me { id } }', operationName: 'B' }, alice.apiKey);
      expect([200, 400]).toContain(response.status);
      expectRequestError(response, /operation/i);
    });

    /** What an unexpected database failure looks like from the inside. */
    const internalFailure = () =>
      Object.assign(
        new Error(
          'Invalid `prisma.agent.findUnique()` invocation in /work/main/src/domain/agents/service.ts:42:7\n\nSELECT "public"."Agent"."id" FROM "public"."Agent" WHERE id = $1: connection terminated unexpectedly',
        ),
        { code: 'P1017', clientVersion: '7.10.0' },
      );

    it('an unexpected failure in a query is masked as INTERNAL_SERVER_ERROR', async () => {
      const agent = await fixtures(t).agent(alice);
      const spy = vi.spyOn(t.services.agents, 'get').mockRejectedValueOnce(internalFailure());
      try {
        const raw = await postDocument(t, ErrorsAgent, { id: agent.id }, alice.apiKey);
        expect(spy).toHaveBeenCalledOnce();
        expect(raw.json.data).toBeNull();
        expect(raw.json.errors).toHaveLength(1);
        expect(raw.json.errors[0]).toMatchObject({
          message: 'Unexpected error.',
          path: ['agent'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        });
        expectCleanErrors(raw.json.errors);
        expect(raw.text).not.toMatch(/P1017|service\.ts|SELECT|connection terminated|clientVersion/);
      } finally {
        spy.mockRestore();
      }
      // The next request is served normally.
      expect(expectData(await t.gql(ErrorsAgent, { id: agent.id }, alice.apiKey)).agent.rawId).toBe(agent.id);
    });

    it('an unexpected failure in a mutation is masked and changes nothing', async () => {
      const agent = await fixtures(t).agent(alice, { name: 'Stable', description: 'unchanged' });
      const spy = vi.spyOn(t.services.agents, 'update').mockRejectedValueOnce(internalFailure());
      try {
        const updated = await t.gql(ErrorsUpdateAgent, { id: agent.id, input: { name: 'Changed' } }, alice.apiKey);
        expect(updated.data).toBeNull();
        const error = expectGraphQLError(updated, 'INTERNAL_SERVER_ERROR');
        expect(error.message).toBe('Unexpected error.');
        expect(error.path).toEqual(['updateAgent']);
      } finally {
        spy.mockRestore();
      }
      expect(expectData(await t.gql(ErrorsAgent, { id: agent.id }, alice.apiKey)).agent).toMatchObject({
        name: 'Stable',
        description: 'unchanged',
      });
    });

    it('a NUL character in a string is refused without leaking anything, and nothing is stored', async () => {
      // Valid GraphQL, but PostgreSQL cannot store it: it is bad input, not a server fault.
      const before = await t.db.agent.count();
      const created = await t.gql(ErrorsCreateAgent, { input: { name: 'nul\u0000byte', key: 'nul-agent' } }, alice.apiKey);
      expect(created.data).toBeNull();
      expect(created.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      expect(created.errors?.[0]?.message).toMatch(/NUL character/);
      expectCleanErrors(created.errors);
      expect(await t.db.agent.count()).toBe(before);
      expect(await t.db.user.count({ where: { username: 'nul-agent' } })).toBe(0);
    });

    it('an error in one root field leaves the others answered', async () => {
      const response = await t.gql(ErrorsMeAndAgent, { id: 'no-such-agent' }, alice.apiKey);
      // agent is non-null, so the error nulls the whole data object, per the GraphQL spec.
      expect(response.data).toBeNull();
      expect(expectGraphQLError(response, 'NOT_FOUND').path).toEqual(['agent']);
    });
  });
});

describe('serving', () => {
  describe('GraphQL endpoint', () => {
    let t: TestApp;
    let alice: TestUser;

    beforeAll(async () => {
      t = app;
      alice = await t.createUser('alice-endpoint');
    });

    it('serves GraphiQL to a browser', async () => {
      const response = await fetch(`${t.url}/graphql`, { headers: { accept: 'text/html,application/xhtml+xml' } });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/text\/html/);
      expect(await response.text()).toMatch(/graphiql/i);
    });

    it('answers queries sent with GET', async () => {
      const query = encodeURIComponent('{ me { username } }');
      const response = await fetch(`${t.url}/graphql?query=${query}`, {
        headers: { accept: 'application/json', 'x-api-key': alice.apiKey },
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ data: { me: { username: alice.username } } });
    });

    it('refuses mutations sent with GET', async () => {
      const query = encodeURIComponent('mutation { deleteApiKey(apiKey: "pk_x") }');
      const response = await fetch(`${t.url}/graphql?query=${query}`, {
        headers: { accept: 'application/json', 'x-api-key': alice.apiKey },
      });
      expect(response.status).toBe(405);
      const me = await t.rest('GET', '/v2/creators/me', { key: alice.apiKey });
      expect(me.status).toBe(200);
    });
  });

  describe('GraphQL over SSE (graphql-sse)', () => {
    let t: TestApp;
    let alice: TestUser;
    const subscription = 'subscription ($id: ID!) { sessionEvents(sessionId: $id) { __typename seq } }';

    beforeAll(async () => {
      t = app;
      alice = await t.createUser('alice-sse');
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
});

describe('persisted-queries', () => {
  /**
   * Automatic persisted queries as Apollo's clients speak them: the hash alone first, the query
   * with its hash when the server does not know it, the hash alone from then on; over POST and GET.
   */
  let t: TestApp;
  let alice: TestUser;

  beforeAll(async () => {
    t = app;
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
});

describe('batching', () => {
  const CreationsWithRelations = graphql(`
  query CreationsWithRelations($first: Int!) {
    me {
      creations(first: $first) {
        edges {
          node {
            id
            name
            likedByMe
            creator { username }
            agent { key owner { username } }
          }
        }
      }
    }
  }
`);

  const AgentsWithOwners = graphql(`
  query AgentsWithOwners {
    me {
      agents(first: 100) {
        edges { node { key owner { username } creator { username } } }
      }
    }
  }
`);

  const TasksWithRelations = graphql(`
  query TasksWithRelations($first: Int!) {
    tasks(first: $first) {
      edges { node { rawId status args result owner { username } agent { key owner { username } } outputs { url task { rawId } } } }
    }
  }
`);

  /**
   * Relations resolve through Prisma's relation loading and per-request DataLoaders, so the
   * number of SQL statements must not grow with the number of rows.
   */
  describe('query batching', () => {
    let t: TestApp;
    let alice: TestUser;

    beforeAll(async () => {
      t = app;
      alice = await t.createUser('alice-batching');
    });

    async function statementsFor<R, V>(document: TypedDocumentNode<R, V>, variables?: V) {
      let result: GraphQLResponse<R> | undefined;
      const count = await t.countQueries(async () => {
        result = await t.gql(document as TypedDocumentNode<R, Record<string, never>>, variables as Record<string, never>, alice.apiKey);
      });
      expect(result!.errors).toBeUndefined();
      return { count, data: result!.data! };
    }

    it('50 creations with creator and agent cost the same number of statements as 5', async () => {
      const f = fixtures(t);
      const agents = [await f.agent(alice), await f.agent(alice)];
      for (let i = 0; i < 5; i++) await f.creation(alice, { agentId: agents[i % 2]!.id });
      const small = await statementsFor(CreationsWithRelations, { first: 50 });
      expect(small.data.me.creations.edges).toHaveLength(5);

      for (let i = 0; i < 45; i++) await f.creation(alice, { agentId: agents[i % 2]!.id });
      const large = await statementsFor(CreationsWithRelations, { first: 50 });
      expect(large.data.me.creations.edges).toHaveLength(50);
      expect(
        large.data.me.creations.edges.every(
          (e) => e.node.creator.username === alice.username && e.node.agent?.owner.username === alice.username,
        ),
      ).toBe(true);

      expect(large.count).toBe(small.count);
      // auth, me, creations, then one per relation level and one for likedByMe.
      expect(large.count).toBeLessThanOrEqual(8);
    });

    it('me { agents { owner { username } } } is a fixed number of statements', async () => {
      const f = fixtures(t);
      const small = await statementsFor(AgentsWithOwners);
      for (let i = 0; i < 30; i++) await f.agent(alice);
      const large = await statementsFor(AgentsWithOwners);
      expect(large.data.me.agents.edges.length).toBe(small.data.me.agents.edges.length + 30);
      expect(large.count).toBe(small.count);
    });

    it('50 tasks with owner, agent and outputs cost the same statements as 5, on GraphQL and on REST', async () => {
      const f = fixtures(t);
      const agent = await f.agent(alice);
      const addTasks = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const task = await t.db.task.create({
            data: { userId: alice.id, agentId: agent.id, tool: 'flux_dev', args: { prompt: `p${i}` }, status: 'completed', result: { i } },
          });
          await t.db.creation.create({
            data: { userId: alice.id, taskId: task.id, tool: 'flux_dev', name: `c${i}`, url: `https://cdn.example.com/${i}.png` },
          });
        }
      };
      await addTasks(5);
      const small = await statementsFor(TasksWithRelations, { first: 50 });
      const smallRest = await t.countQueries(() => t.rest('GET', '/v2/tasks?limit=50', { key: alice.apiKey }));
      await addTasks(45);
      const large = await statementsFor(TasksWithRelations, { first: 50 });
      expect(large.data.tasks.edges).toHaveLength(50);
      expect(large.data.tasks.edges.every((e) => e.node.outputs.length === 1 && e.node.agent?.owner.username === alice.username)).toBe(
        true,
      );
      expect(large.count).toBe(small.count);
      const largeRest = await t.countQueries(async () => {
        const res = await t.rest('GET', '/v2/tasks?limit=50', { key: alice.apiKey });
        expect(res.body.docs).toHaveLength(50);
      });
      expect(largeRest).toBe(smallRest);
      // auth, the page, its bounded fields, then one per relation level (owner, agent, its owner, outputs).
      expect(large.count).toBeLessThanOrEqual(9);
    });
  });
});

describe('websocket', () => {
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

  beforeAll(async () => {
    t = app;
    alice = await t.createUser('alice-ws');
    bob = await t.createUser('bob-ws');
  });
  afterEach(() => ws.disposeAll());
  afterAll(async () => {
    await ws.disposeAll();
  });

  describe('GraphQL over graphql-ws', () => {
    it('a query over the socket runs as the key in connectionParams', async () => {
      const result = await wsExecute(ws.connect(alice.apiKey), WsMe);
      expect(result.errors).toBeUndefined();
      expect(result.data).toEqual({ me: { rawId: alice.id, username: alice.username, type: 'USER' } });
    });

    it('the key is also accepted as x-api-key or apiKey', async () => {
      expect((await wsExecute(ws.connect(bob.apiKey, { paramName: 'x-api-key' }), WsMe)).data?.me.username).toBe(bob.username);
      expect((await wsExecute(ws.connect(bob.apiKey, { paramName: 'apiKey' }), WsMe)).data?.me.username).toBe(bob.username);
    });

    it('two sockets with different keys each see their own user, several operations per socket', async () => {
      const a = ws.connect(alice.apiKey);
      const b = ws.connect(bob.apiKey);
      const results = await Promise.all([wsExecute(a, WsMe), wsExecute(b, WsMe), wsExecute(a, WsMe), wsExecute(b, WsMe)]);
      expect(results.map((r) => r.data?.me.username)).toEqual([alice.username, bob.username, alice.username, bob.username]);
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
});
