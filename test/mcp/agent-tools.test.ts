import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { parse } from 'graphql';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type FakeOpenAI, isMemoryRequest, isTitleRequest, type RecordedRequest, type Script } from '../helpers/fake-openai.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { ledgerMismatches } from '../helpers/ledger.ts';
import { type McpToolServer, PNG_1x1, startMcpToolServer, startStuckServer } from '../helpers/mcp-tool-server.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient, updates } from '../helpers/sse.ts';

/**
 * Agents using the tools of their owner's MCP servers in replies, on the real app and database,
 * against the SDK's own McpServer on loopback: enabled beside registry tools (REST and GraphQL),
 * offered to the model as `<server>__<tool>` with their JSON Schemas, each call checked against
 * its input schema, held and charged (or refunded) as any tool, its progress live on the
 * session's watchers, its images kept as creations, and every failure (the tool's, the server's,
 * a hang) told to the model while the reply ends with its end frame.
 */
const TOKEN = 'Bearer agent-tools-7c1e';
const TIMEOUT_MS = 1_500;
const PRICE = 2;
let t: TestApp;
let llm: FakeOpenAI;
let tools: McpToolServer;
let stuck: Awaited<ReturnType<typeof startStuckServer>>;
let alice: TestUser;
let bob: TestUser;
let serverId: string;
let agentId: string;
const ws = graphqlWsClients(() => t.url);
const streams: SseClient[] = [];

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  tools = await start.service(startMcpToolServer({ authorization: TOKEN }));
  stuck = await start.service(startStuckServer());
  // The server is on loopback, over http: what an operator allows for tests and private networks.
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, outbound: { allowHttp: true, allowPrivate: true }, mcp: { timeoutMs: TIMEOUT_MS } });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  await t.services.manna.grant('alice', '50', 'forever');
  const server = await t.rest('POST', '/v2/mcp/servers', {
    key: alice.apiKey,
    body: { name: 'loop', url: tools.url, headers: { authorization: TOKEN }, price_per_call: PRICE },
  });
  serverId = server.body.server.id;
  const enabled = ['echo', 'paced', 'fail', 'snapshot', 'hang'].map((tool) => ({ server_id: serverId, tool }));
  const agent = await t.rest('POST', '/v2/agents', {
    key: alice.apiKey,
    body: { name: 'Toolsmith', key: 'toolsmith', public: true, mcp_tools: enabled },
  });
  expect(agent.status, JSON.stringify(agent.body)).toBe(201);
  agentId = agent.body.agentId;
});
afterAll(async () => {
  for (const s of streams) s.close();
  await ws.disposeAll();
});

/** Each reply request asks for the call its prompt names, once; after the tool's result, the model answers. */
function modelCalls(name: string, args: unknown) {
  llm.reset();
  llm.choose((request: RecordedRequest): Script | undefined => {
    if (isTitleRequest(request) || isMemoryRequest(request)) return undefined;
    if (request.body.messages.at(-1)?.role === 'tool') return { tokens: ['Done.'] };
    return { toolCalls: [{ id: 'call-1', name, arguments: JSON.stringify(args) }] };
  });
}

/** Sends a prompt to the agent and streams its replies over REST (SSE) until the end frame. */
async function send(content: string) {
  const s = await openSse(`${t.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, agent_ids: [agentId], content }),
  });
  streams.push(s);
  expect(s.status).toBe(200);
  return s;
}

const balance = async () => (await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance as number;
const ledgerRows = (taskId: string) => t.db.mannaLedger.findMany({ where: { taskId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
/** What the model was told of the call: the tool message of its next request. */
const toldModel = () =>
  JSON.parse(
    llm
      .replyRequests()
      .at(-1)!
      .body.messages.find((m) => m.role === 'tool' && m.tool_call_id === 'call-1')!.content!,
  );
const completed = (frames: ReturnType<typeof updates>) => frames.find((f) => f.type === 'tool_complete')!.tool_call;

describe('enabling MCP tools on an agent', () => {
  it('shows them to the owner only, and refuses a server id that is not the owner’s own with 400 naming it, changing nothing', async () => {
    const shown = await t.rest('GET', `/v2/agents/${agentId}`, { key: alice.apiKey });
    expect(shown.body.agent.mcp_tools).toHaveLength(5);
    expect(shown.body.agent.mcp_tools).toContainEqual({ server_id: serverId, tool: 'paced', function_name: 'loop__paced' });
    expect((await t.rest('GET', `/v2/agents/${agentId}`, { key: bob.apiKey })).body.agent.mcp_tools).toBeNull();

    const bobs = await t.rest('POST', '/v2/mcp/servers', { key: bob.apiKey, body: { name: 'mine', url: tools.url } });
    const strangers = bobs.body.server.id;
    const refused = await t.rest('PATCH', `/v2/agents/${agentId}`, {
      key: alice.apiKey,
      body: {
        mcp_tools: [
          { server_id: serverId, tool: 'echo' },
          { server_id: strangers, tool: 'echo' },
        ],
      },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe(`mcp_tools[1].server_id: MCP server ${strangers} not found among yours`);
    expect((await t.rest('GET', `/v2/agents/${agentId}`, { key: alice.apiKey })).body.agent.mcp_tools).toHaveLength(5);
    // Bob cannot put his server on an agent of his either through GraphQL unless it is his: hers is refused to him.
    const viaGraphQL = await t.gql(
      parse(
        'mutation($input: CreateAgentInput!) { createAgent(input: $input) { key mcpTools { tool server { name } } } }',
      ) as TypedDocumentNode<any, Record<string, unknown>>,
      { input: { name: 'Borrower', key: 'borrower', mcpTools: [{ serverId, tool: 'echo' }] } },
      bob.apiKey,
    );
    expect(viaGraphQL.errors?.[0]).toMatchObject({
      message: `mcpTools[0].serverId: MCP server ${serverId} not found among yours`,
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect(await t.db.agent.count({ where: { ownerId: bob.id } })).toBe(0);
    const own = await t.gql(
      parse(
        'mutation($input: CreateAgentInput!) { createAgent(input: $input) { key mcpTools { tool server { name } } } }',
      ) as TypedDocumentNode<any, Record<string, unknown>>,
      { input: { name: 'Own', key: 'own-tools', mcpTools: [{ serverId: strangers, tool: 'echo' }] } },
      bob.apiKey,
    );
    expect(own.data.createAgent).toEqual({ key: 'own-tools', mcpTools: [{ tool: 'echo', server: { name: 'mine' } }] });
    // Deleting the server takes its tools off the agents that had them.
    expect((await t.rest('DELETE', `/v2/mcp/servers/${strangers}`, { key: bob.apiKey })).status).toBe(200);
    const after = await t.gql(
      parse('query($id: ID!) { agent(id: $id) { mcpTools { tool } } }') as TypedDocumentNode<any, Record<string, unknown>>,
      { id: (await t.db.agent.findFirstOrThrow({ where: { ownerId: bob.id } })).id },
      bob.apiKey,
    );
    expect(after.data.agent.mcpTools).toEqual([]);
  });
});

describe('a reply calling MCP tools', () => {
  it('offers them as <server>__<tool> with their JSON Schemas, and shows a call’s progress live on REST and GraphQL watchers', async () => {
    modelCalls('loop__paced', { label: 'x' });
    const before = await balance();
    const s = await send('call paced');
    const started = await s.waitFor((f) => f.data?.data?.type === 'start_prompt');
    const sessionId = started.data.data.session_id;
    const watcher = wsSubscribe(
      ws.connect(alice.apiKey),
      parse(
        'subscription($id: ID!) { sessionEvents(sessionId: $id) { __typename ... on ToolProgress { tool progress message toolCallId } } }',
      ) as TypedDocumentNode<any, Record<string, unknown>>,
      { id: sessionId },
    );
    await expect.poll(() => t.services.bus.subscriberCount()).toBeGreaterThanOrEqual(2);
    // Half way, the tool waits to be released: what the watchers have seen came while it ran.
    const half = await s.waitFor((f) => f.data?.data?.type === 'tool_progress');
    expect(half.data.data).toMatchObject({ tool: 'loop__paced', progress: 0.5, message: 'half way', agent: agentId });
    const running = await t.db.task.findUniqueOrThrow({ where: { id: half.data.data.tool_call_id } });
    expect(running.status).toBe('running');
    expect(await balance()).toBe(before - PRICE);
    tools.release();
    const live = await watcher.waitFor((r) => r.data?.sessionEvents.__typename === 'ToolProgress' && r.data.sessionEvents.progress === 1);
    expect(live.data!.sessionEvents).toMatchObject({ tool: 'loop__paced', message: 'done', toolCallId: half.data.data.tool_call_id });
    const frames = updates(await s.done);
    expect(frames.at(-1)?.type).toBe('end_prompt');
    const types = frames.map((f) => f.type);
    expect(types.indexOf('tool_progress')).toBeLessThan(types.indexOf('tool_complete'));
    expect(completed(frames)).toMatchObject({
      tool: 'loop__paced',
      status: 'completed',
      cost: PRICE,
      result: { text: 'paced to the end' },
    });
    watcher.unsubscribe();

    const offered = llm.replyRequests()[0]!.body.tools as { function: { name: string; parameters: any } }[];
    expect(offered.map((f) => f.function.name).sort()).toEqual(['loop__echo', 'loop__fail', 'loop__hang', 'loop__paced', 'loop__snapshot']);
    expect(offered.find((f) => f.function.name === 'loop__echo')!.function.parameters).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string', maxLength: 200 } },
      required: ['text'],
    });
    expect(toldModel()).toEqual({ text: 'paced to the end' });
    expect(await balance()).toBe(before - PRICE);
    expect((await ledgerRows(half.data.data.tool_call_id)).map((r) => r.amount.toNumber())).toEqual([-PRICE]);
    expect(await ledgerMismatches(t.db)).toEqual([]);
  });

  it('tells the model a tool’s failure with its reason, gives the hold back, and ends the reply', async () => {
    modelCalls('loop__fail', {});
    const before = await balance();
    const frames = updates(await (await send('call fail')).done);
    expect(frames.at(-1)?.type).toBe('end_prompt');
    const call = completed(frames);
    expect(call).toMatchObject({ status: 'failed', error: 'The tool fail failed: the tool failed on purpose' });
    expect(toldModel()).toEqual({ error: 'The tool fail failed: the tool failed on purpose' });
    expect(frames.find((f) => f.type === 'assistant_message' && f.content === 'Done.')).toBeDefined();
    expect(await balance()).toBe(before);
    expect((await ledgerRows(call.id)).map((r) => r.amount.toNumber())).toEqual([-PRICE, PRICE]);
    expect(await ledgerMismatches(t.db)).toEqual([]);
  });

  it('keeps an image a tool returns as a creation of the user, served from the media folder, and charges the call', async () => {
    modelCalls('loop__snapshot', {});
    const before = await balance();
    const frames = updates(await (await send('call snapshot')).done);
    expect(frames.at(-1)?.type).toBe('end_prompt');
    const call = completed(frames);
    expect(call).toMatchObject({ status: 'completed', cost: PRICE, result: { text: 'a picture', images: [expect.any(Object)] } });
    const [image] = call.result.images as { creationId: string; url: string }[];
    const creation = await t.db.creation.findUniqueOrThrow({ where: { id: image!.creationId } });
    expect(creation).toMatchObject({ userId: alice.id, agentId, tool: 'loop__snapshot' });
    const file = await fetch(image!.url);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await file.arrayBuffer())).toEqual(Buffer.from(PNG_1x1, 'base64'));
    expect(toldModel()).toMatchObject({ text: 'a picture', images: [{ creationId: image!.creationId }] });
    expect(await balance()).toBe(before - PRICE);
    expect(await ledgerMismatches(t.db)).toEqual([]);
  });

  it('fails a call the server does not answer at the timeout, with the reason, refunds it, and ends the reply with its end frame', async () => {
    modelCalls('loop__hang', {});
    const before = await balance();
    const frames = updates(await (await send('call hang')).done);
    expect(frames.at(-1)?.type).toBe('end_prompt');
    const call = completed(frames);
    expect(call).toMatchObject({ status: 'failed', error: `The MCP server loop failed: no answer within ${TIMEOUT_MS} ms` });
    expect(toldModel()).toEqual({ error: `The MCP server loop failed: no answer within ${TIMEOUT_MS} ms` });
    // The SDK told the server the call was given up: its handler stopped.
    await expect.poll(() => tools.hanging()).toBe(0);
    expect(await balance()).toBe(before);
    expect((await ledgerRows(call.id)).map((r) => r.amount.toNumber())).toEqual([-PRICE, PRICE]);
    expect(await ledgerMismatches(t.db)).toEqual([]);
  });

  it('starts without the tools of a server that hangs, and asks it only once for the replies that follow', async () => {
    const server = await t.rest('POST', '/v2/mcp/servers', { key: alice.apiKey, body: { name: 'stuck', url: stuck.url } });
    const agent = await t.rest('POST', '/v2/agents', {
      key: alice.apiKey,
      body: {
        name: 'Patient',
        key: 'patient',
        mcp_tools: [
          { server_id: server.body.server.id, tool: 'anything' },
          { server_id: serverId, tool: 'echo' },
        ],
      },
    });
    expect(agent.status, JSON.stringify(agent.body)).toBe(201);
    llm.reset();
    for (const content of ['first while it hangs', 'second while it hangs']) {
      const s = await openSse(`${t.url}/v2/sessions`, {
        method: 'POST',
        headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ stream: true, agent_ids: [agent.body.agentId], content }),
      });
      streams.push(s);
      const frames = updates(await s.done);
      expect(frames.at(-1)?.type).toBe('end_prompt');
      expect(frames.find((f) => f.type === 'assistant_message')?.content).toBe('Done.');
    }
    const offered = llm.replyRequests().map((r) => (r.body.tools as { function: { name: string } }[]).map((f) => f.function.name));
    expect(offered).toEqual([['loop__echo'], ['loop__echo']]);
    expect(stuck.asked()).toBe(1);
  });

  it('refuses a call whose arguments break the input schema before anything is held or sent, and tells the model why', async () => {
    modelCalls('loop__echo', { text: 42 });
    const before = await balance();
    const frames = updates(await (await send('call echo badly')).done);
    expect(frames.at(-1)?.type).toBe('end_prompt');
    const call = completed(frames);
    expect(call.status).toBe('failed');
    expect(call.error).toMatch(/^The arguments do not fit the tool's input schema: .*text.* must be string/);
    expect(toldModel()).toEqual({ error: call.error });
    expect(await ledgerRows(call.id)).toEqual([]);
    expect(await balance()).toBe(before);
    expect(await ledgerMismatches(t.db)).toEqual([]);
  });
});

describe('approvals of MCP tools', () => {
  const patchAgent = (body: unknown, key = alice.apiKey) => t.rest('PATCH', `/v2/agents/${agentId}`, { key, body });
  afterAll(async () => {
    await patchAgent({ tool_approval: { tools: {} } });
  });

  it('are written under the name the model calls the tool, on a server of the owner’s, and shown with it on GraphQL', async () => {
    const set = await patchAgent({ tool_approval: { tools: { loop__echo: 'always' }, timeout_seconds: 60 } });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.agent.tool_approval).toEqual({ tools: { loop__echo: 'always' }, timeout_seconds: 60 });
    const bobs = await t.rest('POST', '/v2/mcp/servers', { key: bob.apiKey, body: { name: 'bobs', url: tools.url } });
    expect(bobs.status).toBe(201);
    for (const key of ['bobs__echo', 'nowhere__echo']) {
      const refused = await patchAgent({ tool_approval: { tools: { [key]: 'always' } } });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toBe(
        `tool_approval.tools.${key}: unknown tool "${key}" (see the tools list; an MCP tool is named <server>__<tool>, on a server of yours)`,
      );
    }
    expect((await t.rest('GET', `/v2/agents/${agentId}`, { key: alice.apiKey })).body.agent.tool_approval.tools).toEqual({
      loop__echo: 'always',
    });
    const shown = await t.gql(
      parse('query($id: ID!) { agent(id: $id) { mcpTools { functionName tool } } }') as TypedDocumentNode<any, Record<string, unknown>>,
      { id: agentId },
      alice.apiKey,
    );
    expect(shown.data.agent.mcpTools).toContainEqual({ functionName: 'loop__echo', tool: 'echo' });
  });

  it('pause a reply at the call before anything is sent to the server or held; approved, it runs once and is charged', async () => {
    modelCalls('loop__echo', { text: 'only if you say so' });
    const before = await balance();
    const s = await send('call echo with care');
    const requested = (await s.waitFor((f) => f.data?.data?.type === 'tool_approval_requested')).data.data;
    expect(requested.tool_call).toMatchObject({ tool: 'loop__echo', status: 'awaiting_approval', cost: PRICE, approval: 'requested' });
    expect(tools.echoed).not.toContain('only if you say so');
    expect(await balance()).toBe(before);

    const approved = await t.rest('POST', `/v2/sessions/${requested.session_id}/approvals/${requested.tool_call.id}`, {
      key: alice.apiKey,
      body: { approve: true },
    });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    const frames = updates(await s.done);
    expect(frames.at(-1)?.type).toBe('end_prompt');
    expect(completed(frames)).toMatchObject({ tool: 'loop__echo', status: 'completed', approval: 'approved', cost: PRICE });
    expect(tools.echoed.filter((text) => text === 'only if you say so')).toHaveLength(1);
    expect(toldModel()).toEqual({ text: 'echo: only if you say so' });
    expect(await balance()).toBe(before - PRICE);
    expect(await ledgerMismatches(t.db)).toEqual([]);
  });

  it('denied, the server is never called and nothing is charged; a rename that would let calls run unasked is refused', async () => {
    modelCalls('loop__echo', { text: 'never sent' });
    const before = await balance();
    const s = await send('call echo, to be denied');
    const requested = (await s.waitFor((f) => f.data?.data?.type === 'tool_approval_requested')).data.data;
    const denied = await t.rest('POST', `/v2/sessions/${requested.session_id}/approvals/${requested.tool_call.id}`, {
      key: alice.apiKey,
      body: { approve: false, reason: 'not today' },
    });
    expect(denied.status).toBe(200);
    expect(updates(await s.done).at(-1)?.type).toBe('end_prompt');
    expect(tools.echoed).not.toContain('never sent');
    expect(await balance()).toBe(before);

    const renamed = await t.rest('PATCH', `/v2/mcp/servers/${serverId}`, { key: alice.apiKey, body: { name: 'loopy' } });
    expect(renamed.status).toBe(409);
    expect(renamed.body.error).toBe(
      "The approval rules of your agents name this server's tools by its name: Toolsmith (loop__echo). Change those rules first, or their calls would run without asking",
    );
    expect((await t.rest('GET', `/v2/mcp/servers/${serverId}`, { key: alice.apiKey })).body.server.name).toBe('loop');
  });
});
