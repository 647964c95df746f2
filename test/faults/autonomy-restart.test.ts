import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api-client.ts';
import { type FakeOpenAI, startFakeOpenAI } from '../helpers/fake-openai.ts';
import { freshDatabaseEnv, runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { until } from '../helpers/until.ts';

/** Seconds between a reply and the next turn: the window in which the service is killed. */
const INTERVAL_S = 2;
const TURNS = 3;

/**
 * An autonomous session's service killed with SIGKILL between two turns, then started again on
 * the same data (a PGlite data dir, or PostgreSQL on CI's second lane): the next turn was a job in
 * the database, so the loop goes on after the start and ends at its budget, each turn once.
 */
describe('an autonomous session over a SIGKILL', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let llm: FakeOpenAI;
  let env: Record<string, string>;
  let server: ServerProcess;
  let alice: ReturnType<typeof apiClient>;

  const start = async () => {
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
  };

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    llm = await startFakeOpenAI({ tokens: ['On', ' we', ' go', '.'] });
    env = { ...db.env, LLM_BASE_URL: llm.baseUrl, JOBS_POLL_MS: '500', JOBS_SUPERVISE_S: '1' };
    await start();
    const created = await runCli(['keys', 'create', 'alice', '--json'], env);
    alice = apiClient(() => server.url, JSON.parse(created.stdout).apiKey);
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await llm?.close();
    await db?.drop();
  });

  let sessionId: string;
  let killedAt: number;
  const read = async () => (await alice.rest('GET', `/v2/sessions/${sessionId}`)).body;
  const replies = (body: any) => body.messages.filter((m: { role: string }) => m.role === 'assistant');

  it('takes its opening turn, and is killed while the next one waits', async () => {
    const agentIds: string[] = [];
    for (const name of ['Ada', 'Bo']) {
      const made = await alice.graphql(
        `mutation { createAgent(input: { name: "${name}", key: "${name.toLowerCase()}", public: true }) { rawId } }`,
      );
      agentIds.push(made.body.data.createAgent.rawId);
    }
    const created = await alice.rest('POST', '/v2/sessions/create', { agent_ids: agentIds, budget: { turn_budget: TURNS } });
    sessionId = created.body.session.id as string;
    const on = await alice.rest('PATCH', `/v2/sessions/${sessionId}`, {
      autonomy_settings: { auto_reply: true, reply_interval: INTERVAL_S, actor_selection_method: 'random_exclude_last' },
    });
    expect(on.status).toBe(200);

    // The opening turn done and nothing being written: the next turn waits INTERVAL_S, as a job.
    await until('the first turn to finish', async () => {
      const body = await read();
      return body.session.budget.turns_spent === 1 && replies(body).every((m: { status: string }) => m.status === 'complete') && body;
    });
    server.child.kill('SIGKILL');
    await server.exited;
    killedAt = Date.now();
  });

  it('starts again on the same data', async () => {
    await start();
    expect(server.output()).not.toMatch(/"level":(50|60)/);
  });

  it('goes on after the start, to its budget, each turn taken once', async () => {
    const done = await until('the loop to end at its budget', async () => {
      const body = await read();
      return body.session.autonomy_settings.auto_reply === false && body;
    });
    const written = replies(done);
    expect(done.session.budget).toMatchObject({ turn_budget: TURNS, turns_spent: TURNS });
    expect(written.map((m: { status: string; content: string }) => [m.status, m.content])).toEqual(
      Array.from({ length: TURNS }, () => ['complete', 'On we go.']),
    );
    // Turns after the start: the loop went on from the job the killed process had left.
    expect(written.filter((m: { createdAt: string }) => Date.parse(m.createdAt) > killedAt)).toHaveLength(TURNS - 1);
    for (let i = 1; i < written.length; i++) expect(written[i].sender_id).not.toBe(written[i - 1].sender_id);
    // The model was asked once per turn (and for nothing else: a turn names no session and remembers nothing).
    expect(llm.requests).toHaveLength(TURNS);
  });
});
