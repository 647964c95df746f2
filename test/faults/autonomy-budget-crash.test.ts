import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { ABANDONED_REPLY } from '../../src/domain/replies/recovery.ts';
import { apiClient } from '../helpers/api-client.ts';
import { type FakeOpenAI, startFakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { freshDatabaseEnv, runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { type SseClient, openSse } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { until } from '../helpers/until.ts';

const MAKER_COST = 50;
const GRANT = 400;

/**
 * Two autonomous sessions, each one turn or one tool call from its budget, their service killed
 * with SIGKILL in the middle of that turn, then started again on the same data (a PGlite data
 * dir, or PostgreSQL on CI's second lane). One has a turn budget of 2 and is killed while its
 * second reply streams; the other a manna budget of 100 and is killed while its second turn's
 * tool call (50 manna) holds the rest of it. After the restart neither budget is exceeded, each
 * loop stops with its budget as the reason, and the ledger adds up to the balance.
 */
describe('autonomous sessions with a budget almost spent, over a SIGKILL mid-turn', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let databaseConfig: DatabaseConfig;
  let llm: FakeOpenAI;
  let tools: Awaited<ReturnType<typeof startFakeToolService>>;
  let env: Record<string, string>;
  let server: ServerProcess;
  let alice: ReturnType<typeof apiClient>;
  let apiKey: string;
  const sessions = { turns: '', manna: '' };
  const streams: SseClient[] = [];

  const start = async () => {
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
  };
  const read = async (id: string) => (await alice.rest('GET', `/v2/sessions/${id}`)).body;
  const replies = (body: { messages: { role: string }[] }) => body.messages.filter((m) => m.role === 'assistant') as any[];

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    databaseConfig = db.env.DATABASE_URL ? { kind: 'postgres', url: db.env.DATABASE_URL } : { kind: 'pglite', dataDir: db.env.DATA_DIR! };
    // The first tool call is answered; the second hangs, so its hold is taken when the process dies.
    tools = await startFakeToolService({ hang: true });
    tools.enqueue({ answer: { result: { made: true } } });
    const toolsDir = await toolRegistryWith({
      maker: httpTool('maker', tools.url, `${MAKER_COST} * n`, { timeoutMs: 600_000, retries: 0 }),
    });
    let plainTurns = 0;
    llm = await startFakeOpenAI({ tokens: ['Hm.'] });
    llm.choose((request) => {
      // The manna session's agents have the tool: each turn calls it once, then says what it made.
      if (request.body.tools?.length)
        return request.body.messages.at(-1)?.role === 'tool'
          ? { tokens: ['Made.'] }
          : { toolCalls: [{ id: `call_${request.body.messages.length}`, name: 'maker', arguments: JSON.stringify({ prompt: 'a kite' }) }] };
      // The turn session's: the first reply is whole, the second stops after a piece and waits for ever.
      plainTurns++;
      return plainTurns === 1
        ? { tokens: ['One', ' whole', ' turn.'] }
        : { tokens: ['Cut', ' short', ' here'], gate: (i) => (i >= 1 ? new Promise<void>(() => {}) : undefined) };
    });
    env = {
      ...db.env,
      LLM_BASE_URL: llm.baseUrl,
      TOOLS_DIR: toolsDir,
      JOBS_POLL_MS: '500',
      JOBS_SUPERVISE_S: '1',
      REPLY_CHECKPOINT_MS: '100',
    };
    const created = await runCli(['keys', 'create', 'alice', '--json'], env);
    await runCli(['manna', 'grant', 'alice', String(GRANT)], env);
    apiKey = JSON.parse(created.stdout).apiKey;
    alice = apiClient(() => server.url, apiKey);
    await start();
  });
  afterAll(async () => {
    for (const s of streams) s.close();
    server?.child.kill('SIGKILL');
    await llm?.close();
    await tools?.close();
    await db?.drop();
  });

  /** A session of two new agents (with the tool or without) with this budget, its loop turned on. */
  async function autonomous(names: [string, string], withTool: boolean, budget: Record<string, number>) {
    const ids: string[] = [];
    for (const name of names) {
      const made = await alice.graphql(
        `mutation { createAgent(input: { name: "${name}", key: "${name.toLowerCase()}", public: true${withTool ? ', tools: { maker: true }' : ''} }) { rawId } }`,
      );
      expect(made.body.errors).toBeUndefined();
      ids.push(made.body.data.createAgent.rawId);
    }
    const created = await alice.rest('POST', '/v2/sessions/create', { agent_ids: ids, budget });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.session.id as string;
    const on = await alice.rest('PATCH', `/v2/sessions/${id}`, {
      autonomy_settings: { auto_reply: true, reply_interval: 0, actor_selection_method: 'random_exclude_last' },
    });
    expect(on.status).toBe(200);
    return id;
  }

  it('is killed while one loop writes its last turn and the other holds the last of its manna', async () => {
    sessions.turns = await autonomous(['Ada', 'Bo'], false, { turn_budget: 2 });
    sessions.manna = await autonomous(['Cy', 'Di'], true, { manna_budget: 100, turn_budget: 20 });
    await until('the turn session to be writing its second reply', async () => {
      const body = await read(sessions.turns);
      const [first, second] = replies(body);
      return first?.status === 'complete' && second?.status === 'streaming' && second.content.startsWith('Cut');
    });
    await until('the manna session to hold the rest of its budget', async () => {
      const body = await read(sessions.manna);
      return tools.calls.length === 2 && body.session.budget.manna_spent === 100;
    });
    expect((await alice.rest('GET', '/v2/creators/me')).body.balance).toBe(GRANT - 2 * MAKER_COST);
    server.child.kill('SIGKILL');
    await server.exited;
  });

  it('starts again: neither budget is exceeded, each loop stops with its budget as the reason', async () => {
    // The tool answers from now on; what the loops do after the start is theirs to decide.
    tools.enqueue(...Array.from({ length: 5 }, () => ({ answer: { result: { made: true } } })));
    await start();
    // Watched from the start: the turns cut off are taken again by the queue seconds later.
    for (const id of Object.values(sessions))
      streams.push(await openSse(`${server.url}/v2/sessions/${id}/events`, { headers: { 'x-api-key': apiKey } }));
    const [turnStop, mannaStop] = await Promise.all(streams.map((s) => s.waitFor((f) => f.data?.data?.type === 'autonomy_stopped')));
    expect(turnStop!.data.data).toMatchObject({ reason: 'turn_budget', detail: 'Session turn budget exceeded' });
    expect(mannaStop!.data.data).toMatchObject({ reason: 'manna_budget', detail: 'Session manna budget exceeded' });

    const turns = await read(sessions.turns);
    expect(turns.session.autonomy_settings.auto_reply).toBe(false);
    expect(turns.session.budget).toMatchObject({ turn_budget: 2, turns_spent: 2 });
    expect(replies(turns).map((m) => [m.status, m.error])).toEqual([
      ['complete', null],
      ['failed', ABANDONED_REPLY],
    ]);

    const manna = await read(sessions.manna);
    expect(manna.session.autonomy_settings.auto_reply).toBe(false);
    expect(manna.session.budget.manna_spent).toBe(100);
    expect(manna.session.budget.turns_spent).toBeLessThanOrEqual(20);
    expect(server.output()).not.toMatch(/"level":(50|60)/);
  });

  it('the ledger adds up: the cut-off call was given back once, the balance is the grant less the calls that completed', async () => {
    // The embedded database is one process's at a time: the service stops first.
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    const database = await openDatabase(databaseConfig);
    try {
      const user = await database.prisma.user.findFirstOrThrow({ where: { username: 'alice' } });
      const ledger = await database.prisma.mannaLedger.findMany({
        where: { userId: user.id },
        orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      });
      const calls = await database.prisma.task.findMany({ where: { sessionId: sessions.manna } });
      const completed = calls.filter((c) => c.status === 'completed');
      const sum = (rows: { amount: { toNumber(): number } }[]) => rows.reduce((s, r) => s + r.amount.toNumber(), 0);
      const balance = user.subscriptionBalance.plus(user.foreverBalance).toNumber();
      expect(sum(ledger)).toBe(balance);
      expect(balance).toBe(GRANT - completed.length * MAKER_COST);
      expect(completed.length * MAKER_COST).toBe(100);
      expect(-sum(ledger.filter((r) => r.sessionId === sessions.manna))).toBe(100);
      expect(ledger.filter((r) => r.amount.isPositive() && r.reason.startsWith('refund'))).toHaveLength(1);
    } finally {
      await database.close();
    }
  });
});
