import { describe, expect, it, vi } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError, expectCleanErrors, postDocument, postRaw } from './support.ts';

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

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
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
