import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ABANDONED_REPLY } from '../../src/domain/replies/recovery.ts';
import { apiClient } from '../helpers/api-client.ts';
import { type FakeOpenAI, startFakeOpenAI } from '../helpers/fake-openai.ts';
import { freshDatabaseEnv, runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { until } from '../helpers/until.ts';

/**
 * A trigger run by hand whose reply is slow, its service killed with SIGKILL mid-reply, then
 * started again on the same data (a PGlite data dir, or PostgreSQL on CI's second lane): start-up
 * closes the reply as failed, and settles the run from it, so neither the run nor the trigger
 * says `running` until its time limit (900 s here) or a press of run-now.
 */
describe('a trigger run by hand over a SIGKILL', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let llm: FakeOpenAI;
  let env: Record<string, string>;
  let server: ServerProcess;
  let alice: ReturnType<typeof apiClient>;
  let path: string;
  let runId: string;

  const start = async () => {
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
  };
  const trigger = async () => (await alice.rest('GET', path)).body.trigger;

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    // The trigger's reply sends two pieces, then waits for ever: the process dies in the middle.
    llm = await startFakeOpenAI({ tokens: ['Half', ' an', ' answer'], gate: (i) => (i >= 2 ? new Promise<void>(() => {}) : undefined) });
    env = { ...db.env, LLM_BASE_URL: llm.baseUrl, TRIGGER_RUN_TIMEOUT_S: '900', REPLY_CHECKPOINT_MS: '100' };
    await start();
    const created = await runCli(['keys', 'create', 'alice', '--json'], env);
    alice = apiClient(() => server.url, JSON.parse(created.stdout).apiKey);
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await llm?.close();
    await db?.drop();
  });

  it('is killed while the reply of a run by hand is being written', async () => {
    const agent = await alice.graphql('mutation { createAgent(input: { name: "Slow", key: "slow" }) { rawId } }');
    const agentId = agent.body.data.createAgent.rawId;
    const made = await alice.rest('POST', `/v2/agents/${agentId}/triggers`, { name: 'Slow one', prompt: 'Take your time', schedule: null });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    path = `/v2/agents/${agentId}/triggers/${made.body.triggerId}`;
    const ran = await alice.rest('POST', `${path}/run`);
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    runId = ran.body.run.id;
    // The reply has begun, and its first pieces are saved.
    await until('the reply to be under way', async () => {
      const run = (await trigger()).runs[0];
      if (!run?.session_id) return false;
      const session = (await alice.rest('GET', `/v2/sessions/${run.session_id}`)).body;
      return session.messages.some((m: { role: string; content: string }) => m.role === 'assistant' && m.content.startsWith('Half'));
    });
    expect(await trigger()).toMatchObject({ status: 'running', runs: [{ id: runId, status: 'running' }] });
    server.child.kill('SIGKILL');
    await server.exited;
  });

  it('starts again and settles the run as failed from its closed reply; the trigger is free to run again', async () => {
    await start();
    const settled = await until('the run to be settled', async () => {
      const t = await trigger();
      return t.status !== 'running' && t;
    });
    expect(settled).toMatchObject({
      status: 'active',
      error_count: 1,
      last_error: ABANDONED_REPLY,
      runs: [{ id: runId, status: 'failed', error: ABANDONED_REPLY, finished_at: expect.any(String) }],
    });
    const session = (await alice.rest('GET', `/v2/sessions/${settled.runs[0].session_id}`)).body;
    expect(session.messages.find((m: { id: string }) => m.id === settled.runs[0].message_id)).toMatchObject({ status: 'failed' });
    expect(server.output()).not.toMatch(/"level":(50|60)/);

    // Free again: a press of run-now starts a second run (its reply held like the first).
    const again = await alice.rest('POST', `${path}/run`);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.run.id).not.toBe(runId);
  });
});
