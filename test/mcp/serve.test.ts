import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { searchableCreation } from '../search/support.ts';

/**
 * parley's `/mcp` as an MCP client sees it: the official SDK's own client over Streamable HTTP
 * against the real app on loopback, each tool compared with what REST answers for the same call.
 */
let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let bob: TestUser;
let scribe: string;
let diary: string;
let secret: string;
const clients: Client[] = [];

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hello', ' from', ' MCP'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, mcp: { maxSessionsPerKey: 3 } });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  const f = fixtures(t);
  scribe = (await f.agent(alice, { name: 'Scribe', key: 'scribe' })).id;
  diary = (await f.agent(alice, { name: 'Diary', key: 'diary', public: false })).id;
  secret = (await f.agent(bob, { name: 'Secret', key: 'secret', public: false })).id;
});
/** Each test's sessions are ended as a client leaving would (DELETE /mcp), so that none counts against the next test's key. */
const endSessions = async () => {
  for (const c of clients.splice(0)) {
    await (c.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => {});
    await c.close().catch(() => {});
  }
};
afterEach(endSessions);
afterAll(endSessions);

const transport = (headers: Record<string, string>) =>
  new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers } });

async function connect(key: string, how: 'x-api-key' | 'bearer' = 'x-api-key') {
  const client = new Client({ name: 'parley-test', version: '1.0.0' });
  clients.push(client);
  await client.connect(transport(how === 'bearer' ? { authorization: `Bearer ${key}` } : { 'x-api-key': key }));
  return client;
}

const call = async (client: Client, name: string, args: Record<string, unknown>, onprogress?: (p: { message?: string }) => void) =>
  (await client.callTool({ name, arguments: args }, undefined, onprogress ? { onprogress } : undefined)) as CallToolResult;
const textOf = (result: CallToolResult) => result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

/** A request of our own on a session, as any HTTP client would send it. */
const post = (key: string, sessionId: string, body: unknown) =>
  fetch(`${t.url}/mcp`, {
    method: 'POST',
    headers: {
      'x-api-key': key,
      'mcp-session-id': sessionId,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify(body),
  });

describe('/mcp: the tools', () => {
  it("lists the tools, and the agents the key's user may talk to: their own and public ones, never a stranger's private one", async () => {
    const client = await connect(alice.apiKey);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'estimate_task',
      'list_agents',
      'run_task',
      'search_creations',
      'talk_to_agent',
    ]);
    const mine = (await call(client, 'list_agents', {})).structuredContent as { agents: { id: string; yours: boolean }[] };
    expect(mine.agents.map((a) => a.id)).toEqual(expect.arrayContaining([scribe, diary]));
    expect(mine.agents.map((a) => a.id)).not.toContain(secret);
    expect(mine.agents.find((a) => a.id === diary)?.yours).toBe(true);
    const strangers = (await call(await connect(bob.apiKey), 'list_agents', {})).structuredContent as { agents: { id: string }[] };
    expect(strangers.agents.map((a) => a.id)).toEqual(expect.arrayContaining([scribe, secret]));
    expect(strangers.agents.map((a) => a.id)).not.toContain(diary);
  });

  it('talks to an agent: its tokens come as progress, its text is the result, and the session is the one REST shows', async () => {
    const client = await connect(alice.apiKey, 'bearer');
    const told: string[] = [];
    const result = await call(client, 'talk_to_agent', { agent_id: scribe, content: 'Hi there' }, (p) => told.push(p.message ?? ''));
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe('Hello from MCP');
    expect(told).toEqual(['Hello', ' from', ' MCP']);
    const { sessionId } = result.structuredContent as { sessionId: string };
    llm.enqueue({ tokens: ['Again', '.'] });
    const again = await call(client, 'talk_to_agent', { session_id: sessionId, content: 'And again' });
    expect(textOf(again)).toBe('Again.');
    const session = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
    expect(session.status).toBe(200);
    const contents = JSON.stringify(session.body);
    for (const text of ['Hi there', 'Hello from MCP', 'And again', 'Again.']) expect(contents).toContain(text);
  });

  it("refuses what REST refuses, with REST's message and nothing changed: a stranger's private agent, a session not theirs", async () => {
    const client = await connect(bob.apiKey);
    const viaRest = await t.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [diary], content: 'Let me in' } });
    expect(viaRest.status).toBeGreaterThanOrEqual(400);
    const refused = await call(client, 'talk_to_agent', { agent_id: diary, content: 'Let me in' });
    expect(refused.isError).toBe(true);
    const said = viaRest.body.error ?? viaRest.body.message;
    expect(said).toMatch(/^agent_ids\[0\]: /);
    expect(textOf(refused)).toBe(said.replace(/^agent_ids\[0\]/, 'agent_id'));
    const alices = await call(await connect(alice.apiKey), 'talk_to_agent', { agent_id: scribe, content: 'Mine' });
    const { sessionId } = alices.structuredContent as { sessionId: string };
    const intruding = await call(client, 'talk_to_agent', { session_id: sessionId, content: 'Mine now' });
    expect(intruding.isError).toBe(true);
    const session = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
    expect(JSON.stringify(session.body)).not.toContain('Mine now');
  });

  it("refuses arguments outside a tool's input schema before any domain call: nothing is sent, nothing is held", async () => {
    const client = await connect(alice.apiKey);
    const before = { sessions: await t.db.session.count(), tasks: await t.db.task.count() };
    for (const [name, args] of [
      ['talk_to_agent', { agent_id: scribe }],
      ['talk_to_agent', { agent_id: scribe, content: 42 }],
      ['run_task', { args: { seconds: 1 } }],
    ] as const) {
      const refused = await call(client, name, args);
      expect(refused.isError, `${name} ${JSON.stringify(args)}`).toBe(true);
      expect(textOf(refused)).toMatch(
        /^MCP error -32602: Input validation error: Invalid arguments for tool (talk_to_agent|run_task): .*at (content|tool)$/s,
      );
    }
    expect({ sessions: await t.db.session.count(), tasks: await t.db.task.count() }).toEqual(before);
  });

  it('searches creations as GET /v2/creations/search does', async () => {
    await searchableCreation(t, alice, { name: 'Lighthouse in a thunderstorm', prompt: 'a lighthouse in a thunderstorm, watercolor' });
    await searchableCreation(t, alice, { name: 'Fox reading under a streetlamp', prompt: 'a fox reading a book under a streetlamp' });
    await searchableCreation(t, bob, { name: 'Private lighthouse', prompt: 'a lighthouse at dawn', public: false });
    const found = await call(await connect(alice.apiKey), 'search_creations', { query: 'lighthouse storm', limit: 5 });
    const rest = await t.rest('GET', '/v2/creations/search?query=lighthouse%20storm&limit=5', { key: alice.apiKey });
    const names = (found.structuredContent as { creations: { name: string }[] }).creations.map((c) => c.name);
    expect(names[0]).toBe('Lighthouse in a thunderstorm');
    expect(names).not.toContain('Private lighthouse');
    expect(names).toEqual(rest.body.docs.map((d: { name: string }) => d.name));
  });

  it("estimates and runs a task as REST does: its cost held then charged in the ledger, its progress live, and a balance too small refused with REST's message", async () => {
    await t.services.manna.grant('alice', '10', 'forever');
    const client = await connect(alice.apiKey);
    const args = { seconds: 1, steps: 2 };
    const estimate = await call(client, 'estimate_task', { tool: 'countdown', args });
    const cost = (await t.rest('POST', '/v2/tasks/cost', { key: alice.apiKey, body: { tool: 'countdown', args } })).body.cost;
    expect(estimate.structuredContent).toEqual({ cost });
    const before = (await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance;
    const told: string[] = [];
    const ran = await call(client, 'run_task', { tool: 'countdown', args }, (p) => told.push(p.message ?? ''));
    expect(ran.isError).toBeFalsy();
    const { taskId, status } = ran.structuredContent as { taskId: string; status: string };
    expect(status).toBe('completed');
    expect(told.length).toBeGreaterThan(0);
    expect((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance).toBe(before - cost);
    expect((await t.rest('GET', `/v2/tasks/${taskId}`, { key: alice.apiKey })).body.task.status).toBe('completed');

    const poor = await connect(bob.apiKey);
    const viaRest = await t.rest('POST', '/v2/tasks/create', { key: bob.apiKey, body: { tool: 'countdown', args: { seconds: 600 } } });
    expect(viaRest.status).toBe(402);
    const refused = await call(poor, 'run_task', { tool: 'countdown', args: { seconds: 600 } });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe(viaRest.body.error);
  });
});

describe('/mcp: keys and sessions', () => {
  it('takes the key as X-Api-Key or Authorization: Bearer; none, or a wrong one, is 401', async () => {
    await expect(connect(alice.apiKey, 'bearer')).resolves.toBeDefined();
    const refused: Record<string, string>[] = [{}, { 'x-api-key': 'pk_wrong' }, { authorization: 'Bearer pk_wrong' }];
    for (const headers of refused) {
      const client = new Client({ name: 'parley-test', version: '1.0.0' });
      clients.push(client);
      await expect(client.connect(transport(headers))).rejects.toMatchObject({ code: 401 });
    }
  });

  it("a session stays with its key: a stranger's key (or none) does not find it", async () => {
    const client = await connect(alice.apiKey);
    const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId!;
    const listing = { jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} };
    expect((await post(alice.apiKey, sessionId, listing)).status).toBe(200);
    expect((await post(bob.apiKey, sessionId, listing)).status).toBe(404);
    expect((await post('pk_wrong', sessionId, listing)).status).toBe(401);
  });

  it('DELETE /mcp ends a session; a key holds at most MCP_MAX_SESSIONS_PER_KEY, refused past it with 429', async () => {
    const carol = await t.createUser('carol');
    const open = [await connect(carol.apiKey), await connect(carol.apiKey), await connect(carol.apiKey)];
    const extra = new Client({ name: 'parley-test', version: '1.0.0' });
    clients.push(extra);
    await expect(extra.connect(transport({ 'x-api-key': carol.apiKey }))).rejects.toMatchObject({
      code: 429,
      message: expect.stringContaining('Too many MCP sessions for this API key'),
    });
    const ended = open[0]!.transport as StreamableHTTPClientTransport;
    const sessionId = ended.sessionId!;
    await ended.terminateSession();
    expect((await post(carol.apiKey, sessionId, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} })).status).toBe(404);
    await expect(connect(carol.apiKey)).resolves.toBeDefined();
  });

  it('a key deleted mid-call ends its MCP sessions at once: the call under way fails, and the session is gone', async () => {
    const dave = await t.createUser('dave');
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    llm.enqueue({ tokens: ['First', ' and', ' never', ' more'], gate: (i) => (i === 0 ? undefined : held) });
    const client = await connect(dave.apiKey);
    const other = await connect(dave.apiKey);
    const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId!;
    // The idle session's event stream (the GET the client holds open) is closed by the server; the
    // client's attempt to open it again is refused, which it reports as an error.
    const otherStreamLost = new Promise<Error>((r) => (other.onerror = r));
    let firstToken = () => {};
    const streaming = new Promise<void>((r) => (firstToken = r));
    const calling = call(client, 'talk_to_agent', { agent_id: scribe, content: 'Go on' }, () => firstToken());
    const outcome = calling.then(
      (r) => ({ result: r }),
      (e: Error) => ({ error: e }),
    );
    await streaming;
    const deleted = await t.rest('DELETE', '/apikeys', { key: dave.apiKey, body: { apiKey: dave.apiKey } });
    expect(deleted.status).toBe(200);
    // The call ends while the reply is still held: nothing but the deletion could have ended it.
    // It is answered with the reason before its session closes, as a REST stream ends with its error frame.
    const ended = await outcome;
    release();
    expect(ended).toEqual({ result: expect.objectContaining({ isError: true }) });
    expect(textOf((ended as { result: CallToolResult }).result)).toBe('The API key of this stream was deleted');
    expect((await otherStreamLost).message).toMatch(/401|Unauthorized|Invalid API key/i);
    await expect(other.listTools()).rejects.toThrow();
    expect((await post(dave.apiKey, sessionId, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} })).status).toBe(401);
  });
});
