import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients } from '../helpers/graphql-ws.ts';
import { setUp } from '../helpers/set-up.ts';
import { postRaw } from '../graphql/support.ts';

/**
 * Free-form JSON nested far deeper than any real input, as one client can send it: a list in a
 * list 20,000 times is 40 kB of body. Every walk of it that recurses (serialising, measuring,
 * storing, parsing a GraphQL document) overflowed the stack and answered 500. Each input that
 * takes free-form JSON refuses it first, with a 400 naming the limit, and keeps nothing.
 */
let t: TestApp;
let alice: TestUser;
const ws = graphqlWsClients(() => t.url);

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  await t.services.manna.grant(alice.username, '100', 'forever');
});
afterAll(() => ws.disposeAll());

/** A list within a list `levels` times, around 1, as JSON text (built as text: the test's own stringify would overflow). */
const nestedList = (levels: number) => `${'['.repeat(levels)}1${']'.repeat(levels)}`;
/** The same as a GraphQL literal. */
const nestedObject = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
const DEEP = 20_000;
/** The limits, as docs/security.md states them: free-form JSON, a whole body, a GraphQL document's brackets. */
const MAX_JSON_DEPTH = 32;
const MAX_BODY_DEPTH = 64;
const MAX_DOCUMENT_NESTING = 64;
const fieldLimit = new RegExp(`must not nest objects and lists more than ${MAX_JSON_DEPTH} levels deep`);
const bodyLimit = `The request body nests objects and lists more than ${MAX_BODY_DEPTH} levels deep`;

const post = (path: string, json: string, key: string | null = alice.apiKey) =>
  t.rest('POST', path, { key, rawBody: json, headers: { 'content-type': 'application/json' } });
const balance = async () => (await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance;

// Where free-form JSON is refused without the app (a tool call's arguments, a line of a search
// import) is test/domain/json-depth.test.ts's; here, what each route and GraphQL answer.
describe('task arguments nested too deep', () => {
  it.each(['/v2/tasks/create', '/v2/tasks/cost'])('on %s are a 400 naming the limit, and nothing is made or held', async (path) => {
    const before = { tasks: await t.db.task.count(), balance: await balance() };
    // Far past any body's depth: refused as the body is read.
    const deep = await post(path, `{"tool":"flux_dev","args":{"prompt":${nestedList(DEEP)}}}`);
    expect(deep).toMatchObject({ status: 400, body: { error: 'Bad Request', message: bodyLimit } });
    // Within a body's depth but past the arguments': refused naming them.
    const past = await post(path, `{"tool":"flux_dev","args":{"prompt":${nestedList(MAX_JSON_DEPTH)}}}`);
    expect(past.status, JSON.stringify(past.body)).toBe(400);
    expect(past.body.error).toMatch(new RegExp(`^args: ${fieldLimit.source}$`));
    // At the limit, the depth is no objection: the tool's own rule for the prompt speaks.
    const within = await post(path, `{"tool":"flux_dev","args":{"prompt":${nestedList(MAX_JSON_DEPTH - 1)}}}`);
    expect(within.status).toBe(400);
    expect(within.body.error).toMatch(/^args\.prompt: must be text/);
    expect({ tasks: await t.db.task.count(), balance: await balance() }).toEqual(before);
  });
});

describe('every route that reads a JSON body', () => {
  it('answers a body nested 20,000 deep with a 400 naming the limit, never a 5xx', async () => {
    const agent = await fixtures(t).agent(alice);
    const writing = t.routes.flatMap(({ method, url }) =>
      [method]
        .flat()
        .filter((m) => m === 'POST' || m === 'PATCH' || m === 'PUT')
        .map((m) => ({ method: m, url })),
    );
    expect(writing.length).toBeGreaterThan(20);
    for (const { method, url } of writing) {
      const path = url.replace(/:[A-Za-z]+/g, (name) => (name === ':agentId' || name === ':id' ? agent.id : 'x'));
      const res = await t.rest(method, path, {
        key: alice.apiKey,
        rawBody: `{"config":${nestedList(DEEP)},"args":${nestedList(DEEP)}}`,
        headers: { 'content-type': 'application/json' },
      });
      expect({ route: `${method} ${url}`, status: res.status, said: JSON.stringify(res.body).includes(bodyLimit) }).toEqual({
        route: `${method} ${url}`,
        status: 400,
        said: true,
      });
    }
  });

  it('takes a deployment config and agent tools nested deep no further than the body', async () => {
    const agent = await fixtures(t).agent(alice);
    const deploy = await post(`/v2/agents/${agent.id}/deployments`, `{"platform":"telegram","config":{"telegram":${nestedList(DEEP)}}}`);
    expect(deploy).toMatchObject({ status: 400, body: { error: 'Bad Request', message: bodyLimit } });
    const tools = await t.rest('PATCH', `/v2/agents/${agent.id}`, {
      key: alice.apiKey,
      rawBody: `{"tools":${nestedObject(DEEP)}}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(tools.status).toBe(400);
    expect(JSON.stringify(tools.body)).toContain(bodyLimit);
    expect(await t.db.deployment.count({ where: { agentId: agent.id } })).toBe(0);
  });
});

describe('GraphQL JSON arguments nested too deep', () => {
  const estimate = `query Estimate($args: JSON) { estimateTaskCost(tool: "flux_dev", args: $args) }`;

  it('a literal list nested 2,000 deep, under the token limit and sent with no key, is refused before it is parsed', async () => {
    // 4,001 tokens: under the limit of 5,000.
    const res = await postRaw(t, { query: `{ estimateTaskCost(tool: "flux_dev", args: {prompt: ${nestedList(2_000)}}) }` }, null);
    expect(res.status).toBe(400);
    expect(res.json.errors).toEqual([
      {
        message: `Nesting limit of ${MAX_DOCUMENT_NESTING} exceeded: braces, brackets and parentheses nest deeper.`,
        extensions: { code: 'NESTING_LIMIT_EXCEEDED' },
      },
    ]);
  });

  it('a literal or a variable past the JSON limit is refused naming it; at the limit it reaches the tool’s rules', async () => {
    const literal = await postRaw(
      t,
      { query: `{ estimateTaskCost(tool: "flux_dev", args: {prompt: ${nestedList(MAX_JSON_DEPTH)}}) }` },
      alice.apiKey,
    );
    expect(literal.json.errors[0].message).toMatch(fieldLimit);
    const variable = await postRaw(
      t,
      `{"query":${JSON.stringify(estimate)},"variables":{"args":{"prompt":${nestedList(MAX_JSON_DEPTH)}}}}`,
      alice.apiKey,
    );
    expect(variable.status).toBe(400);
    expect(variable.json.errors[0].message).toMatch(fieldLimit);
    const within = await postRaw(
      t,
      `{"query":${JSON.stringify(estimate)},"variables":{"args":{"prompt":${nestedList(MAX_JSON_DEPTH - 2)}}}}`,
      alice.apiKey,
    );
    expect(within.json.errors[0]).toMatchObject({ message: expect.stringMatching(/must be text/), extensions: { code: 'BAD_USER_INPUT' } });
    const body = await postRaw(t, `{"query":${JSON.stringify(estimate)},"variables":{"args":${nestedList(DEEP)}}}`, alice.apiKey);
    expect(body.status).toBe(400);
    expect(body.text).toContain(bodyLimit);
  });

  it('over graphql-ws, where no body parser stands first: a deep document or variable is refused and the socket goes on', async () => {
    const client = ws.connect(alice.apiKey);
    const run = (query: string, variables?: Record<string, unknown>) =>
      new Promise<{ errors?: { message: string; extensions?: { code?: string } }[]; data?: unknown }>((resolve) => {
        let result: { errors?: { message: string }[]; data?: unknown } = {};
        client.subscribe(
          { query, variables },
          {
            next: (r) => (result = r as typeof result),
            error: (errors) => resolve({ errors: errors as never }),
            complete: () => resolve(result),
          },
        );
      });
    const document = await run(`{ estimateTaskCost(tool: "flux_dev", args: {prompt: ${nestedList(2_000)}}) }`);
    expect(document.errors?.[0]?.extensions?.code).toBe('NESTING_LIMIT_EXCEEDED');
    // No client's JSON.stringify writes it: the message goes as text, over a socket of its own.
    const variable = await new Promise<string>((resolve, reject) => {
      const socket = new WebSocket(`${t.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
      socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { 'X-Api-Key': alice.apiKey } })));
      socket.on('message', (data) => {
        const message = JSON.parse(String(data));
        if (message.type === 'connection_ack')
          socket.send(
            `{"id":"1","type":"subscribe","payload":{"query":${JSON.stringify(estimate)},"variables":{"args":{"prompt":${nestedList(DEEP)}}}}}`,
          );
        else if (message.type === 'next' || message.type === 'error') {
          resolve(String(data));
          socket.close();
        }
      });
      socket.on('error', reject);
    });
    expect(variable).toMatch(fieldLimit);
    expect(await run('{ me { username } }')).toEqual({ data: { me: { username: 'alice' } } });
  });
});
