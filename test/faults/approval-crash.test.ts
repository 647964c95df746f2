import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api-client.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { freshDatabaseEnv, runCli, startServerProcess, type ServerProcess } from '../helpers/process.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

/**
 * A reply waiting for its payer's approval survives SIGKILL: the process that paused it is
 * killed, a new process on the same data leaves the paused reply alone (start-up recovery closes
 * only replies a process was writing), and the payer's answer there runs the tool once, charged,
 * and the reply goes on to its end.
 */
describe('SIGKILL while a reply waits for approval', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let llm: FakeOpenAI;
  let tools: Awaited<ReturnType<typeof startFakeToolService>>;
  let env: Record<string, string>;
  let server: ServerProcess;
  let alice: ReturnType<typeof apiClient>;
  let sessionId = '';
  let callId = '';

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    llm = await startFakeOpenAI({ tokens: ['Done.'] });
    tools = await startFakeToolService({ answer: { result: { made: 'a kite' } } });
    const toolsDir = await toolRegistryWith({ paid_tool: httpTool('paid_tool', tools.url, 'n') });
    env = { ...db.env, LLM_BASE_URL: llm.baseUrl, TOOLS_DIR: toolsDir };
    const key = await runCli(['keys', 'create', 'alice', '--json'], env);
    await runCli(['manna', 'grant', 'alice', '10'], env);
    alice = apiClient(() => server.url, JSON.parse(key.stdout).apiKey);
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await llm?.close();
    await tools?.close();
    await db?.drop();
  });

  const balance = async () => (await alice.rest('GET', '/v2/creators/me')).body.balance as number;
  const lastReply = async () => (await alice.rest('GET', `/v2/sessions/${sessionId}`)).body.messages.at(-1);

  it('is killed while a reply waits for approval', async () => {
    llm.choose((r) => {
      const last = r.body.messages.at(-1);
      if (last?.role === 'user' && last.content === 'fly a kite')
        return { tokens: ['Building it.'], toolCalls: [{ id: 'call_1', name: 'paid_tool', arguments: '{"prompt":"a kite","n":3}' }] };
      if (last?.role === 'tool') return { tokens: [' It flies.'] };
      return undefined;
    });
    const agent = await alice.rest('POST', '/v2/agents', {
      name: 'Kiter',
      key: 'kiter',
      tools: { paid_tool: true },
      tool_approval: { tools: { paid_tool: 'always' } },
    });
    expect(agent.status, JSON.stringify(agent.body)).toBe(201);
    const sent = await alice.rest('POST', '/v2/sessions', { agent_ids: [agent.body.agentId], content: 'fly a kite' });
    sessionId = sent.body.session_id;
    await expect.poll(async () => (await lastReply())?.tool_calls?.[0]?.status).toBe('awaiting_approval');
    callId = (await lastReply()).tool_calls[0].id;
    server.child.kill('SIGKILL');
    await server.exited;
  });

  it('a new process keeps it waiting; approved there, the tool runs once, is charged, and the reply ends', async () => {
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
    expect(await lastReply()).toMatchObject({ status: 'streaming', tool_calls: [{ id: callId, status: 'awaiting_approval', cost: 3 }] });
    expect(await balance()).toBe(10);
    const approved = await alice.rest('POST', `/v2/sessions/${sessionId}/approvals/${callId}`, { approve: true });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    await expect.poll(async () => (await lastReply()).status).toBe('complete');
    expect(await lastReply()).toMatchObject({
      content: 'Building it. It flies.',
      tool_calls: [{ id: callId, status: 'completed', cost: 3, result: { made: 'a kite' } }],
    });
    expect(tools.calls).toHaveLength(1);
    expect(await balance()).toBe(7);
    expect(server.output()).not.toMatch(/"level":(50|60)/);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });
});
