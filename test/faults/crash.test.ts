import { pgBossQueue } from '../../src/jobs/pg-boss.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { applyMigrations } from '../../src/db/migrate.ts';
import { ABANDONED_REPLY } from '../../src/domain/replies/recovery.ts';
import { createServices } from '../../src/domain/services.ts';
import { httpExecutor } from '../../src/executors/http.ts';
import { guardedFetch } from '../../src/outbound/address-guard.ts';
import { createLimits } from '../../src/limits/index.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { chatProviderFor, embeddingProviderFor } from '../../src/providers/index.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';
import { loadToolRegistry } from '../../src/domain/tools/registry.ts';
import { apiClient } from '../helpers/api-client.ts';
import { testConfig } from '../helpers/app.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { freshDatabaseEnv, startServerProcess, type ServerProcess } from '../helpers/process.ts';
import type { SseClient } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

type Person = ReturnType<typeof apiClient>;

const STREAMS = 3;
const QUIET = 3;
const TOOL_PROMPTS = 5;
/** Tool calls the fake service answers; the rest hang, so their holds are running when the process dies. */
const ANSWERED_TOOLS = 2;

/**
 * A server process on a PGlite data dir or PostgreSQL (whichever this run uses) killed with
 * SIGKILL in the middle of a burst of writes (likes and unlikes, prompts streamed and not, tool
 * calls holding manna), then started again on the same data. What the burst had under way when
 * it died is held there by the fakes (a model that waits mid-reply, a tool service that never
 * answers some calls), so the state the kill leaves never depends on timing.
 */
describe('SIGKILL during a burst of writes', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let databaseConfig: DatabaseConfig;
  let llm: FakeOpenAI;
  let tools: Awaited<ReturnType<typeof startFakeToolService>>;
  let env: Record<string, string>;
  let server: ServerProcess;
  let alice: Person;
  let bob: Person;
  let agentId: string;
  let creationIds: string[];
  /** What the clients of streamed prompts saw of each reply before the kill, by message id. */
  const seen = new Map<string, string>();

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    databaseConfig = db.env.DATABASE_URL ? { kind: 'postgres', url: db.env.DATABASE_URL } : { kind: 'pglite', dataDir: db.env.DATA_DIR! };
    llm = await startFakeOpenAI({ tokens: ['Done', '.'] });
    tools = await startFakeToolService({ hang: true });
    tools.enqueue(...Array.from({ length: ANSWERED_TOOLS }, () => ({ answer: { result: { made: true } } })));
    const toolsDir = await toolRegistryWith({ paid_tool: httpTool('paid_tool', tools.url, 'n') });

    // Users, keys, an agent with a paid tool, creations to like and manna, through the services.
    const database = await openDatabase(databaseConfig);
    try {
      await applyMigrations(database.migrationAdapterFactory);
      const config = testConfig(databaseConfig, { toolsDir });
      const services = createServices(database.prisma, await loadToolRegistry(toolsDir), {
        config,
        bus: createMemoryBus(config.events),
        streamLimits: createLimits(config.limits, undefined, console).streams,
        log: console,
        metrics: createMetrics(),
        jobs: pgBossQueue(database.jobs, config.jobs, console),
        chat: chatProviderFor(config.llm),
        embeddings: embeddingProviderFor(config.search.embeddings),
        toolServices: httpExecutor(guardedFetch(config.outbound)),
      });
      const person = async (username: string) => {
        const user = await services.creators.ensureUser(username);
        return { id: user.id, apiKey: (await services.apiKeys.create(user.id)).apiKey };
      };
      const a = await person('alice');
      alice = apiClient(() => server.url, a.apiKey);
      bob = apiClient(() => server.url, (await person('bob')).apiKey);
      const agent = await services.agents.create(await services.apiKeys.authenticate(a.apiKey), {
        name: 'Maker',
        key: 'maker',
        public: true,
        tools: { paid_tool: true },
      });
      agentId = agent.id;
      await services.manna.grant('alice', '2', 'subscription');
      await services.manna.grant('alice', '2', 'forever');
      const creations = await database.prisma.creation.createManyAndReturn({
        data: Array.from({ length: 4 }, (_, i) => ({
          userId: a.id,
          tool: 'flux_dev',
          name: `Creation ${i}`,
          url: `https://cdn.example.com/${i}.png`,
          public: true,
        })),
        select: { id: true },
      });
      creationIds = creations.map((c) => c.id);
    } finally {
      await database.close();
    }

    env = { ...db.env, LLM_BASE_URL: llm.baseUrl, TOOLS_DIR: toolsDir, REPLY_CHECKPOINT_MS: '100' };
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await llm?.close();
    await tools?.close();
    await db?.drop();
  });

  it('is cut by SIGKILL with replies mid-stream, tools holding manna and likes in flight', async () => {
    // Streamed replies stop after three tokens and wait there; tool prompts ask for the paid tool.
    llm.choose((r) => {
      const last = r.body.messages.at(-1);
      if (last?.role !== 'user') return undefined;
      if (last.content?.startsWith('stream'))
        return { tokens: ['Part', ' one', ' two', ' never'], gate: (i) => (i === 3 ? new Promise<void>(() => {}) : undefined) };
      if (last.content?.startsWith('quiet')) return { tokens: Array.from({ length: 20 }, (_, i) => `w${i} `), delayMs: 30 };
      if (last.content?.startsWith('tool'))
        return {
          tokens: ['Making it.'],
          toolCalls: [{ id: 'call_1', name: 'paid_tool', arguments: JSON.stringify({ prompt: last.content, n: 1 }) }],
        };
      return undefined;
    });

    let killed = false;
    let likesDone = 0;
    // Requests cut by the kill count as answered with nothing.
    const request = (person: Person, method: string, path: string, body?: unknown) =>
      person.rest(method, path, body).catch(() => ({ status: 0 }));
    const likeLoops = [alice, bob].flatMap((person) =>
      creationIds.map(async (id) => {
        while (!killed) {
          for (const method of ['POST', 'DELETE'])
            if ((await request(person, method, `/v2/creations/${id}/like`)).status === 200) likesDone++;
        }
      }),
    );

    const streams: SseClient[] = [];
    for (let i = 0; i < STREAMS; i++) streams.push(await alice.stream({ agent_ids: [agentId], content: `stream ${i}` }));
    const prompts = [
      ...Array.from({ length: QUIET }, (_, i) => request(bob, 'POST', '/v2/sessions', { agent_ids: [agentId], content: `quiet ${i}` })),
      ...Array.from({ length: TOOL_PROMPTS }, (_, i) =>
        request(alice, 'POST', '/v2/sessions', { agent_ids: [agentId], content: `tool ${i}` }),
      ),
    ];

    // Every streamed reply has sent its three tokens, every affordable tool call is holding its
    // cost (the hold comes before the call reaches the service), the answered ones are settled
    // (the model is asked again only then), and likes are going on.
    for (const s of streams) await s.waitFor((f) => f.data.data?.type === 'assistant_token' && f.data.data.text === ' two');
    await expect.poll(() => tools.calls.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(4);
    await expect
      .poll(() => llm.requests.filter((r) => r.body.messages.at(-1)?.role === 'tool').length, { timeout: 20_000 })
      .toBeGreaterThanOrEqual(ANSWERED_TOOLS);
    await expect.poll(() => likesDone, { timeout: 20_000 }).toBeGreaterThanOrEqual(20);

    // Streams cut by the kill end with an error: taken before the kill, so none goes unhandled.
    const cut = streams.map((s) => s.done.catch(() => []));
    server.child.kill('SIGKILL');
    killed = true;
    await server.exited;
    await Promise.all([...likeLoops, ...prompts, ...cut]);
    for (const s of streams) {
      for (const f of s.frames) {
        const event = f.data.data;
        if (event?.type === 'assistant_token') seen.set(event.message_id, (seen.get(event.message_id) ?? '') + event.text);
      }
    }
    expect(seen.size).toBe(STREAMS);
    expect([...seen.values()]).toEqual(Array(STREAMS).fill('Part one two'));
  });

  it('starts again on the same data, cleanly, and closes the replies the killed process left', async () => {
    server = await startServerProcess(env);
    await server.waitFor(/listening on/);
    const output = server.output();
    expect(output).toMatch(/replies left unfinished by a stopped process were saved as failed/);
    expect(output).not.toMatch(/"level":(50|60)/);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);

    // A client reading one of the cut sessions sees the reply failed, with what had been saved of it.
    const [messageId, text] = [...seen][0]!;
    const sessions = (await alice.rest('GET', '/v2/sessions?limit=100')).body.sessions;
    const read = await Promise.all(sessions.map(async (s: { id: string }) => (await alice.rest('GET', `/v2/sessions/${s.id}`)).body));
    const reply = read.flatMap((r) => r.messages).find((m: { id: string }) => m.id === messageId);
    expect(reply).toMatchObject({ status: 'failed', error: ABANDONED_REPLY });
    expect(text.startsWith(reply.content)).toBe(true);

    // The service works: a new prompt is answered.
    llm.choose(null);
    const fresh = await bob.stream({ agent_ids: [agentId], content: 'still there?' });
    const frames = await fresh.done;
    expect(frames.map((f) => f.data.data?.message?.status).filter(Boolean)).toContain('complete');

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });

  it('left no partial rows: replies complete or failed, like counts, balances and budgets equal to their rows, no tool call running', async () => {
    const database = await openDatabase(databaseConfig);
    try {
      const sql = database.prisma;
      expect(await sql.message.count({ where: { status: 'streaming' } })).toBe(0);
      const cut = await sql.message.findMany({
        where: { id: { in: [...seen.keys()] } },
        select: { id: true, status: true, error: true, content: true },
      });
      expect(cut).toHaveLength(STREAMS);
      for (const m of cut) {
        expect(m).toMatchObject({ status: 'failed', error: ABANDONED_REPLY });
        expect(seen.get(m.id)!.startsWith(m.content)).toBe(true);
      }

      expect(
        await sql.$queryRaw`SELECT c."id", c."likeCount", (SELECT count(*)::int FROM "Like" l WHERE l."creationId" = c."id") AS likes
          FROM "Creation" c WHERE c."likeCount" <> (SELECT count(*) FROM "Like" l WHERE l."creationId" = c."id")`,
      ).toEqual([]);

      expect(
        await sql.$queryRaw`SELECT u."username" FROM "User" u
          WHERE u."subscriptionBalance" <> (SELECT coalesce(sum("amount"), 0) FROM "MannaLedger" WHERE "userId" = u."id" AND "kind" = 'subscription')
             OR u."foreverBalance" <> (SELECT coalesce(sum("amount"), 0) FROM "MannaLedger" WHERE "userId" = u."id" AND "kind" = 'forever')`,
      ).toEqual([]);
      expect(
        await sql.$queryRaw`SELECT s."id" FROM "Session" s
          WHERE s."mannaSpent" <> -(SELECT coalesce(sum("amount"), 0) FROM "MannaLedger" WHERE "sessionId" = s."id")`,
      ).toEqual([]);

      const calls = await sql.task.findMany({
        select: { id: true, status: true, cost: true, error: true, ledger: { select: { amount: true } } },
      });
      expect(calls.filter((c) => c.status === 'running' || c.status === 'pending')).toEqual([]);
      const byStatus = (status: string) => calls.filter((c) => c.status === status);
      expect(byStatus('completed')).toHaveLength(ANSWERED_TOOLS);
      // Each call the killed process left running was cancelled and its hold given back.
      expect(byStatus('cancelled').length).toBeGreaterThanOrEqual(2);
      for (const c of calls) {
        const net = c.ledger.reduce((sum, row) => sum + row.amount.toNumber(), 0);
        expect(net, `${c.status} ${c.error}`).toBe(c.status === 'completed' ? -c.cost!.toNumber() : 0);
      }
      const alice = await sql.user.findUniqueOrThrow({ where: { username: 'alice' } });
      expect(alice.subscriptionBalance.plus(alice.foreverBalance).toNumber()).toBe(4 - ANSWERED_TOOLS);
    } finally {
      await database.close();
    }
  });
});
